#!/bin/bash
# The anchors' policies beside ours through real Envoy (2026-12-01, session 22; docs/benchmarks/ab.md, "Against
# Dynamo's cost and llm-d's scorers"): 8 simulated vLLM workers, seed 1, the router scraping every 50 ms as llm-d
# does, kv_aware, dynamo and llm_d one after another (caches reset between them, 200 warm-up requests first).
# Run from the repository root after `mvn -q -B -ntp -pl dist -am package -DskipTests`.
# Usage: envoy.sh WORKLOAD [POLICIES [DIR]] ; writes bench/results/ab/anchors/DIR (default envoy-WORKLOAD)
#   envoy-rag1-llmd-first: envoy.sh rag1 llm_d,kv_aware envoy-rag1-llmd-first (the first policy after the warm-up
#   runs on a router JVM still compiling; this puts llm_d there)
set -euo pipefail
W=$1; P=${2:-kv_aware,dynamo,llm_d}; D=${3:-envoy-$W}
JAR=${JAR:-dist/target/kvrouter.jar}
preset=llama3.1-8b-h100; max=900
case $W in
  # multi-turn on the A100 40GB preset, 200 sessions (the crash runs' spec)
  multiturn-a100) preset=llama3.1-8b-a100-40g
    spec=multi-turn:format=tokens,sessions=200,rate=6.52,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=1 ;;
  # multi-turn on the H100 preset, the decode-weight sweep's spec (8,011 requests over about 3 minutes a policy)
  multiturn) spec=multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=1 ;;
  rag1) spec=rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=1 ;;
  # best-of-4, 600 groups, and the llm-d system-prompt shape, 1,200 requests: about 2-4 minutes a policy
  bestofn) spec=best-of-n:groups=600,rate=4.35,prompt=4096..16384,output=64..256 ;;
  # the whole Mooncake trace at its rho 0.9 speed (about 7 minutes a policy)
  mooncake) spec=mooncake:speed=2.567 ;;
  sysprompt) spec=system-prompt:format=tokens,count=1200,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000 ;;
  *) echo "unknown workload $W" >&2; exit 2 ;;
esac
flock /tmp/kvrouter-bench.lock java -Xmx3g -Dkvrouter.root=$PWD -cp "$JAR" dev.kvrouter.examples.ab.EnvoyAb \
  --workers 8 --preset $preset --model meta-llama/Llama-3.1-8B-Instruct --tokenizer .cache/tokenizers/llama3_1 \
  --workload "$spec" --policies "$P" --warmup 200 --max-seconds $max \
  --routing 'routing: {policy: kv_aware, scrape: {interval_ms: 50}}' --out bench/results/ab/anchors/$D
