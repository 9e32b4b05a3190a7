#!/usr/bin/env bash
# ScrapeCostBench, the whole vLLM page (filter off) and the filtered request (filter on), alternating, 3 rounds.
# From the repository root, after `mvn -q -B -ntp -pl bench -am package -DskipTests`.
set -euo pipefail
out=bench/results/scrape-filter
for i in 1 2 3; do
  for f in false true; do
    java -Dkvrouter.root="$PWD" -cp bench/target/benchmarks.jar dev.kvrouter.bench.load.ScrapeCostBench \
      --workers 8 --warmup-seconds 20 --seconds 20 --filter "$f" --out "$out/filter-$f-$i.json" > /dev/null
  done
done
