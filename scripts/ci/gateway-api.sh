#!/usr/bin/env bash
# The Gateway API CRDs for the kubernetes plugin's percentage-rollout tests (HTTPRoute weights),
# from the Go module proxy: sigs.k8s.io/gateway-api's module zip holds config/crd. Idempotent
# (Go's module cache). Prints the directory of the standard-channel CRDs.
set -euo pipefail
version=v1.2.1
# Outside any module, so no go.mod of the repository is looked at or changed.
cd "${TMPDIR:-/tmp}"
dir=$(go mod download -json "sigs.k8s.io/gateway-api@$version" | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
[ -f "$dir/config/crd/standard/gateway.networking.k8s.io_httproutes.yaml" ] || { echo "gateway-api $version: no CRDs in $dir" >&2; exit 1; }
echo "$dir/config/crd/standard"
