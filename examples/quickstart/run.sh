#!/usr/bin/env bash
# The quickstart, end to end: start manent-server (embedded Postgres), deploy hello 1.0.0 to two
# targets, then 1.1.0, then 1.2.0 whose activation fails and is rolled back, then show the history.
#
#   run.sh [--port N]    (npm run quickstart -- --port N): the server's port, else manent.yml's listen
#
# Everything stays in this directory: the server's workdir (work/) and the two targets (targets/,
# emptied at every run, so each run deploys from nothing).
set -euo pipefail
cd "$(dirname "$0")"
manent="node ../../bin/manent.js"
server="node ../../bin/manent-server.js"
listen=()
while [ $# -gt 0 ]; do
  case "$1" in
    --port) [[ "${2:-}" =~ ^[0-9]+$ ]] || { echo "run.sh: --port takes a port number" >&2; exit 2; }
      listen=(--listen "127.0.0.1:$2"); shift 2 ;;
    *) echo "usage: run.sh [--port N]" >&2; exit 2 ;;
  esac
done
# Show the progress as on a terminal even when this script's output is piped (JSON otherwise).
export MANENT_OUTPUT=text

./build.sh
rm -rf targets
$server -c manent.yml serve "${listen[@]}" >work.server.out 2>work.server.log &
pid=$!
trap 'kill $pid 2>/dev/null; wait $pid 2>/dev/null || true' EXIT
# The server logs its address (a JSON line) once it is ready (first start creates the embedded Postgres).
for _ in $(seq 1 600); do
  grep -q "listening on" work.server.log 2>/dev/null && break
  kill -0 $pid 2>/dev/null || { echo "manent-server failed to start:"; tail -20 work.server.log; exit 1; }
  sleep 0.1
done
MANENT_SERVER=$(sed -n 's/.*listening on \(http[^ "]*\).*/\1/p' work.server.log | head -1)
export MANENT_SERVER

echo "== deploy hello 1.0.0"
$manent deploy -f hello.yml
echo
echo "== deploy hello 1.1.0"
$manent deploy -f hello.yml --version 1.1.0 --source dist/hello-1.1.0.tar.gz
echo
echo "== deploy hello 1.2.0 (its activation fails: expect an automatic rollback)"
if $manent deploy -f hello.yml --version 1.2.0 --source dist/hello-1.2.0.tar.gz; then
  echo "expected 1.2.0 to fail" >&2; exit 1
fi
echo
echo "== what the targets run"
for t in web-1 web-2; do echo "$t: $(readlink targets/$t/current)"; done
echo
echo "== manent history"
$manent history --application hello
