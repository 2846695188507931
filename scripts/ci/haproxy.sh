#!/usr/bin/env bash
# Installs HAProxy (Debian's haproxy package) for the percentage-rollout tests of remote-copy's
# traffic router and the canary quickstart, idempotently. They start their own haproxy processes
# on loopback with a config in a temp dir; the packaged service is neither started nor needed.
set -euo pipefail
if [ -x /usr/sbin/haproxy ] || command -v haproxy >/dev/null; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
# A policy-rc.d that denies keeps the package's postinst from starting a system haproxy on :80.
policy=/usr/sbin/policy-rc.d
if [ -e "$policy" ]; then
  apt-get install -y -qq --no-install-recommends haproxy
else
  printf '#!/bin/sh\nexit 101\n' >"$policy"
  chmod +x "$policy"
  trap 'rm -f "$policy"' EXIT
  apt-get install -y -qq --no-install-recommends haproxy
fi
