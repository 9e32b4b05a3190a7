#!/usr/bin/env bash
# Event ingestion before (885df03) and after (the engine-hash alias fix) the WorkerView change, alternating,
# under the bench lock. OLD and NEW are benchmarks.jar files built at those commits.
set -euo pipefail
out=$(dirname "$0")
for i in 1 2; do
  for v in old new; do
    jar=$([ $v = old ] && echo "$OLD" || echo "$NEW")
    flock /tmp/kvrouter-bench.lock java -Xms2g -Xmx2g -XX:+UseTransparentHugePages -cp "$jar" \
      dev.kvrouter.bench.index.IndexIngestCpuHarness "$out/$v-$i.json"
    uptime >> "$out/load.txt"
  done
done
