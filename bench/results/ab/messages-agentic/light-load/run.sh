#!/bin/bash
# What kv_aware's concentration costs end to end on coding-agent sessions, at the light load of the Envoy run (20
# sessions at 0.5/s) and at rho 0.9 (461 sessions at 3.073/s), with the defaults and with heavier decode or load
# weights (x-kvrouter-weights for every request). Virtual time: deterministic, seconds per run.
# Run from the repository root after `mvn -q -B -o -ntp -pl dist -am package -DskipTests`.
set -euo pipefail
JAR=${JAR:-dist/target/kvrouter.jar}
OUT=${OUT:-bench/results/ab/messages-agentic/light-load}
# answers=fresh: the recorded runs' answers, which no engine generated (the workload's default is the engine's own
# tool-call answers since 2026-12-02: SHAPE=...,answers=model; the tool inputs changed slightly with them)
SHAPE=${SHAPE:-system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=fresh}
run() { # name, sessions, rate, policies, weights
  local w=()
  [ -n "$5" ] && w=(--weights "$5")
  flock /tmp/kvrouter-bench.lock java -Xmx6g -cp $JAR dev.kvrouter.examples.ab.VirtualAb --workers 8 \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --policies "$4" "${w[@]}" \
    --workload "multi-turn:format=messages,sessions=$2,rate=$3,$SHAPE" --out $OUT/$1
}
run default 20 0.5 kv_aware,round_robin,least_load ""
for w in bounded_load=1.25 bounded_load=2 imbalance_gate=true decode_read_weight=0.3 decode_read_weight=1 \
    decode_load_scale=0.5 decode_load_scale=1; do
  run "$(echo $w | tr '=' '_')" 20 0.5 kv_aware,round_robin "$w"
done
run rho09_default 461 3.073 kv_aware,round_robin ""
for w in decode_load_scale=1 bounded_load=1.25 decode_read_weight=1; do
  run "rho09_$(echo $w | tr '=' '_')" 461 3.073 kv_aware,round_robin "$w"
done
