#!/bin/bash
# new_prefill_idle_relief gated by the held prefix's heat (2026-12-02, session 30; docs/routing.md "Idle relief"):
# the relief at 1 (the default since) against 0, virtual time, kv_aware, same seeds as ../run.sh. Run from the
# repository root after `mvn -q -B -ntp -pl dist -am package -DskipTests`; writes to $OUT (default /tmp/heat-gate).
# The recorded runs came from the same code with the gate behind an experiment switch (-Dkvrouter.reliefGate=heat in
# each report's command; "none" was the relief of ../run.sh, ungated); the committed code always gates, so
# new_prefill_idle_relief=1 here is the recorded "gh" and =0 is "base". Raw: l-gh-s* (coding-agent sessions, light
# load, fresh answers), m-gh-s* (the same with the engine's own answers), h-gh-s* (rho 0.9), light-gh (the earlier
# light-rate suite, seed 1), suite-summary.json (the rho 0.9 suite, both tags, seeds 1-3, Mooncake on seed 1).
# The base runs of the agentic and light shapes are ../agentic/l-base-*, ../model-answers/l-base-*, ../agentic/h-base-*
# and ../light/base (this code reproduces them to within 0.6 ms at p50 and 65 ms at E2E p99 with the relief at 0).
set -euo pipefail
OUT=${OUT:-/tmp/heat-gate}
J="java -Xmx4g -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware"
SHAPE=system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed
for s in 1 2 3; do for t in base:new_prefill_idle_relief=0 gh:new_prefill_idle_relief=1; do n=${t%%:*}
  A="--preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --weights ${t#*:} --seed $s"
  $J $A --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE,answers=fresh,seed=$s" --out $OUT/l-$n-s$s
  $J $A --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE,answers=model,seed=$s" --out $OUT/m-$n-s$s
  $J $A --workload "multi-turn:format=messages,sessions=461,rate=3.073,$SHAPE,answers=fresh,seed=$s" --out $OUT/h-$n-s$s
done; done
for t in base:new_prefill_idle_relief=0 gh:new_prefill_idle_relief=1; do
  $J --weights ${t#*:} --workload mooncake --workload 'system-prompt:format=tokens,count=800,rate=40' \
    --workload 'multi-turn:format=tokens,sessions=200,rate=16,answers=fresh' --workload 'rag:count=800,rate=40' \
    --workload 'best-of-n:groups=200,rate=20' --workload 'unique:count=800,rate=40' --out $OUT/light-${t%%:*}
done
# the rho 0.9 suite (Mooncake on seed 1 only: the other seeds' Mooncake is the same trace)
OUT=$OUT/suite TAGS="base:new_prefill_idle_relief=0 gh:new_prefill_idle_relief=1" SEEDS="1 2 3" EXTRA_SEEDS=" " \
  bash "$(dirname "$0")/../../decode-weight-sweep/run.sh"
# through real Envoy at the light load, the default (the relief with the share) beside round-robin (about 4 min):
# envoy-default/; the relief off and ungated are ../envoy-default and ../envoy-relief
java -Dkvrouter.root=$PWD -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.EnvoyAb --workers 8 \
  --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --routing "routing: {policy: kv_aware}" \
  --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE,answers=fresh" --policies kv_aware,round_robin \
  --warmup 60 --max-seconds 120 --out $OUT/envoy-default
