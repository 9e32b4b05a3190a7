# Where the router's CPU goes (BENCHMARKS.md): the commands that made this directory, 2026-12-02 12:39-13:50 UTC.
# "before" is a5cc450 (dist/target/kvrouter.jar copied to before.jar), "after" the three fixes (after.jar, 7fae6ca).
mvn -q -B -o -ntp -pl dist -am package -DskipTests

# JFR settings: the JDK's profile.jfc with Java sampling every 2 ms (not 10) and thread CPU load every 1 s (not 10)
sed -e 's|method-sampling-java-interval">10 ms<|method-sampling-java-interval">2 ms<|' \
    -e '/<event name="jdk.ThreadCPULoad">/,/<\/event>/s|<setting name="period">10 s<|<setting name="period">1 s<|' \
    $(dirname $(dirname $(readlink -f $(which java))))/lib/jfr/profile.jfc > /tmp/router.jfc

# run JAR OUT PROFILE(yes|no) WORKLOAD POLICIES [EnvoyAb options]: one EnvoyAb run, the router JVM recorded with
# PROFILE=yes (the recording is {dir}/router.jfr in the run's temporary directory, copied to OUT)
run() {
  JAR=$1; OUT=$2; PROF=$3; WL=$4; POL=$5; shift 5
  JVM="-Xmx1g -XX:+UseParallelGC"
  [ "$PROF" = yes ] && JVM="$JVM -XX:StartFlightRecording=filename={dir}/router.jfr,settings=/tmp/router.jfc"
  flock /tmp/kvrouter-bench.lock java -Xmx3g -Dkvrouter.root=$PWD -cp $JAR dev.kvrouter.examples.ab.EnvoyAb \
    --workers 8 --preset llama3.1-8b-h100 --model meta-llama/Llama-3.1-8B-Instruct \
    --tokenizer .cache/tokenizers/llama3_1 --workload "$WL" --policies $POL --router-jvm "$JVM" --out $OUT "$@"
  [ "$PROF" = yes ] && cp $(ls -dt /tmp/kvrouter-envoy-ab* | head -1)/router.jfr $OUT/router.jfr
}
RAG="rag:count=3000,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=1"
SYS="system-prompt:format=tokens,count=800,rate=10.9,prompt=7200,sharing=0.8334,prefixes=150,questions=5,output=1000,seed=1"
CHAT="multi-turn:format=chat,answers=model,sessions=150,rate=8,seed=1"

# 1. profiles (before): chat multi-turn, streamed system prompts; RAG before and after
run before.jar /tmp/chat-before yes "$CHAT" kv_aware --warmup 100 --max-seconds 200
run before.jar /tmp/sys-before yes "$SYS" kv_aware --warmup 100 --max-seconds 240
run before.jar /tmp/prof-rag-before yes "$RAG" kv_aware --warmup 200 --max-seconds 600
run after.jar /tmp/prof-rag-after yes "$RAG" kv_aware --warmup 200 --max-seconds 600
for p in chat-before:858 sys-before:900 prof-rag-before:3200 prof-rag-after:3200; do
  n=${p%%:*}
  python3 scripts/jfr-profile.py /tmp/$n/router.jfr --requests ${p##*:} --json profiles/$n.json > profiles/$n.txt
  cp /tmp/$n/report.json profiles/$n-report.json
done

# 2. CPU per request without the JIT threads, builds alternated (no recording)
for i in 1 2; do for j in before after; do
  run $j.jar ab/rag-$j-$i no "$RAG" kv_aware --warmup 200 --max-seconds 600
done; done
for i in 1 2; do for j in before after; do
  run $j.jar ab/sys-$j-$i no "$SYS" kv_aware --warmup 100 --max-seconds 300
done; done
for i in 3 4; do for j in before after; do
  run $j.jar ab/rag-$j-$i no "$RAG" kv_aware --warmup 200 --max-seconds 600
done; done

# 3. routing unchanged: virtual time, same seed, both builds (virtual-check/)
for j in before after; do
  java -Xmx3g -cp $j.jar dev.kvrouter.examples.ab.VirtualAb --workers 8 --charts=false --policies kv_aware,round_robin \
    --workload "rag:count=600,rate=42.91,documents=256,document=4096..12288,output=64..256,seed=1" --out /tmp/virtual-$j
  cp /tmp/virtual-$j/virtual.json virtual-check/$j.json
done
