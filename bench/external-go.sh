#!/usr/bin/env bash
# External-plugin benchmark on a Go host (hashicorp/go-plugin's client): builds the Go host, the
# Go sample plugin and the TS sample plugin bundle into .tools/bin, then prints cold-start and
# round-trip figures. Usage: bench/external-go.sh [-starts N] [-deploys N] [-json]
set -euo pipefail
cd "$(dirname "$0")/.."
bin=$PWD/.tools/bin
mkdir -p "$bin"
(cd bench/gohost && go build -o "$bin/manent-bench-gohost" .)
(cd examples/go-plugin && go build -o "$bin/manent-plugin-go-sample" .)
ts_args=()
if [ -f examples/ts-plugin/build.ts ]; then
  # The bundle is CommonJS without an extension: outside the repo, so the repo's package.json
  # ("type": "module") does not make Node load it as ESM.
  tmp=$(mktemp -d)
  trap 'rm -rf "$tmp"' EXIT
  node --import tsx examples/ts-plugin/build.ts "$tmp/manent-ts-sample-plugin" >/dev/null
  ts_args=(-ts-plugin "$tmp/manent-ts-sample-plugin")
fi
"$bin/manent-bench-gohost" -go-plugin "$bin/manent-plugin-go-sample" "${ts_args[@]}" "$@"
