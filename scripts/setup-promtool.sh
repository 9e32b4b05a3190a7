#!/usr/bin/env bash
# Builds Prometheus's promtool into .cache/bin/ (git-ignored) from the Go module proxy: the e2e tests use it to
# check deploy/prometheus/'s rules and to run their unit tests against series scraped from a live router.
# Needs Go (1.22+). Idempotent: does nothing when the pinned version is already built. About 5 minutes and
# 120 MB on a 2-core machine the first time.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
version=v0.316.0   # the github.com/prometheus/prometheus module (Prometheus 3.x)
bin="$root/.cache/bin"
stamp="$bin/promtool.version"
if [ -x "$bin/promtool" ] && [ "$(cat "$stamp" 2>/dev/null)" = "$version" ]; then
  exit 0
fi
command -v go >/dev/null || { echo "setup-promtool: Go is required to build promtool (https://go.dev/dl/)" >&2; exit 1; }
mkdir -p "$bin"
GOBIN="$bin" GOFLAGS=-mod=mod go install "github.com/prometheus/prometheus/cmd/promtool@$version"
echo "$version" > "$stamp"
echo "promtool $version ready in $bin"
