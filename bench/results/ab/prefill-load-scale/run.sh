#!/bin/bash
cd /work/main
J="java -Xmx6g -cp /tmp/s11/kvrouter.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware"
for v in 10 5; do
W="--weights prefill_load_scale=$v"
$J $W --workload mooncake:seed=1,speed=2.567 --out /tmp/s11/pls/p$v/mooncake > /tmp/s11/pls/p$v-mooncake.log 2>&1
$J $W --workload system-prompt:format=tokens,count=3000,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=1 --workload multi-turn:format=tokens,sessions=1067,rate=35.58,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,answers=fresh,seed=1 --workload multi-turn:format=tokens,sessions=1027,rate=34.24,system=500,context=1000,context_max=5000,turns=6..9,user=120..160,output=80..120,seed=1 --workload rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=1 --workload best-of-n:groups=1000,rate=4.35,prompt=4096..16384,output=64..256,seed=1 --workload unique:count=3000,rate=16.6,prompt=4096..16384,output=64..256,seed=1 --out /tmp/s11/pls/p$v/production > /tmp/s11/pls/p$v-production.log 2>&1
$J $W --workload system-prompt:format=tokens,count=4000,rate=349.9,seed=1 --workload multi-turn:format=tokens,sessions=2688,rate=89.61,answers=fresh,seed=1 --workload rag:count=4000,rate=531.8,seed=1 --workload best-of-n:groups=1000,rate=45.79,seed=1 --workload unique:count=4000,rate=169.2,seed=1 --out /tmp/s11/pls/p$v/small > /tmp/s11/pls/p$v-small.log 2>&1
done
echo done > /tmp/s11/pls/DONE
