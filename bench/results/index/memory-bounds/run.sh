#!/usr/bin/env bash
# Ingestion before (c5752cc) and after the memory bounds (shrinking maps, rings, record areas, event buffers),
# alternating, 3 runs each, huge pages. BEFORE_JAR: benchmarks.jar built at c5752cc (a worktree).
set -euo pipefail
out=bench/results/index/memory-bounds
for i in 1 2 3; do
  for side in before after; do
    jar=bench/target/benchmarks.jar
    [ "$side" = before ] && jar=${BEFORE_JAR:?}
    java -Xms2g -Xmx2g -XX:+UseTransparentHugePages -cp "$jar" \
      dev.kvrouter.bench.index.IndexIngestCpuHarness "$out/ingest-$side-r$i.json" > /dev/null
  done
done
