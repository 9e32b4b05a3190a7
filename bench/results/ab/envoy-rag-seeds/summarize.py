#!/usr/bin/env python3
"""Summarises EnvoyAb RAG runs (kv_aware only) into summary.json: each run's figures from its report.json, and
from the router's decision records (router.log copied beside it; not kept in the repository, 12 MB a run) the
eviction share the router read and how the requests on a prefix past one worker's share spread over workers.

usage: summarize.py RUN_DIR... > summary.json"""
import collections
import json
import os
import sys

runs = []
for d in sys.argv[1:]:
    rep = json.load(open(os.path.join(d, 'report.json')))
    w = rep['workloads'][0]
    r = next(p for p in w['results'] if p['policy'] == 'kv_aware')
    run = {'run': os.path.basename(d.rstrip('/')), 'spec': w['spec'],
           'load_average_at_start': rep['meta']['loadAverageAtStart'],
           'request_imbalance': r['balance']['requestImbalance'],
           'work_imbalance': r['balance'].get('workImbalance'),
           'mean_load_imbalance': r['balance'].get('meanLoadImbalance'),
           'ttft_p50_ms': r['ttftMs']['p50'], 'ttft_p99_ms': r['ttftMs']['p99'], 'tpot_p99_ms': r['tpotMs']['p99'],
           'served': r['cache']['servedShare'], 'ideal': r['cache']['idealShare']}
    log = os.path.join(d, 'router.log')
    if os.path.exists(log):
        ds = [json.loads(l) for l in open(log) if '"event":"decision"' in l][-r['counts']['completed']:]
        ev = [x.get('eviction_share', 0) for x in ds]
        hot = collections.Counter(x['chosen'] for x in ds if x.get('prefix_heat', 0) >= 0.125)
        run.update({'decisions': len(ds), 'eviction_share_first_100_mean': round(sum(ev[:100]) / 100, 4),
                    'eviction_share_max': round(max(ev), 4),
                    'hot_prefix_requests': sum(hot.values()),
                    'hot_prefix_by_worker': sorted(hot.values(), reverse=True)})
    runs.append(run)
json.dump({'runs': runs}, sys.stdout, indent=1)
print()
