#!/usr/bin/env bash
# npm test: the checks (scripts/checks.sh: typecheck, lint, prettier, the Go SDK's tests) and the
# test suites (scripts/test.sh) side by side instead of one after the other. The checks keep both
# cores busy for about 100 s; the suites' first files (the Kubernetes tutorials, slowest first)
# leave about half the machine idle while they wait on the control plane, so the checks mostly fill
# time that was idle (issue 31, item 4). Both always run to their end; the checks' output is
# printed after the suites' (not interleaved with the runner's TAP), and the exit code is non-zero
# if either failed.
# Usage: scripts/npm-test.sh [path-filter for scripts/test.sh]
set -uo pipefail
cd "$(dirname "$0")/.."
checks_log=$(mktemp)
trap 'rm -f "$checks_log"' EXIT

scripts/checks.sh >"$checks_log" 2>&1 &
checks=$!
scripts/test.sh "$@"
tests=$?
wait "$checks"
checked=$?
cat "$checks_log"
[ "$tests" -eq 0 ] || echo "scripts/npm-test.sh: the test suites failed (exit $tests)" >&2
[ "$checked" -eq 0 ] || echo "scripts/npm-test.sh: the checks failed (their output is above)" >&2
[ "$tests" -eq 0 ] && [ "$checked" -eq 0 ]
