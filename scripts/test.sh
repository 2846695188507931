#!/usr/bin/env bash
# Runs every test file under test/ with Node's test runner (TypeScript through tsx).
# Usage: scripts/test.sh [path-filter]
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find test -name '*.test.ts' | sort | grep -- "${1:-}")
if [ "${#files[@]}" -eq 0 ]; then echo "no test files match '${1:-}'" >&2; exit 1; fi
exec node --import tsx --test --test-concurrency="${TEST_CONCURRENCY:-2}" --test-timeout=900000 "${files[@]}"
