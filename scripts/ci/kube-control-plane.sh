#!/usr/bin/env bash
# Builds the real Kubernetes control plane the kubernetes plugin's tests run against:
# kube-apiserver and kube-controller-manager from the wrapper module in tools/kube (upstream
# k8s.io/kubernetes, its staging modules pinned to the matching published versions), kubectl of the
# same version (for the doc tests, which run the tutorial's kubectl commands), and etcd from
# tools/etcd, into .tools/bin (gitignored). Idempotent: a binary whose recorded version matches is
# kept, so a second run takes no time; Go's build cache makes a rebuild after a version bump cheaper.
# Built with `nice`: the machine may be shared. Times are printed so CI logs show them.
# Usage: scripts/ci/kube-control-plane.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/.tools/bin
kube_version=v1.34.2
etcd_version=v3.6.5
mkdir -p "$bin"
# shellcheck source=scripts/ci/tool-cache.sh
source "$root/scripts/ci/tool-cache.sh"
script=$root/scripts/ci/kube-control-plane.sh

command -v go >/dev/null || { echo "scripts/ci/kube-control-plane.sh: go is needed to build the control plane" >&2; exit 1; }

# The version is a build stamp: without it /version says v0.0.0-master and the API server's
# compatibility-version checks treat it as an unreleased binary.
major=${kube_version#v}; major=${major%%.*}
minor=${kube_version#v*.}; minor=${minor%%.*}
kube_ldflags="-s -w"
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  kube_ldflags="$kube_ldflags -X $pkg.gitVersion=$kube_version -X $pkg.gitMajor=$major -X $pkg.gitMinor=$minor \
    -X $pkg.gitTreeState=clean -X $pkg.buildDate=1970-01-01T00:00:00Z"
done

build() { # name version dir package ldflags
  local name=$1 version=$2 dir=$3 pkg=$4 ldflags=$5
  if [ -x "$bin/$name" ] && [ "$(cat "$bin/$name.version" 2>/dev/null)" = "$version" ]; then
    echo "scripts/ci/kube-control-plane.sh: using $bin/$name ($version)"
    return
  fi
  local recipe=("$script" "$root/$dir/go.mod" "$root/$dir/go.sum")
  if tool_from_cache "$name" "$version" "$bin/$name" "${recipe[@]}"; then
    echo "$version" > "$bin/$name.version"
    echo "scripts/ci/kube-control-plane.sh: $name $version from the machine's cache ($tool_cache_dir)"
    return
  fi
  echo "scripts/ci/kube-control-plane.sh: building $name $version into $bin"
  local start=$SECONDS
  rm -f "$bin/$name.version"
  (cd "$root/$dir" && nice -n 10 go build -trimpath -ldflags "$ldflags" -o "$bin/$name.tmp" "$pkg")
  mv "$bin/$name.tmp" "$bin/$name"
  tool_to_cache "$name" "$version" "$bin/$name" "${recipe[@]}"
  echo "$version" > "$bin/$name.version"
  echo "scripts/ci/kube-control-plane.sh: built $name in $((SECONDS - start)) s"
}

build etcd "$etcd_version" tools/etcd . "-s -w"
build kube-apiserver "$kube_version" tools/kube ./cmd/kube-apiserver "$kube_ldflags"
build kube-controller-manager "$kube_version" tools/kube ./cmd/kube-controller-manager "$kube_ldflags"
build kubectl "$kube_version" tools/kube ./cmd/kubectl "$kube_ldflags"
