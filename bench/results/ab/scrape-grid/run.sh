#!/bin/bash
# Tried and not kept (session 23, docs/benchmarks/ab.md "Tried and not kept"): router replicas that scrape the
# workers at the same instants. scrape-grid.patch makes MetricsScraper tick on the wall clock's multiples of the
# interval and the virtual replicas scrape together (instead of spread over the interval). Run from the repository
# root with dist/target/kvrouter.jar built with the patch applied (`git apply .../scrape-grid.patch`, then
# `mvn -q -B -ntp -pl dist -am package -DskipTests`), or without it for the runs before (SUFFIX -spread, -before,
# -before-2). Usage: run.sh virtual|envoy-bestofn|envoy-rag [SUFFIX]; then python3 .../summarize.py.
#   virtual: two synced replicas (1 ms link), the replicas suite on seed 1 (virtual/r2s; before:
#            ../router-replicas/turns/r2s) and best-of-4 alone on seeds 2 and 3 (virtual/bestofn-sN[-spread])
#   envoy-*: two synced replicas through real Envoy (../envoy-router-replicas/run.sh): envoy-<run>-r2-sync-grid[SUFFIX];
#            the second RAG pair with SUFFIX -2 and -before-2. Run order: best-of-4 before, grid; RAG before, grid,
#            grid -2, before -2.
set -euo pipefail
G=bench/results/ab/scrape-grid
W=$1; S=${2:-}
case $W in
  virtual)
    if [ -z "$S" ]; then
      bash bench/results/ab/router-replicas/run.sh 2 kv_aware $G/virtual/r2s --replica-sync-ms 1
    fi
    for s in 2 3; do
      java -Xmx4g -cp dist/target/kvrouter.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware \
        --router-replicas 2 --replica-sync-ms 1 --seed $s \
        --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s --out $G/virtual/bestofn-s$s$S
    done ;;
  envoy-bestofn)
    bash bench/results/ab/envoy-router-replicas/run.sh bestofn kv_aware ../scrape-grid/envoy-bestofn-r2-sync-grid$S \
      --router-replicas 2 --replica-sync ;;
  envoy-rag)
    bash bench/results/ab/envoy-router-replicas/run.sh rag1 kv_aware ../scrape-grid/envoy-rag-s1-r2-sync-grid$S \
      --router-replicas 2 --replica-sync ;;
  *) echo "unknown run $W" >&2; exit 2 ;;
esac
