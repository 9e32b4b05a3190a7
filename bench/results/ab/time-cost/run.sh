#!/bin/bash
# The time model (docs/routing.md "A cost in time", 2026-12-02, experiment): kv_aware priced in predicted
# milliseconds beside kv_aware with the default block weights, round_robin and least_load, virtual time. Run from
# the repository root after `mvn -q -B -ntp -pl dist -am package -DskipTests`; writes to $OUT (default
# /tmp/time-cost): base (the three policies, default weights) and time (kv_aware with the time model) per shape.
# Each preset gets its own coefficients, derived from the simulator's roofline (docs/routing.md has the
# derivation): prefill us per token = 2 x linear params / (peak x MFU 0.5); step us = 500 + weight bytes /
# (HBM x 0.8); us per thousand resident tokens = 1000 x KV bytes per token / (HBM x 0.8); step_tokens vLLM's budget.
#   SEEDS: e.g. "1 2"; SHAPES: any of "light suite" (light = coding-agent sessions at the light load of
#   ../idle-relief/heat-gate/run.sh; suite = the rho 0.9 suite of ../decode-weight-sweep/run.sh, Mooncake on seed 1).
# Also recorded (agent-model/, kv_aware only, seeds 1-2): the light shape with the engine's own answers, as
# ../idle-relief/heat-gate/run.sh's m- runs: answers=model in the workload, default weights against T_QWEN_H100 below.
# Seed 2 of the suite and agent-model/ were run by a second helper with this script and the same cost code.
set -euo pipefail
OUT=${OUT:-/tmp/time-cost}
SEEDS=${SEEDS:-"1 2"}
SHAPES=${SHAPES:-"light suite"}
T_LLAMA_H100=time_prefill_us_per_token=28.22,time_step_us=6493,time_step_us_per_ktoken=48.9,step_tokens=8192
T_QWEN_H100=time_prefill_us_per_token=28.08,time_step_us=6612,time_step_us_per_ktoken=55.0,step_tokens=8192
T_LLAMA_A100_40G=time_prefill_us_per_token=89.48,time_step_us=13410,time_step_us_per_ktoken=105.4,step_tokens=2048
T_GEMMA12_H100=time_prefill_us_per_token=43.49,time_step_us=9280,time_step_us_per_ktoken=146.7,step_tokens=8192
J="java -Xmx4g -cp ${JAR:-dist/target/kvrouter.jar} dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false"
# run <dir> <time weights> <args...>: the base policies, then the time model, on the same workload and seed
run() { local d=$1 t=$2; shift 2; mkdir -p $d
  $J --policies kv_aware,round_robin,least_load "$@" --out $d/base > $d/base.log 2>&1
  $J --policies kv_aware --weights $t "$@" --out $d/time > $d/time.log 2>&1; }
SHAPE=system=2500,turns=6..12,think=2,user=16..64,output=32..256,result=128..1536,loop=closed
for s in $SEEDS; do
  if [[ " $SHAPES " == *" light "* ]]; then
    run $OUT/s$s/light $T_QWEN_H100 --preset qwen3-8b-h100 --tokenizer .cache/tokenizers/qwen3 --seed $s \
      --workload "multi-turn:format=messages,sessions=20,rate=0.5,$SHAPE,answers=fresh,seed=$s"
  fi
  if [[ " $SHAPES " == *" suite "* ]]; then
    if [ "$s" = 1 ]; then run $OUT/s$s/mooncake $T_LLAMA_H100 --seed $s --workload mooncake:seed=$s,speed=2.567; fi
    run $OUT/s$s/production $T_LLAMA_H100 --seed $s \
      --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=$s \
      --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=$s \
      --workload multi-turn:format=tokens,sessions=1027,rate=34.24,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s \
      --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s \
      --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s \
      --workload unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256,seed=$s
    run $OUT/s$s/small $T_LLAMA_H100 --seed $s \
      --workload system-prompt:format=tokens,count=4000,rate=349.9,seed=$s --workload multi-turn:format=tokens,sessions=2688,rate=89.61,answers=fresh,seed=$s \
      --workload rag:count=4000,rate=531.8,seed=$s --workload best-of-n:groups=1000,rate=45.79,seed=$s --workload unique:count=4000,rate=169.2,seed=$s
    run $OUT/s$s/a100-mt $T_LLAMA_A100_40G --preset llama3.1-8b-a100-40g --seed $s \
      --workload multi-turn:format=tokens,sessions=369,rate=6.157,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s
    run $OUT/s$s/imgqa12b $T_GEMMA12_H100 --preset gemma3-12b-h100 --tokenizer .cache/tokenizers/gemma3 --multimodal gemma3 --seed $s \
      --workload image-qa:count=40000,rate=150.6,images=5000,per-request=1..3,zipf=0.8,system=128,question=16..64,output=32..128,uuid=yes,seed=$s
  fi
done
