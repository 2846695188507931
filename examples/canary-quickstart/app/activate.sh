#!/bin/sh
# Starts this release in its slot and returns once it answers. manent sets MANENT_SLOT,
# MANENT_PORT, MANENT_BASE and MANENT_HOST because the envconfig has slot_ports. Whatever ran in
# the slot before is stopped first (a rollback or a new candidate reuses the slot).
set -eu
run="$MANENT_BASE/run"
mkdir -p "$run"
./deactivate.sh
ready="$run/$MANENT_SLOT.pid"
READY_FILE="$ready" setsid node server.mjs >>"$run/$MANENT_SLOT.log" 2>&1 </dev/null &
i=0
until [ -s "$ready" ]; do
  i=$((i + 1))
  if [ "$i" -gt 100 ]; then
    echo "hello $MANENT_VERSION did not start on port $MANENT_PORT:" >&2
    tail -n 5 "$run/$MANENT_SLOT.log" >&2
    exit 1
  fi
  sleep 0.1
done
echo "hello $(cat VERSION) runs in slot $MANENT_SLOT on port $MANENT_PORT"
