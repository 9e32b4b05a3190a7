# Fewer ext_proc messages (BENCHMARKS.md, "Where the router's CPU goes"): router CPU per request through Envoy,
# builds alternated, 2026-12-02 18:13-18:31 UTC. "before" is 3cbb23d9 (the message counters alone), "after" 4962e0bf
# (metadata parsed once per observer stream, bodies aliased, continue answers built once); each jar from
# `mvn -q -B -o -ntp -pl dist -am package -DskipTests` copied to /tmp/obs/{before,after}.jar.
# The deterministic counts are ExtProcMessagesE2eTest's (e2e module).
run() {
  JAR=$1; OUT=$2; WL=$3; shift 3
  flock /tmp/kvrouter-bench.lock java -Xmx3g -Dkvrouter.root=$PWD -cp $JAR dev.kvrouter.examples.ab.EnvoyAb \
    --workers 8 --preset llama3.1-8b-h100 --model meta-llama/Llama-3.1-8B-Instruct \
    --tokenizer .cache/tokenizers/llama3_1 --workload "$WL" --policies kv_aware \
    --router-jvm "-Xmx1g -XX:+UseParallelGC" --out $OUT "$@"
}
SYS="system-prompt:format=tokens,count=800,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=1"
for i in 1 2 3; do for j in before after; do
  run /tmp/obs/$j.jar /tmp/obs/sys-$j-$i "$SYS" --warmup 100 --max-seconds 300
  cp /tmp/obs/sys-$j-$i/report.json bench/results/router-cpu/messages/sys-$j-$i.json
done; done

# Bytes allocated per observer token message parsed (deterministic): the default protobuf marshaller against
# DeferredMetadata, one 300-byte message (an SSE chunk plus envoy.lb metadata), 200,000 parses, third round.
mkdir -p /tmp/obs/alloc/out
javac -d /tmp/obs/alloc/out -cp /tmp/obs/after.jar bench/results/router-cpu/messages/AllocProbe.java
java -Xmx256m -cp /tmp/obs/alloc/out:/tmp/obs/after.jar dev.kvrouter.extproc.server.AllocProbe > bench/results/router-cpu/messages/alloc.txt
