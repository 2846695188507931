#!/usr/bin/env bash
# npm test's checks before the suites: typecheck, lint, prettier --check and the Go SDK's tests.
# Each is one process that uses about one core most of the time, so one after another they left
# the second core idle; here they run in two lanes of about equal length side by side (lint and
# the Go tests in one, typecheck and prettier in the other). Every check runs to its end; each one's output is printed
# when it ends (not interleaved with the other lane's), and the script fails if any failed.
# Usage: scripts/checks.sh
set -uo pipefail
cd "$(dirname "$0")/.."
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT

# Runs the npm scripts named, one after another, each into its own log; prints a failed one's log.
lane() {
  local failed=0 name started
  for name in "$@"; do
    started=$SECONDS
    if npm run -s "$name" >"$out/$name.log" 2>&1; then
      echo "$name: ok ($((SECONDS - started)) s)"
    else
      echo "$name: FAILED ($((SECONDS - started)) s)"
      cat "$out/$name.log"
      failed=1
    fi
  done
  return "$failed"
}

lane lint test:go &
first=$!
lane typecheck format:check
second=$?
wait "$first"
first=$?
echo "scripts/checks.sh: checks done in $SECONDS s"
[ "$first" -eq 0 ] && [ "$second" -eq 0 ]
