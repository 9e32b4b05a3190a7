#!/bin/bash
# RAG's request imbalance with router replicas over ten seeds, virtual time (docs/benchmarks/ab.md, "Router
# replicas: what a second router costs"): one router, two replicas sharing nothing, two and four synced (1 ms).
# Run from the repository root after `mvn -q -B -ntp -pl dist -am package -DskipTests`; about 3 s per run.
set -euo pipefail
D=bench/results/ab/router-replicas/rag-seeds
for s in 1 2 3 4 5 6 7 8 9 10; do
  for cfg in "r1|--router-replicas 1" "r2|--router-replicas 2" "r2-sync|--router-replicas 2 --replica-sync-ms 1" \
      "r4-sync|--router-replicas 4 --replica-sync-ms 1"; do
    n=${cfg%%|*}; a=${cfg#*|}
    java -Xmx5g -cp dist/target/kvrouter.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false \
      --policies kv_aware $a --seed $s \
      --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s --out $D/$n-s$s
  done
done
