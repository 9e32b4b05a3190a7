#!/usr/bin/env bash
# Quickstart: builds kvrouter and runs the demo (a real Envoy, the xDS server, the ext_proc router and fake
# workers on loopback, then requests through Envoy showing where each went). Extra arguments go to
# `kvrouter demo` (try --help).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
bash scripts/setup-python.sh >/dev/null
bash scripts/fetch-tokenizers.sh
mvn -B -q -ntp -DskipTests package
exec java -Dkvrouter.root="$root" -jar dist/target/kvrouter.jar demo "$@"
