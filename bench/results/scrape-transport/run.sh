#!/usr/bin/env bash
# ScrapeCostBench with the scraper on java.net.http.HttpClient (before; BEFORE_JAR built at aa56a9b) and on
# HttpURLConnection (after), alternating, 3 rounds, 8 workers, the filtered page, servers with TCP_NODELAY.
set -euo pipefail
out=bench/results/scrape-transport
for i in 1 2 3; do
  for side in before after; do
    jar=bench/target/benchmarks.jar
    [ "$side" = before ] && jar=${BEFORE_JAR:?}
    java -Dsun.net.httpserver.nodelay=true -Dkvrouter.root="$PWD" -cp "$jar" dev.kvrouter.bench.load.ScrapeCostBench \
      --workers 8 --warmup-seconds 30 --seconds 20 --out "$out/$side-$i.json" > /dev/null
  done
done
