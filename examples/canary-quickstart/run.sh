#!/usr/bin/env bash
# Quickstart, part 2: a percentage rollout on this machine. HAProxy (127.0.0.1:8090) in front of two
# local targets with two slots each, manent-server on 127.0.0.1:8081 (embedded Postgres). Deploys
# hello 1.0.0, then rolls 1.1.0 out at 10%, 50% and 100%: at each pause `manent status` shows the
# weight and 1,000 requests through HAProxy show who answers; `manent promote` goes on.
set -euo pipefail
cd "$(dirname "$0")"
manent="node ../../bin/manent.js"
server="node ../../bin/manent-server.js"
export MANENT_SERVER=http://127.0.0.1:8081
# Text output even when stdout is a pipe (a pipe means JSON otherwise).
export MANENT_OUTPUT=text
targets=/tmp/manent-canary-quickstart
haproxy=$(command -v haproxy || echo /usr/sbin/haproxy)
if [ ! -x "$haproxy" ]; then
  echo "haproxy is not installed: run 'bash scripts/ci/haproxy.sh' as root (Debian's haproxy package)" >&2
  exit 1
fi

./build.sh
mkdir -p "$targets"
"$haproxy" -f haproxy.cfg -db >work.haproxy.log 2>&1 &
hpid=$!
$server -c manent.yml serve >work.server.out 2>work.server.log &
spid=$!
stop_all() {
  kill "$spid" "$hpid" 2>/dev/null || true
  wait "$spid" "$hpid" 2>/dev/null || true
  # The slots' app processes, by the pid files activate.sh wrote.
  for f in "$targets"/*/run/*.pid; do [ -s "$f" ] && kill "$(cat "$f")" 2>/dev/null; rm -f "$f"; done
}
trap stop_all EXIT
for _ in $(seq 1 600); do
  grep -q "listening on" work.server.log 2>/dev/null && [ -S "$targets/haproxy.sock" ] && break
  kill -0 $spid 2>/dev/null || { echo "manent-server failed to start:"; tail -20 work.server.log; exit 1; }
  kill -0 $hpid 2>/dev/null || { echo "haproxy failed to start:"; cat work.haproxy.log; exit 1; }
  sleep 0.1
done

# Waits until deploy $1 pauses with the candidate at weight $2 (or ends: then exits non-zero).
paused_at() {
  local rc
  while :; do
    rc=0
    $manent status "$1" -o json | node -e '
      let s = "";
      process.stdin.on("data", (d) => (s += d)).on("end", () => {
        const d = JSON.parse(s);
        if (["succeeded", "failed", "rolled_back", "cancelled"].includes(d.status)) {
          console.error(`deploy ${d.id} ended ${d.status}: ${d.error?.message ?? ""}`);
          process.exit(2);
        }
        process.exit(d.rollout?.waiting && d.rollout.canary?.weight === Number(process.argv[1]) ? 0 : 1);
      });' "$2" || rc=$?
    [ "$rc" = 0 ] && return 0
    [ "$rc" = 2 ] && exit 1
    sleep 0.2
  done
}

echo "== deploy hello 1.0.0 (the first release: nothing to compare with, it takes every request at once)"
id=$($manent deploy -f hello.yml --no-wait)
paused_at "$id" 10
$manent promote --full "$id" >/dev/null
$manent status --watch "$id" | tail -1
node requests.mjs 100
echo
echo "== deploy hello 1.1.0 as a canary: 10%, 50%, 100%"
id=$($manent deploy -f hello.yml --version 1.1.0 --source dist/hello-1.1.0.tar.gz --no-wait)
for weight in 10 50 100; do
  paused_at "$id" "$weight"
  echo "-- paused at weight $weight"
  $manent status "$id"
  node requests.mjs 1000
  node requests.mjs 10 "X-Canary: always"
  $manent promote "$id" >/dev/null
done
$manent status --watch "$id" | tail -1
echo
echo "== after the promote"
node requests.mjs 1000
for t in web-1 web-2; do echo "$t: live slot $(cat $targets/$t/.live-slot), current $(readlink $targets/$t/current)"; done
