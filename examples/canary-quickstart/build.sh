#!/usr/bin/env bash
# Packs hello 1.0.0 and 1.1.0 (a small HTTP server, started in a slot by activate.sh) into
# dist/, or into the directory given as the first argument.
set -euo pipefail
cd "$(dirname "$0")"
out="${1:-dist}"
mkdir -p "$out"
for v in 1.0.0 1.1.0; do
  stage=$(mktemp -d)
  cp app/server.mjs app/activate.sh app/deactivate.sh "$stage/"
  echo "$v" >"$stage/VERSION"
  tar -C "$stage" -czf "$out/hello-$v.tar.gz" .
  rm -rf "$stage"
done
