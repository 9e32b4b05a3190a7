#!/bin/bash
# Claude Code's shape over the Anthropic Messages API (multi-turn:format=messages; docs/loadgen.md): a 2,500-token
# system prompt and 12 tools (about 3.7k tokens) shared by every session, 6-12 turns each resending the history as
# blocks (answer text + tool_use, tool_result of 128-1536 tokens + a short user text, an inline system reminder per
# turn), the next turn 2 s (mean, the tool's run) after the answer (closed loop), the model's own answers (text +
# tool_use scripted in vllm_xargs, the workload's default since 2026-12-02; the results here predate it and were run
# with fresh answers, which answers=fresh in SHAPE selects, tool inputs now drawn from other seeds). Qwen3-8B on H100s
# (its template keeps inline system messages in place), the router's own Messages conversion in both runs.
# Run from the repository root after `mvn -q -B -o -ntp -pl dist -am package -DskipTests`.
#  virtual/: round-robin's capacity searched on this workload, then the A/B at rho 0.9, same seed for every policy.
#  envoy/:   a shortened run through real Envoy, 3 policies, at a light session rate: rho 0.9 is 26 req/s of 5k-25k
#            token prompts, which the router and 8 simulated workers, tokenizing in real time on this 2-vCPU box,
#            could not keep up with.
set -euo pipefail
JAR=${JAR:-dist/target/kvrouter.jar}
OUT=${OUT:-bench/results/ab/messages-agentic}
# answers=fresh: the recorded runs' answers, which no engine generated (the workload's default is the engine's own
# tool-call answers since 2026-12-02: SHAPE=...,answers=model; the tool inputs changed slightly with them)
SHAPE=${SHAPE:-system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=fresh}
uptime > $OUT/load-virtual.txt
flock /tmp/kvrouter-bench.lock java -Xmx6g -cp $JAR dev.kvrouter.examples.ab.VirtualAb --workers 8 \
  --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --saturate 0.9 \
  --policies kv_aware,round_robin,least_load,cache_only \
  --workload "multi-turn:format=messages,sessions=300,rate=2,$SHAPE" --out $OUT/virtual 2>&1 | tee $OUT/virtual.log
# seeds 2 and 3 at seed 1's rho 0.9 operating point (virtual/saturation.json), no search
for s in ${SEEDS:-2 3}; do
  flock /tmp/kvrouter-bench.lock java -Xmx6g -cp $JAR dev.kvrouter.examples.ab.VirtualAb --workers 8 \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --seed $s \
    --policies kv_aware,round_robin,least_load,cache_only \
    --workload "multi-turn:format=messages,sessions=461,rate=3.073,$SHAPE,seed=$s" --out $OUT/virtual-seed$s \
    2>&1 | tee $OUT/virtual-seed$s.log
done
# the engine's own tool-call answers (answers=model, the workload's default since 2026-12-02), seeds 1-3 at the same
# operating point: virtual-model-answers/
for s in 1 2 3; do
  flock /tmp/kvrouter-bench.lock java -Xmx6g -cp $JAR dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --seed $s --policies kv_aware,round_robin,least_load \
    --workload "multi-turn:format=messages,sessions=461,rate=3.073,${SHAPE%,answers=fresh},answers=model,seed=$s" \
    --out $OUT/virtual-model-answers/seed$s
done
if [ "${ENVOY:-1}" = 1 ]; then
  uptime > $OUT/load-envoy.txt
  flock /tmp/kvrouter-bench.lock java -Dkvrouter.root=$PWD -cp $JAR dev.kvrouter.examples.ab.EnvoyAb \
    --workers 8 --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 \
    --workload "multi-turn:format=messages,sessions=${SESSIONS:-20},rate=${RATE:-0.5},$SHAPE" \
    --policies kv_aware,round_robin,least_load --warmup 60 --max-seconds ${MAX_SECONDS:-120} --out $OUT/envoy 2>&1 | tee $OUT/envoy.log
  uptime >> $OUT/load-envoy.txt
fi
