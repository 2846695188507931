#!/usr/bin/env bash
# Go side of CI, idempotent: downloads the Go modules of sdk/go, examples/go-plugin and
# bench/gohost and the go-plugin-only test plugin, builds the Go binaries the interop tests run into .tools/bin (gitignored), and
# runs the Go SDK's tests. test/interop rebuilds the binaries itself (go build is cached), so
# this script is what makes them fast and fails early with a clear message.
# Usage: scripts/ci/go.sh [--no-test]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/.tools/bin
mkdir -p "$bin"
command -v go >/dev/null || { echo "scripts/ci/go.sh: go is not installed" >&2; exit 1; }

for mod in sdk/go examples/go-plugin bench/gohost test/external/fixtures/goplugin-only; do
  (cd "$mod" && go mod download)
done

(cd sdk/go && go build -o "$bin/manent-gohost" ./cmd/manent-gohost)
(cd examples/go-plugin && go build -o "$bin/manent-plugin-go-sample" .)
(cd bench/gohost && go build -o "$bin/manent-bench-gohost" .)
(cd test/external/fixtures/goplugin-only && go build -o "$bin/manent-test-goplugin-only" .)

# The checked-in generated code must match proto/deployer.proto.
if [ -x node_modules/.bin/buf ] || command -v protoc >/dev/null; then
  gen=$(mktemp -d)
  trap 'rm -rf "$gen"' EXIT
  GEN_PROTO_GO_OUT=$gen scripts/gen-proto-go.sh >/dev/null
  if ! diff -r "$gen" sdk/go/proto >/dev/null; then
    echo "scripts/ci/go.sh: sdk/go/proto is stale: run scripts/gen-proto-go.sh and commit" >&2
    exit 1
  fi
else
  echo "scripts/ci/go.sh: no buf (npm ci) nor protoc: skipping the generated-code check" >&2
fi

if [ "${1:-}" != "--no-test" ]; then
  (cd sdk/go && go vet ./... && go test -race -count=1 ./...)
  (cd examples/go-plugin && go vet ./...)
  (cd bench/gohost && go vet ./...)
  (cd test/external/fixtures/goplugin-only && go vet ./...)
fi
