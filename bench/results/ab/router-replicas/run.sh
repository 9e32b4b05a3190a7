#!/bin/bash
# Router replicas in virtual time (docs/benchmarks/ab.md, "Router replicas: what a second router costs"): the
# production-shape specs at their rho 0.9 rates, seed 1, 8 workers of the H100 preset. Run from the repository
# root after `mvn -q -B -ntp -pl dist -am package -DskipTests`. Usage: run.sh R POLICIES OUT [extra VirtualAb args]
#   r1-kv:      run.sh 1 kv_aware r1-kv                 r2-kv / r4-kv: run.sh 2|4 kv_aware ...
#   r2-kv-s50:  run.sh 2 kv_aware r2-kv-s50 --scrape-ms 50
#   r2-kv-sync: run.sh 2 kv_aware r2-kv-sync --replica-sync-ms 1   (r4-kv-sync likewise with 4)
#   r1-ll / r2-ll: run.sh 1|2 least_load,round_robin ...
#   turns/* (session 21, the replicas' shared tie-breaks, prefill trim and carried prediction; turns/summary.json
#   puts each beside its run before): run.sh 1 kv_aware bench/results/ab/router-replicas/turns/r1, likewise
#   turns/r2s and turns/r4s with 2|4 and --replica-sync-ms 1, turns/r2 and turns/r4 with 2|4
set -euo pipefail
R=$1; P=$2; D=$3; shift 3; s=1
java -Xmx5g -cp dist/target/kvrouter.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies $P \
  --router-replicas $R --seed $s "$@" \
  --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=$s \
  --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=$s \
  --workload multi-turn:format=tokens,sessions=1027,rate=34.24,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s \
  --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s \
  --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s \
  --workload unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256,seed=$s --out "$D"
