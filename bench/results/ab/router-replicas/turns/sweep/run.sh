#!/bin/bash
# Best-of-4 through two synced router replicas in virtual time: seeds 1-5, replica link delay 1 / 5 / 20 ms, the
# dist build before the shared tie-breaks (c03aac8, JAR_DIR/kv-base.jar) and after (6ebfe4d, JAR_DIR/kv-final.jar).
# Each run's report.json is summarized into sweep.json (docs/benchmarks/ab.md, "Best-of-N siblings on two replicas").
set -euo pipefail
for jar in base final; do for d in 1 5 20; do for s in 1 2 3 4 5; do
  java -Xmx3g -cp ${JAR_DIR:-/tmp}/kv-$jar.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false \
    --policies kv_aware --router-replicas 2 --replica-sync-ms $d --seed $s \
    --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s \
    --out /tmp/sibling-sweep/$jar-d$d-s$s > /dev/null
done; done; done
