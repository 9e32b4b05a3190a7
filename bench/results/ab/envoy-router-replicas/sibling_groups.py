#!/usr/bin/env python3
"""Best-of-N siblings in a two-replica EnvoyAb run: how many groups were split over workers, and why.

Usage: sibling_groups.py DIR [MEASURED_FROM_GROUP]
DIR is the run's stack directory (EnvoyAb's temporary /tmp/kvrouter-envoy-ab*: the first replica's router.log,
the second's in replica-1/router.log). Siblings are grouped by prompt size within half a second of each other;
the first MEASURED_FROM_GROUP groups (default 50: the 200 warm-up requests of best-of-4) are left out. Reads
only the decision records (ids, sizes, per-candidate costs and in-flight counts; no prompt text).

Causes, from the first decision on each replica: the other replica saw the chosen worker's prediction and chose
on load; saw requests in flight there but no prediction (any request: the records do not say whether the sibling
was among them; outputs written before 2026-12-01 session 24 call this 'saw the reservation, not its
prediction'); heard nothing of it; or both first decisions agreed and a later sibling left. Groups are formed on
the records' ts, the decision's time since session 24 (the time the line was written before).
"""
import collections
import json
import sys
from datetime import datetime


def records(d):
    out = []
    for rep, f in (('A', d + '/router.log'), ('B', d + '/replica-1/router.log')):
        for line in open(f):
            if line.startswith('{"event":"decision"'):
                r = json.loads(line)
                r['rep'] = rep
                r['t'] = datetime.fromisoformat(r['ts'].replace('Z', '+00:00')).timestamp()
                out.append(r)
    return sorted((r for r in out if r['prompt_tokens'] > 1000), key=lambda r: r['t'])


def groups(recs):
    gs = []
    for r in recs:
        for g in gs[-6:]:
            if g[0]['prompt_tokens'] == r['prompt_tokens'] and r['t'] - g[0]['t'] < 0.5:
                g.append(r)
                break
        else:
            gs.append([r])
    return gs


def first(g, rep):
    xs = [x for x in g if x['rep'] == rep]
    return xs[0] if xs else None


def main():
    d = sys.argv[1]
    skip = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    gs = groups(records(d))[skip:]
    split = [g for g in gs if len({x['chosen'] for x in g}) > 1]
    cross = [g for g in split if len({x['rep'] for x in g}) > 1]
    causes = collections.Counter()
    ties = 0
    for g in cross:
        a, b = first(g, 'A'), first(g, 'B')
        if a['chosen'] != b['chosen'] and ({c['worker']: c['cost'] for c in a['candidates']}
                                           == {c['worker']: c['cost'] for c in b['candidates']}):
            ties += 1
        for one, other in ((a, b), (b, a)):
            w = one['chosen']
            c = next(x for x in other['candidates'] if x['worker'] == w)
            if other['chosen'] != w:
                if c['overlap']['predicted'] > 0:
                    causes['saw the prediction, chose another worker on load'] += 1
                elif c['active_requests'] > 0:
                    causes['saw requests in flight there, no prediction'] += 1
                else:
                    causes['heard nothing of it'] += 1
                break
        else:
            causes['first decisions agreed, a later sibling left'] += 1
    print(json.dumps({'groups': len(gs), 'split': len(split), 'splitOverBothReplicas': len(cross),
                      'pureTies': ties, 'causes': dict(causes)}))


if __name__ == '__main__':
    main()
