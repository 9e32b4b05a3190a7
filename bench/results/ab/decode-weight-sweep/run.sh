#!/bin/bash
# The decode-weight sweep of 2026-11-30 (docs/benchmarks/ab.md, "Decode weights 0.1 held + 0.1 read"): kv_aware
# only (the other policies either ignore the weights or are least_load, which reads them the same way), at the
# rho 0.9 rates of the earlier saturation searches, virtual time. Run from the repository root after
# `mvn -q -B -ntp -pl dist -am package -DskipTests`; writes to $OUT (default /tmp/decode-weight-sweep), then
# summarise with the figures wanted (sweep.json here holds every run's kv_aware figures).
#   TAGS: tag:weights pairs, e.g. "h10r10:decode_load_scale=0.1,decode_read_weight=0.1"; SEEDS: e.g. "1 2 3".
set -euo pipefail
OUT=${OUT:-/tmp/decode-weight-sweep}
TAGS=${TAGS:-"m1:decode_load_scale=0.45,decode_read_weight=0.05 h10r10:decode_load_scale=0.1,decode_read_weight=0.1"}
SEEDS=${SEEDS:-"1 2 3"}
J="java -Xmx6g -cp dist/target/kvrouter.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware"
for s in $SEEDS; do for spec in $TAGS; do t=${spec%%:*}; W="--weights ${spec#*:} --seed $s"; D=$OUT/s$s/$t; mkdir -p $D
$J $W --workload mooncake:seed=$s,speed=2.567 --out $D/mooncake > $D/mooncake.log 2>&1
$J $W --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=$s \
  --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=$s \
  --workload multi-turn:format=tokens,sessions=1027,rate=34.24,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s \
  --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s \
  --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=$s \
  --workload unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256,seed=$s --out $D/production > $D/production.log 2>&1
$J $W --workload system-prompt:format=tokens,count=4000,rate=349.9,seed=$s --workload multi-turn:format=tokens,sessions=2688,rate=89.61,answers=fresh,seed=$s \
  --workload rag:count=4000,rate=531.8,seed=$s --workload best-of-n:groups=1000,rate=45.79,seed=$s --workload unique:count=4000,rate=169.2,seed=$s \
  --out $D/small > $D/small.log 2>&1
$J $W --preset llama3.1-8b-a100-40g --workload multi-turn:format=tokens,sessions=369,rate=6.157,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=$s \
  --out $D/a100-mt > $D/a100.log 2>&1
$J $W --preset gemma3-12b-h100 --tokenizer .cache/tokenizers/gemma3 --multimodal gemma3 \
  --workload image-qa:count=40000,rate=150.6,images=5000,per-request=1..3,zipf=0.8,system=128,question=16..64,output=32..128,uuid=yes,seed=$s \
  --out $D/imgqa12b > $D/imgqa.log 2>&1
done; done
# Seeds 4-7 of the RAG specs (and RAG over 4,096 documents), system prompts and multi-turn beside them: RAG's
# request imbalance is seed-sensitive.
for s in ${EXTRA_SEEDS:-4 5 6 7}; do for spec in $TAGS; do t=${spec%%:*}; D=$OUT/s$s/$t; mkdir -p $D
$J --weights ${spec#*:} --seed $s \
  --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=$s \
  --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=$s \
  --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=$s --workload rag:count=4000,rate=531.8,seed=$s \
  --workload rag:count=3000,rate=32.62,documents=4096,document=4096..12288,output=64..256,seed=$s --out $D/prodx > $D/prodx.log 2>&1
done; done
