#!/usr/bin/env bash
# What the tests need besides node_modules, installed only when missing (so a second run takes
# seconds): OpenSSH server and client for remote-copy, util-linux for the external-plugin host,
# Go modules and the Go binaries of the interop tests, helm for the chart tests, Prometheus for the
# analysis tests, HAProxy for the percentage rollouts of remote-copy, and the real Kubernetes
# control plane (etcd, kube-apiserver, kube-controller-manager) the kubernetes plugin's tests run on.
# systemd-analyze, buildah and debootstrap: the packaging tests (unit, container image).
# The Vault server the vault: secret references are tested against (test/secret-stores), built from
# the Go module proxy into .tools/bin by scripts/ci/vault.sh (about 20 min of CPU the first time).
set -euo pipefail
cd "$(dirname "$0")/.."
# jq and curl: the CLI tests and the tutorials' doc tests (test/docs) run them as the pages show.
if ! command -v jq >/dev/null || ! command -v curl >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq jq curl
fi
# zsh and fish: the completion tests check `manent completion zsh|fish` with each shell's own parser (and fish's completer).
if ! command -v zsh >/dev/null || ! command -v fish >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq zsh fish
fi
# chromium: the web UI's browser tests drive Debian's Chromium with playwright-core.
if ! command -v chromium >/dev/null; then
  apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium
fi
# The JavaScript the binaries run (src compiled into dist/) and the web UI's bundle, which
# manent-server serves at / (quick; both also built by npm ci's prepare).
node scripts/build-js.mjs
node scripts/build-ui.mjs
bash scripts/ci/packaging.sh
bash scripts/ci/remote-copy.sh
bash scripts/ci/haproxy.sh
bash scripts/ci/external-plugins.sh
bash scripts/ci/prometheus.sh
bash scripts/ci/go.sh --no-test
bash scripts/ci/kubernetes.sh --no-test
bash scripts/ci/gateway-api.sh >/dev/null
bash scripts/ci/oci-registry.sh
bash scripts/ci/kube-control-plane.sh
bash scripts/ci/vault.sh
echo "scripts/test-setup.sh: set-up done in $SECONDS s"
