#!/bin/bash
# new_prefill_idle_relief (2026-12-02, docs/routing.md "Idle relief"): kv_aware with the relief off (the default) and
# at 1, virtual time, same seeds. Run from the repository root after `mvn -q -B -ntp -pl dist -am package
# -DskipTests`; writes to $OUT (default /tmp/idle-relief). The raw reports here: agentic/ (coding-agent sessions
# over /v1/messages, light load l-* and rho 0.9 h-*, seeds 1-3), light/ (the earlier light-rate suite, seed 1);
# suite-summary.json: medians over seeds 1-3 of the rho 0.9 suite (the decode-weight sweep's specs), both tags.
set -euo pipefail
OUT=${OUT:-/tmp/idle-relief}
J="java -Xmx4g -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware"
# answers=fresh: the recorded runs' answers, which no engine generated (the workload's default is the engine's own
# tool-call answers since 2026-12-02: SHAPE=...,answers=model; the tool inputs changed slightly with them)
SHAPE=${SHAPE:-system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=fresh}
for s in 1 2 3; do for t in base:new_prefill_idle_relief=0 i1:new_prefill_idle_relief=1; do n=${t%%:*}
  $J --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --weights ${t#*:} --seed $s \
    --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE,seed=$s" --out $OUT/agentic/l-$n-s$s
  $J --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --weights ${t#*:} --seed $s \
    --workload "multi-turn:format=messages,sessions=461,rate=3.073,$SHAPE,seed=$s" --out $OUT/agentic/h-$n-s$s
done; done
for t in base:new_prefill_idle_relief=0 i1:new_prefill_idle_relief=1; do
  $J --weights ${t#*:} --workload mooncake --workload 'system-prompt:format=tokens,count=800,rate=40' \
    --workload 'multi-turn:format=tokens,sessions=200,rate=16,answers=fresh' --workload 'rag:count=800,rate=40' \
    --workload 'best-of-n:groups=200,rate=20' --workload 'unique:count=800,rate=40' --out $OUT/light/${t%%:*}
done
# the rho 0.9 suite, seeds 1-3 (about 20 min per seed and tag on 2 vCPUs)
OUT=$OUT/suite TAGS="base:new_prefill_idle_relief=0 i1:new_prefill_idle_relief=1" SEEDS="1 2 3" EXTRA_SEEDS=" " \
  bash "$(dirname "$0")/../decode-weight-sweep/run.sh"
# through real Envoy at the light load, relief on then off, each run beside round-robin (about 4 min each)
SHAPE=${SHAPE:-system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=fresh}
for t in relief:"routing: {policy: kv_aware, weights: {new_prefill_idle_relief: 1}}" default:"routing: {policy: kv_aware}"; do
  java -Dkvrouter.root=$PWD -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.EnvoyAb --workers 8 \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --routing "${t#*:}" \
    --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE" --policies kv_aware,round_robin \
    --warmup 60 --max-seconds 120 --out $OUT/envoy-${t%%:*}
done
# the light load again with the engine's own tool-call answers (the workload's default since 2026-12-02), beside
# round-robin: model-answers/
MSHAPE=system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=model
for s in 1 2 3; do for t in base:new_prefill_idle_relief=0 i1:new_prefill_idle_relief=1; do
  java -Xmx4g -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --policies kv_aware,round_robin --weights ${t#*:} \
    --seed $s --workload "multi-turn:format=messages,sessions=20,rate=0.5,$MSHAPE,seed=$s" \
    --out $OUT/model-answers/l-${t%%:*}-s$s
done; done
