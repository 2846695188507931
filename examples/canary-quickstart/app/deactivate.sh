#!/bin/sh
# Stops the process of slot MANENT_SLOT: SIGTERM (it finishes the requests it has), then waits
# until it is gone. manent runs this once HAProxy sends the slot no more connections.
set -eu
pidfile="$MANENT_BASE/run/$MANENT_SLOT.pid"
[ -s "$pidfile" ] || exit 0
pid=$(cat "$pidfile")
if kill "$pid" 2>/dev/null; then
  i=0
  while kill -0 "$pid" 2>/dev/null; do
    i=$((i + 1))
    if [ "$i" -gt 100 ]; then kill -9 "$pid" 2>/dev/null || true; break; fi
    sleep 0.1
  done
fi
rm -f "$pidfile"
