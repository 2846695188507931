#!/usr/bin/env bash
# Builds the Vault server the secret-store tests run against (test/secret-stores: KV v2, token and
# AppRole sign-in, started in dev mode on 127.0.0.1), from the Go module proxy into .tools/bin
# (gitignored). OpenBao's module (github.com/openbao/openbao/v2) is not served by the proxy here, so
# it is HashiCorp Vault's: the same HTTP API.
#
# `go install` refuses the module (its go.mod has replace directives pointing at its in-repo api/
# and sdk/ sub-modules, which are separate modules, not in its module zip). So the source is copied
# from the module cache (`go mod download -json`), those replaces dropped and `go build` run there
# against the published sub-module versions its go.mod requires. That only compiles where those
# published versions match the tag's in-repo copies: v1.21.1 requires sdk v0.20.0, whose
# framework.Backend.ActivationFunc has the two-argument signature its vault/ package calls. Later
# 1.21 patches do not build this way: v1.21.2 calls sdk methods its release branch added
# (TryRecordObservationWithRequest) that v0.20.0 lacks, v1.21.3 and v1.21.4 require sdk v0.21.0,
# which changed ActivationFunc; the proxy here serves no pseudo-version of a tag's own commit.
# Idempotent: a binary whose recorded version matches is kept, so a second run takes no time.
# Built with `nice`: the machine may be shared. The time is printed so CI logs show it. Measured
# (/usr/bin/time, under `nice -n 19` at load 6-24 on 2 cores): with the Go module cache warm and an
# empty build cache, 1,873 s of CPU (user 1,720 + sys 153), 71 min wall, 4.7 GB peak RSS; with the
# build cache warm (a fresh clone on a machine that built it before, another directory), 57 s wall.
# Usage: scripts/ci/vault.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/.tools/bin
version=v1.21.1
module=github.com/hashicorp/vault
mkdir -p "$bin"
# shellcheck source=scripts/ci/tool-cache.sh
source "$root/scripts/ci/tool-cache.sh"
script=$root/scripts/ci/vault.sh

if [ -x "$bin/vault" ] && [ "$(cat "$bin/vault.version" 2>/dev/null)" = "$version" ]; then
  echo "scripts/ci/vault.sh: using $bin/vault ($version)"
  exit 0
fi
if tool_from_cache vault "$version" "$bin/vault" "$script"; then
  echo "$version" > "$bin/vault.version"
  echo "scripts/ci/vault.sh: vault $version from the machine's cache ($tool_cache_dir)"
  exit 0
fi
command -v go >/dev/null || { echo "scripts/ci/vault.sh: go is needed to build Vault" >&2; exit 1; }
command -v jq >/dev/null || { echo "scripts/ci/vault.sh: jq is needed (scripts/test-setup.sh installs it)" >&2; exit 1; }

echo "scripts/ci/vault.sh: building vault $version into $bin"
start=$SECONDS
dir=$(go mod download -json "$module@$version" | jq -r .Dir)
src=$root/.tools/src/vault-$version
rm -rf "$src"
mkdir -p "$(dirname "$src")"
cp -r "$dir" "$src"
chmod -R u+w "$src"
cd "$src"
for sub in api api/auth/approle api/auth/kubernetes api/auth/userpass sdk; do
  go mod edit -dropreplace="$module/$sub"
done
rm -f "$bin/vault.version"
# No `ui` tag: the web UI (a separate Node build) is not needed. -mod=mod: go.sum gains the sums of the published sub-modules.
nice -n 10 go build -mod=mod -trimpath -ldflags "-s -w" -o "$bin/vault.tmp" .
mv "$bin/vault.tmp" "$bin/vault"
tool_to_cache vault "$version" "$bin/vault" "$script"
echo "$version" > "$bin/vault.version"
cd "$root"
rm -rf "$src"
echo "scripts/ci/vault.sh: built vault in $((SECONDS - start)) s"
