#!/usr/bin/env bash
# ScrapeCostBench at fleet scale, warmed up: 64 workers every 250 ms, the filtered page, the scraper on
# java.net.http.HttpClient (BEFORE_JAR, built at aa56a9b) and on HttpURLConnection (this tree), alternating.
set -euo pipefail
out=bench/results/scrape-fleet64
for i in 1 2; do
  for side in httpclient urlconnection; do
    jar=bench/target/benchmarks.jar
    [ "$side" = httpclient ] && jar=${BEFORE_JAR:?}
    java -Dsun.net.httpserver.nodelay=true -Dkvrouter.root="$PWD" -cp "$jar" dev.kvrouter.bench.load.ScrapeCostBench \
      --workers 64 --warmup-seconds 90 --seconds 45 --out "$out/$side-$i.json" > /dev/null
  done
done
