#!/bin/bash
# Router replicas through real Envoy (docs/benchmarks/ab.md, "Router replicas through real Envoy"): 8 simulated
# workers of the H100 preset (Llama 3.1 8B), seed 1, the production shapes at their rho 0.9 rates, one router
# against two replicas sharing nothing and two sharing their load (replicas:). Run from the repository root after
# `mvn -q -B -ntp -pl dist -am package -DskipTests`. Usage: run.sh WORKLOAD POLICIES OUT [extra EnvoyAb args]
#   unique-r1:        run.sh unique kv_aware,least_load unique-r1
#   unique-r2:        run.sh unique kv_aware unique-r2 --router-replicas 2
#   unique-r2-sync:   run.sh unique kv_aware unique-r2-sync --router-replicas 2 --replica-sync
#   sysprompt-r1 / -r2 / -r2-sync likewise with the workload `sysprompt`
#   crash-r2-sync:    run.sh multiturn-a100 kv_aware crash-r2-sync --router-replicas 2 --replica-sync --crash-router
#   rag-sN-r2-sync:   run.sh ragN kv_aware rag-sN-r2-sync --router-replicas 2 --replica-sync   (rag-s1-r1: one router)
#   unique-r2-sync-before / -after (session 20): JAR=<951fba3 build> run.sh unique kv_aware unique-r2-sync-before
#                     --router-replicas 2 --replica-sync, then the same with this build's jar and -after
#   bestofn-r2-sync-before / -after (session 21, the replicas' shared turns): JAR=<c03aac8 build> run.sh bestofn
#                     kv_aware bestofn-r2-sync-before --router-replicas 2 --replica-sync, then this build's and -after;
#                     bestofn-r1: run.sh bestofn kv_aware bestofn-r1. Split groups from the decision records:
#                     sibling_groups.py /tmp/kvrouter-envoy-ab<run> > <run>/sibling-groups.json
#   bestofn-r2-sync-order[-2] (session 21, an experiment not kept: Router reading the load before the lookup):
#                     run.sh bestofn kv_aware <run> --router-replicas 2 --replica-sync with that build
#   crash-r2-sync-turns (session 21): run.sh multiturn-a100 kv_aware crash-r2-sync-turns --router-replicas 2
#                     --replica-sync --crash-router (crash-r2-sync with this session's build)
#   bestofn-r2-sync-trim[-2] (session 23, own reservations trimmed like copies): run.sh bestofn kv_aware
#                     bestofn-r2-sync-trim --router-replicas 2 --replica-sync (twice; sibling_groups.py as above)
#   crash-r2-sync-hc (session 23, the router cluster's health check at 1 s timeout and three unanswered checks):
#                     run.sh multiturn-a100 kv_aware crash-r2-sync-hc --router-replicas 2 --replica-sync --crash-router
#   rag-s1-r2-sync-every16-before / -turns / -turns-2 (session 21): [JAR=<c03aac8 build>] run.sh rag1 kv_aware <run>
#                     --router-replicas 2 --replica-sync --truth-check-every 16
set -euo pipefail
W=$1; P=$2; D=$3; shift 3
JAR=${JAR:-dist/target/kvrouter.jar}
preset=llama3.1-8b-h100; max=900
case $W in
  unique) spec=unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256 ;;
  sysprompt) spec=system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000 ;;
  # the router-crash run of bench/results/ab/worker-crash/router-crash, with its crash at 20 s for 10 s
  multiturn-a100) preset=llama3.1-8b-a100-40g; max=300
    spec=multi-turn:format=tokens,sessions=200,rate=6.52,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=1 ;;
  # RAG over 256 long documents, seed N (the single router's runs: bench/results/ab/envoy-rag-seeds)
  rag[0-9]*) spec=rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=${W#rag} ;;
  # best-of-4 at its rho 0.9 rate, 600 groups (2,400 requests) to fit a run in about four minutes
  bestofn) spec=best-of-n:groups=600,rate=4.35,prompt=4096..16384,output=64..256 ;;
  *) echo "unknown workload $W" >&2; exit 2 ;;
esac
flock /tmp/kvrouter-bench.lock java -Xmx3g -Dkvrouter.root=$PWD -cp "$JAR" dev.kvrouter.examples.ab.EnvoyAb \
  --workers 8 --preset $preset --model meta-llama/Llama-3.1-8B-Instruct --tokenizer .cache/tokenizers/llama3_1 \
  --workload "$spec" --policies "$P" --warmup 200 --max-seconds $max "$@" \
  --out bench/results/ab/envoy-router-replicas/$D
