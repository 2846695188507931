#!/usr/bin/env bash
# Regenerates the Go code of proto/deployer.proto into sdk/go/proto (checked in).
# protoc-gen-go and protoc-gen-go-grpc are pinned and installed with `go install` into .tools/bin;
# the compiler is the npm-installed buf (no system protoc needed) or, when present, Debian's protoc.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$PWD
export GOBIN="$root/.tools/bin"
export PATH="$GOBIN:$PATH"

# Pinned to the versions the sdk/go module builds against, so regenerating is reproducible.
PROTOC_GEN_GO_VERSION=v1.36.12
PROTOC_GEN_GO_GRPC_VERSION=v1.6.0
installed_version() { "$GOBIN/$1" --version 2>/dev/null | awk '{print $NF}'; }
if [ "$(installed_version protoc-gen-go)" != "$PROTOC_GEN_GO_VERSION" ]; then
  go install "google.golang.org/protobuf/cmd/protoc-gen-go@$PROTOC_GEN_GO_VERSION"
fi
if [ "$(installed_version protoc-gen-go-grpc)" != "${PROTOC_GEN_GO_GRPC_VERSION#v}" ]; then
  go install "google.golang.org/grpc/cmd/protoc-gen-go-grpc@$PROTOC_GEN_GO_GRPC_VERSION"
fi

# GEN_PROTO_GO_OUT redirects the output (scripts/ci/go.sh checks the checked-in code is current).
out=${GEN_PROTO_GO_OUT:-sdk/go/proto}
mkdir -p "$out"
if [ -x node_modules/.bin/buf ]; then
  # buf's built-in compiler; the template is inline so no buf.gen.yaml is added at the root.
  # --path: only deployer.proto; proto/ also holds go-plugin's own protos, which go-plugin ships in Go.
  node_modules/.bin/buf generate proto --path proto/deployer.proto --template "{
    \"version\": \"v2\",
    \"plugins\": [
      {\"local\": \"$GOBIN/protoc-gen-go\", \"out\": \"$out\", \"opt\": [\"paths=source_relative\"]},
      {\"local\": \"$GOBIN/protoc-gen-go-grpc\", \"out\": \"$out\", \"opt\": [\"paths=source_relative\"]}
    ]
  }"
elif command -v protoc >/dev/null; then
  protoc -I proto \
    --plugin=protoc-gen-go="$GOBIN/protoc-gen-go" --go_out="$out" --go_opt=paths=source_relative \
    --plugin=protoc-gen-go-grpc="$GOBIN/protoc-gen-go-grpc" --go-grpc_out="$out" --go-grpc_opt=paths=source_relative \
    proto/deployer.proto
else
  echo "gen-proto-go: neither node_modules/.bin/buf (npm ci) nor protoc (apt-get install protobuf-compiler) found" >&2
  exit 1
fi
echo "generated $out/deployer.pb.go and $out/deployer_grpc.pb.go"
