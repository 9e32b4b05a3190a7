#!/usr/bin/env python3
"""Router replicas scraping together (the patch) against spread over the interval (this build): two synced
replicas, virtual time and through real Envoy. Per run TTFT p50 / p99 ms, served of the ideal, request imbalance.
Writes summary.json beside this script."""
import json
import os

HERE = os.path.dirname(os.path.abspath(__file__))


def results(path):
    r = json.load(open(os.path.join(HERE, path, 'report.json')))
    out = {}
    for w in r['workloads']:
        x = w['results'][0]
        out[w['spec']] = {'ttftP50Ms': x['ttftMs']['p50'], 'ttftP99Ms': x['ttftMs']['p99'],
                          'servedVsIdeal': x['cache'].get('servedVsIdeal'),
                          'requestImbalance': x['balance']['requestImbalance']}
    return out


def sibling_splits(path):
    f = os.path.join(HERE, path, 'sibling-groups.json')
    return json.load(open(f))['split'] if os.path.exists(f) else None


virtual = []
for grid, spread, one in [('virtual/r2s', '../router-replicas/turns/r2s', '../router-replicas/turns/r1'),
                          ('virtual/bestofn-s2', 'virtual/bestofn-s2-spread', None),
                          ('virtual/bestofn-s3', 'virtual/bestofn-s3-spread', None)]:
    g, b = results(grid), results(spread)
    o = results(one) if one else {}
    for spec in g:
        virtual.append({'spec': spec, 'grid': g[spec], 'spread': b[spec], 'oneRouter': o.get(spec)})
envoy = []
for name in ['envoy-bestofn-r2-sync-grid', 'envoy-bestofn-r2-sync-grid-before', 'envoy-rag-s1-r2-sync-grid',
             'envoy-rag-s1-r2-sync-grid-before', 'envoy-rag-s1-r2-sync-grid-2', 'envoy-rag-s1-r2-sync-grid-before-2']:
    (spec, figures), = results(name).items()
    envoy.append({'run': name, 'grid': not name.endswith(('before', 'before-2')), 'spec': spec, **figures,
                  'siblingGroupsSplit': sibling_splits(name)})
json.dump({'schema': 'kvrouter.scrape-grid/1', 'generatedAt': '2026-12-01', 'kept': False,
           'machine': '2 vCPU Xeon VM (virtual time: figures do not depend on load)',
           'command': 'bench/results/ab/scrape-grid/run.sh (with and without scrape-grid.patch)',
           'virtual': virtual, 'envoy': envoy}, open(os.path.join(HERE, 'summary.json'), 'w'), indent=1)
for r in envoy:
    print(r)
