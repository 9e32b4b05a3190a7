#!/usr/bin/env python3
"""Summarises run.sh's reports (OUT/scrapeMS/sN/<run>/report.json) into summary.json: per scrape interval,
workload and policy, each seed's TTFT p50 / p99 / mean, TPOT p99, served share, of ideal, request imbalance, and
kv_aware's ratio to each policy at p50, p99 and mean (other / kv_aware: above 1, kv_aware is faster)."""
import glob, json, os, sys
from statistics import median

root = sys.argv[1] if len(sys.argv) > 1 else '/tmp/anchors'
runs = {}
for f in sorted(glob.glob(os.path.join(root, 'scrape*', 's*', '*', 'report.json'))):
    scrape, seed, run = f.split(os.sep)[-4:-1]
    for w in json.load(open(f))['workloads']:
        key = f"{run}:{w['name']}"
        for x in w['results']:
            c, b, t = x['cache'], x['balance'], x['ttftMs']
            runs.setdefault(scrape, {}).setdefault(key, {}).setdefault(x['policy'], {})[seed] = {
                'ttftP50': t['p50'], 'ttftP99': t['p99'], 'ttftMean': t['mean'], 'tpotP99': x['tpotMs']['p99'],
                'servedShare': c['servedShare'], 'servedVsIdeal': c['servedVsIdeal'],
                'requestImbalance': b['requestImbalance'], 'failed': x['counts']['failed']}
summary = {'source': root, 'runs': runs, 'ratios': {}}
for scrape, ws in runs.items():
    for key, ps in ws.items():
        ours = ps.get('kv_aware', {})
        for p, seeds in ps.items():
            if p == 'kv_aware':
                continue
            r = {}
            for m in ('ttftP50', 'ttftP99', 'ttftMean'):
                vals = [seeds[s][m] / ours[s][m] for s in seeds if s in ours and ours[s][m]]
                r[m] = {'median': round(median(vals), 3), 'min': round(min(vals), 3), 'max': round(max(vals), 3)} if vals else None
            summary['ratios'].setdefault(scrape, {}).setdefault(key, {})[p] = r
json.dump(summary, sys.stdout, indent=1)
