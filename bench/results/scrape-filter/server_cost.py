"""What one scrape costs vLLM's API server process: its /metrics stack in the real libraries
(scripts/fixtures/vllm_metrics.py --serve: FastAPI, prometheus-fastapi-instrumentator, prometheus_client, uvicorn,
vLLM's metric families), asked for the whole page (`/metrics`) and for the router's series (`/metrics/?name[]=...`),
alternating in rounds. CPU is the server process's own (utime + stime from /proc), per request.

Run from the repository root: .venv/bin/python bench/results/scrape-filter/server_cost.py [--engines 1] [--rounds 5]
    [--requests 200] [--out bench/results/scrape-filter/server-cost.json]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import time
import urllib.request

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "../../../scripts/fixtures"))
from vllm_metrics import ROUTER_SERIES as SERIES  # noqa: E402  the series the router's scraper asks for
TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--engines", type=int, default=1)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--requests", type=int, default=200)
    p.add_argument("--out", default="bench/results/scrape-filter/server-cost.json")
    a = p.parse_args()
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    server = subprocess.Popen([sys.executable, "scripts/fixtures/vllm_metrics.py", "--serve", str(port),
                               "--engines", str(a.engines)], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                              text=True)
    try:
        if server.stdout.readline().strip() != "ready":
            sys.exit("server did not start")
        base = f"http://127.0.0.1:{port}"
        query = "&".join("name%5B%5D=" + urllib.parse.quote(n, safe="") for n in SERIES)
        urls = {"whole": base + "/metrics", "filtered": base + "/metrics/?" + query}
        sizes = {k: len(urllib.request.urlopen(u).read()) for k, u in urls.items()}
        for u in urls.values():  # warm-up
            for _ in range(50):
                urllib.request.urlopen(u).read()
        per = {k: [] for k in urls}
        for r in range(a.rounds):
            for k, u in (urls.items() if r % 2 == 0 else reversed(list(urls.items()))):
                c0 = cpu_seconds(server.pid)
                t0 = time.perf_counter()
                for _ in range(a.requests):
                    urllib.request.urlopen(u).read()
                per[k].append({"serverCpuMicrosPerRequest": (cpu_seconds(server.pid) - c0) / a.requests * 1e6,
                               "wallMicrosPerRequest": (time.perf_counter() - t0) / a.requests * 1e6})
        report = {"engines": a.engines, "requestsPerRound": a.requests, "rounds": a.rounds, "bytes": sizes,
                  "loadAverage": os.getloadavg()[0], "rawRounds": per,
                  "medianServerCpuMicrosPerRequest": {k: statistics.median(x["serverCpuMicrosPerRequest"]
                                                                           for x in v) for k, v in per.items()},
                  "medianWallMicrosPerRequest": {k: statistics.median(x["wallMicrosPerRequest"] for x in v)
                                                 for k, v in per.items()}}
        report["cpuRatioWholeOverFiltered"] = (report["medianServerCpuMicrosPerRequest"]["whole"]
                                               / report["medianServerCpuMicrosPerRequest"]["filtered"])
        with open(a.out, "w") as f:
            json.dump(report, f, indent=2)
        print(json.dumps({k: report[k] for k in ("engines", "bytes", "medianServerCpuMicrosPerRequest",
                                                 "medianWallMicrosPerRequest", "cpuRatioWholeOverFiltered",
                                                 "loadAverage")}))
    finally:
        server.terminate()
        server.wait(10)


if __name__ == "__main__":
    import urllib.parse
    main()
