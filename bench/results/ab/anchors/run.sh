#!/bin/bash
# The anchors' policies beside ours (2026-12-01, session 22; docs/benchmarks/ab.md, "Against Dynamo's cost and
# llm-d's scorers"): kv_aware, dynamo (Dynamo's formula, ties at random) and llm_d (llm-d's precise prefix-cache
# profile: 3 x prefix + 2 x KV utilisation + 2 x queue), round-robin as the common reference, on the rho 0.9 suite
# of the decode-weight sweep, virtual time. Run from the repository root after
# `mvn -q -B -ntp -pl dist -am package -DskipTests`; writes to $OUT (default /tmp/anchors), one directory per scrape
# interval and seed, the seeds of one interval in parallel (3 JVMs of 3 GB; about 6 minutes an interval on 2 vCPUs).
# SCRAPES: scrape intervals in ms (250 is the router's default, 50 llm-d's); SEEDS; POLICIES; JAR.
set -euo pipefail
OUT=${OUT:-/tmp/anchors}
SEEDS=${SEEDS:-"1 2 3"}
SCRAPES=${SCRAPES:-"250 50"}
POLICIES=${POLICIES:-kv_aware,dynamo,llm_d,round_robin}
JAR=${JAR:-dist/target/kvrouter.jar}
run_seed() {
  local ms=$1 s=$2 D=$OUT/scrape$1/s$2
  local J="java -Xmx3g -cp $JAR dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies $POLICIES --scrape-ms $ms --seed $s"
  mkdir -p $D
  $J --workload mooncake:seed=$s,speed=2.567 --out $D/mooncake > $D/mooncake.log 2>&1
  $J --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=$s \
    --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=$s \
    --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s \
    --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s \
    --workload unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256,seed=$s --out $D/production > $D/production.log 2>&1
  $J --preset llama3.1-8b-a100-40g --workload multi-turn:format=tokens,sessions=369,rate=6.157,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s \
    --out $D/a100-mt > $D/a100.log 2>&1
  $J --preset gemma3-12b-h100 --tokenizer .cache/tokenizers/gemma3 --multimodal gemma3 \
    --workload image-qa:count=40000,rate=150.6,images=5000,per-request=1..3,zipf=0.8,system=128,question=16..64,output=32..128,uuid=yes,seed=$s \
    --out $D/imgqa12b > $D/imgqa.log 2>&1
}
for ms in $SCRAPES; do
  for s in $SEEDS; do run_seed $ms $s & done
  wait
done
