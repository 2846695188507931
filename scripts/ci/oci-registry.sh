#!/usr/bin/env bash
# The OCI registry and cosign for the image-signature tests (test/artifacts/image-signatures.test.ts):
# distribution's own registry (the CNCF reference registry) and sigstore's cosign, built from the Go
# module proxy into .tools/bin (gitignored), once per version (a .version stamp beside each).
# Built niced: cosign is a large build (about 5 minutes on 2 shared cores; the registry about 2.5).
set -euo pipefail
cd "$(dirname "$0")/../.."
bin=$PWD/.tools/bin
mkdir -p "$bin"
# shellcheck source=scripts/ci/tool-cache.sh
source "$PWD/scripts/ci/tool-cache.sh"
script=$PWD/scripts/ci/oci-registry.sh
command -v go >/dev/null || { echo "scripts/ci/oci-registry.sh: go is not installed" >&2; exit 1; }

build() { # name module version
  local name=$1 module=$2 version=$3
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.version" 2>/dev/null)" = "$version" ]; then
    echo "scripts/ci/oci-registry.sh: using $bin/$name ($version)"
    return
  fi
  if tool_from_cache "$name" "$version" "$bin/$name" "$script"; then
    echo "$version" > "$bin/$name.version"
    echo "scripts/ci/oci-registry.sh: $name $version from the machine's cache ($tool_cache_dir)"
    return
  fi
  echo "scripts/ci/oci-registry.sh: building $name $version into $bin"
  local start=$SECONDS
  # Outside any module, so no go.mod of the repository is looked at or changed.
  (cd "${TMPDIR:-/tmp}" && GOBIN="$bin" nice -n 10 go install "$module@$version")
  tool_to_cache "$name" "$version" "$bin/$name" "$script"
  echo "$version" > "$bin/$name.version"
  echo "scripts/ci/oci-registry.sh: built $name in $((SECONDS - start))s"
}

build registry github.com/distribution/distribution/v3/cmd/registry v3.1.2
build cosign github.com/sigstore/cosign/v2/cmd/cosign v2.6.5
