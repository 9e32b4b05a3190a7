#!/bin/bash
# Coding-agent sessions with Qwen3 thinking answers (multi-turn:format=messages,reasoning=128: 128 words of thinking
# per answer, resent as a thinking block) against the same sessions without, virtual time, seed 1, the rho 0.9
# operating point of the fresh-answer search (461 sessions at 3.073/s), kv_aware and round-robin. Run from the
# repository root after `mvn -q -B -o -ntp -pl dist -am package -DskipTests`.
set -euo pipefail
OUT=${OUT:-bench/results/ab/messages-agentic/virtual-thinking}
SHAPE=system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed,answers=model
for v in base:"" reasoning128:",reasoning=128"; do
  java -Xmx4g -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false \
    --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --seed 1 --policies kv_aware,round_robin \
    --workload "multi-turn:format=messages,sessions=461,rate=3.073,$SHAPE,seed=1${v#*:}" --out $OUT/${v%%:*}
done
