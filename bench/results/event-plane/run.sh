#!/bin/sh
# Event plane CPU per batch (EventPlaneCpuHarness), jars alternated. Jars: mvn -q -B -o -ntp -pl bench -am package
# -DskipTests at each commit, copied to /tmp/evt-<name>.jar: before = e1daa1f (JeroMQ poll loop), after and
# rest1 = 4952010 (passes, fixed 1 ms rest), rest4 = 75cfbcd (rest doubling from 1 to 4 ms).
set -e
cd "$(dirname "$0")"
# harness <jar> <out.json> <workers> <window s> <windows> <period ms>
harness() {
  java -cp /tmp/evt-$1.jar dev.kvrouter.bench.index.EventPlaneCpuHarness $2 $3 $4 $5 $6 2>/dev/null | grep workers
}
# poll loop against passes, 50 batches/s per worker (before-N.json, after-N.json; run-stdout.txt)
for round in 1 2; do
  for v in before after; do harness $v $v-$round.json 8,64 6 3 20; done
done
# the rest between empty passes, and a quiet fleet (rest*-N.json, idle-*-N.json; run-rest-stdout.txt)
for round in 1 2; do
  for v in rest1 rest4; do harness $v $v-$round.json 8,64 6 2 20; done
  for v in before rest1 rest4; do harness $v idle-$v-$round.json 64 6 2 1000; done
done
# Ingest path on both jars (ingest.txt):
# for v in before after before after; do java -Xms2g -Xmx2g -cp /tmp/evt-$v.jar dev.kvrouter.bench.index.IndexIngestCpuHarness - VLLM_MAP 63; done
