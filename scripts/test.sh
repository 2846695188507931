#!/usr/bin/env bash
# Runs every test file under test/ with Node's test runner (compiled to JavaScript first), after
# compiling src/ into dist/ when a source changed since the last build (the binaries run dist/)
# and bundling the web UI into dist/ui.
# Usage: scripts/test.sh [path-filter]
set -euo pipefail
cd "$(dirname "$0")/.."
mapfile -t files < <(find test -name '*.test.ts' | sort | grep -- "${1:-}")
if [ "${#files[@]}" -eq 0 ]; then echo "no test files match '${1:-}'" >&2; exit 1; fi
# The slowest files first (scripts/slow-tests.txt), then the others: the lanes end together.
mapfile -t files < <(printf '%s\n' "${files[@]}" | awk 'NR == FNR { if ($0 !~ /^#/ && $0 != "") rank[$0] = FNR; next }
  { print (($0 in rank) ? rank[$0] : 100000) "\t" FNR "\t" $0 }' scripts/slow-tests.txt - | sort -n -k1,1 -k2,2 | cut -f3)
# The tests spawn bin/manent.js and bin/manent-server.js, which run dist/: compile what changed under src/.
node scripts/build-js.mjs --if-stale
# The browser tests load dist/ui: bundled again each run (about 0.1 s), so an edit under ui/ is what they test.
node scripts/build-ui.mjs >/dev/null
# One Postgres for the whole run (test/support/shared-postgres.ts): each file makes and drops its
# own databases on it instead of running initdb and a postmaster of its own. A TEST_DATABASE_URL
# already set (a server of yours) is used as it is.
if [ -z "${TEST_DATABASE_URL:-}" ]; then
  url_file=$(mktemp)
  node --import tsx test/support/shared-postgres.ts "$url_file" &
  shared_pg=$!
  trap 'kill "$shared_pg" 2>/dev/null; wait "$shared_pg" 2>/dev/null; rm -f "$url_file"' EXIT
  until [ -s "$url_file" ]; do
    kill -0 "$shared_pg" 2>/dev/null || { echo "the shared test Postgres did not start" >&2; exit 1; }
    sleep 0.2
  done
  TEST_DATABASE_URL=$(cat "$url_file")
  export TEST_DATABASE_URL
fi
# The runner's processes load the tests compiled to JavaScript (scripts/compile-tests.mjs: what
# changed since the last run, about a second for all) instead of through tsx's loader hooks, which
# cost each file about 0.6 s of CPU before its first test.
compiled=$(node scripts/compile-tests.mjs)
compiled=${compiled#"$PWD/"}
files=("${files[@]/#/$compiled/}")
files=("${files[@]/%.ts/.js}")
# Three files at a time on CI's two cores: at two, a fifth of the machine was idle (files waiting on
# a control plane, a browser, a server's start), at three about 7% (bench/README.md, "Three test files at a time").
node --enable-source-maps --test --test-concurrency="${TEST_CONCURRENCY:-3}" --test-timeout=900000 "${files[@]}"
