#!/usr/bin/env python3
"""Summarises a run.sh output directory (argument, default /tmp/time-cost) into summary.json beside this script
and a markdown table on stdout: per shape, workload and policy, seeds side by side (kv_time = kv_aware with the time
model)."""
import json, os, sys

root = sys.argv[1] if len(sys.argv) > 1 else "/tmp/time-cost"
rows = []
for seed in sorted(os.listdir(root)):
    for shape in sorted(os.listdir(os.path.join(root, seed))):
        for tag in ("base", "time"):
            f = os.path.join(root, seed, shape, tag, "report.json")
            if not os.path.exists(f):
                continue
            for w in json.load(open(f))["workloads"]:
                for r in w["results"]:
                    rows.append({
                        "seed": seed, "shape": shape,
                        # the suite runs two multi-turn workloads, told apart by their answers
                        "workload": w["name"] + ("-fresh" if "answers=fresh" in w["spec"] else ""),
                        "policy": "kv_time" if tag == "time" else r["policy"],
                        "ttft_p50": r["ttftMs"]["p50"], "ttft_p99": r["ttftMs"]["p99"],
                        "e2e_p50": r["e2eMs"]["p50"], "e2e_p99": r["e2eMs"]["p99"],
                        "served": r["cache"]["servedShare"], "imbalance": r["balance"]["requestImbalance"],
                        "failed": r["counts"]["failed"]})
json.dump(rows, open(os.path.join(os.path.dirname(os.path.abspath(__file__)), "summary.json"), "w"), indent=1)
# one row per workload and policy, the seeds side by side (s1 / s2 / ...)
seeds = sorted({r["seed"] for r in rows})
print("| workload (" + " / ".join(seeds) + ") | policy | TTFT p50 ms | TTFT p99 ms | E2E p50 ms | E2E p99 ms | served | req imbalance |")
print("|---|---|---:|---:|---:|---:|---:|---:|")
order = {"kv_aware": 0, "kv_time": 1, "round_robin": 2, "least_load": 3}
keys = sorted({(r["shape"], r["workload"], r["policy"]) for r in rows},
              key=lambda k: (k[0], k[1], order.get(k[2], 9)))
def cell(shape, workload, policy, f):
    got = {r["seed"]: r for r in rows if (r["shape"], r["workload"], r["policy"]) == (shape, workload, policy)}
    return " / ".join(f(got[s]) if s in got else "-" for s in seeds)
for shape, workload, policy in keys:
    name = f"**{policy}**" if policy == "kv_time" else policy
    print(f"| {shape}: {workload} | {name} | " + " | ".join([
        cell(shape, workload, policy, lambda r: f"{r['ttft_p50']:,.1f}"),
        cell(shape, workload, policy, lambda r: f"{r['ttft_p99']:,.0f}"),
        cell(shape, workload, policy, lambda r: f"{r['e2e_p50']:,.0f}"),
        cell(shape, workload, policy, lambda r: f"{r['e2e_p99']:,.0f}"),
        cell(shape, workload, policy, lambda r: f"{100 * r['served']:.1f}%"),
        cell(shape, workload, policy, lambda r: f"{r['imbalance']:.2f}")]) + " |")
