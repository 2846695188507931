#!/usr/bin/env bash
# Packs the quickstart's artifacts: hello 1.0.0 and 1.1.0, and 1.2.0 whose activation fails.
set -euo pipefail
cd "$(dirname "$0")"
mkdir -p dist
for v in 1.0.0 1.1.0 1.2.0; do
  stage=$(mktemp -d)
  cp app/activate.sh "$stage/"
  if [ "$v" = 1.2.0 ]; then echo "$v broken" > "$stage/VERSION"; else echo "$v" > "$stage/VERSION"; fi
  echo "<h1>hello $v</h1>" > "$stage/index.html"
  tar -C "$stage" -czf "dist/hello-$v.tar.gz" .
  rm -rf "$stage"
done
