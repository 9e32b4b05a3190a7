#!/bin/sh
# Event plane CPU per batch, before (e1daa1f, JeroMQ poll loop) and after (passes), alternated.
# Jars: mvn -q -B -o -ntp -pl bench -am package -DskipTests at each commit, copied to /tmp/evt-{before,after}.jar.
set -e
cd "$(dirname "$0")"
for round in 1 2; do
  for v in before after; do
    java -cp /tmp/evt-$v.jar dev.kvrouter.bench.index.EventPlaneCpuHarness $v-$round.json 8,64 6 3 20 2>/dev/null | grep workers
  done
done
# Ingest path on both jars (ingest.txt):
# for v in before after before after; do java -Xms2g -Xmx2g -cp /tmp/evt-$v.jar dev.kvrouter.bench.index.IndexIngestCpuHarness - VLLM_MAP 63; done
