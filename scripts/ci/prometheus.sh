#!/usr/bin/env bash
# Installs Debian's prometheus package for the analysis tests, idempotently. The tests start their
# own Prometheus on a free loopback port with a temp config and data dir, so the package's service
# must never run: a policy-rc.d keeps the post-install from starting it, and the unit is disabled
# afterwards on systems where the post-install enabled it. Needs root.
set -euo pipefail
if command -v prometheus >/dev/null; then exit 0; fi
export DEBIAN_FRONTEND=noninteractive
created_policy=""
if [ ! -e /usr/sbin/policy-rc.d ]; then
  printf '#!/bin/sh\n# manent test set-up: no service starts while prometheus is installed.\nexit 101\n' >/usr/sbin/policy-rc.d
  chmod 0755 /usr/sbin/policy-rc.d
  created_policy=1
fi
cleanup() { if [ -n "$created_policy" ]; then rm -f /usr/sbin/policy-rc.d; fi; }
trap cleanup EXIT
apt-get update -qq
# No recommends: prometheus-node-exporter would be one more service.
apt-get install -y -qq --no-install-recommends prometheus
if command -v systemctl >/dev/null; then
  systemctl disable --now prometheus.service >/dev/null 2>&1 || true
fi
if command -v update-rc.d >/dev/null && [ -e /etc/init.d/prometheus ]; then
  update-rc.d prometheus disable >/dev/null 2>&1 || true
fi
prometheus --version | head -1
