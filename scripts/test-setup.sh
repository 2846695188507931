#!/usr/bin/env bash
# What the tests need besides node_modules, installed only when missing (so a second run takes
# seconds): OpenSSH server and client for remote-copy, util-linux for the external-plugin host,
# Go modules and the Go binaries of the interop tests, helm for the chart tests, Prometheus for the
# analysis tests, HAProxy for the percentage rollouts of remote-copy.
set -euo pipefail
cd "$(dirname "$0")/.."
# jq: the CLI tests pipe `manent deploy -o json` through it, as the tutorial does.
if ! command -v jq >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq
fi
bash scripts/ci/remote-copy.sh
bash scripts/ci/haproxy.sh
bash scripts/ci/external-plugins.sh
bash scripts/ci/prometheus.sh
bash scripts/ci/go.sh --no-test
bash scripts/ci/kubernetes.sh --no-test
