"""Writes summary.json: per run file, each policy's TTFT p50/p99, served share, imbalance and engine-side TTFT."""
import glob
import json
import os

here = os.path.dirname(os.path.abspath(__file__))
rows = {}
for f in sorted(glob.glob(os.path.join(here, "*.json"))):
    if f.endswith("summary.json"):
        continue
    report = json.load(open(f))
    rows[os.path.basename(f)] = [
        {"policy": p["policy"], "ttftP50Ms": p["ttftMs"]["p50"], "ttftP99Ms": p["ttftMs"]["p99"],
         "servedShare": p["cache"]["servedShare"], "requestImbalance": p["balance"]["requestImbalance"],
         "engineTtftMeanMs": (p.get("engineTtft") or {}).get("meanMs"),
         "frontMs": (p.get("engineTtft") or {}).get("frontMs")}
        for p in report["workloads"][0]["results"]]
json.dump(rows, open(os.path.join(here, "summary.json"), "w"), indent=1)
