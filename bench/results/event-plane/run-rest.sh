#!/bin/sh
# The rest between empty passes: fixed 1 ms (4952010, /tmp/evt-rest1.jar) against 1 ms doubling to 4 ms
# (/tmp/evt-rest4.jar), alternated; idle-ish fleet (64 workers, one batch per second each) also on the poll loop
# (e1daa1f, /tmp/evt-before.jar).
set -e
cd "$(dirname "$0")"
for round in 1 2; do
  for v in rest1 rest4; do
    java -cp /tmp/evt-$v.jar dev.kvrouter.bench.index.EventPlaneCpuHarness $v-$round.json 8,64 6 2 20 2>/dev/null | grep workers
  done
  for v in before rest1 rest4; do
    java -cp /tmp/evt-$v.jar dev.kvrouter.bench.index.EventPlaneCpuHarness idle-$v-$round.json 64 6 2 1000 2>/dev/null | grep workers
  done
done
