#!/usr/bin/env bash
# Kubernetes plugin side of CI, idempotent: makes a helm v3 binary available to the chart tests
# (test/plugins/kubernetes find it at .tools/bin/helm, gitignored, or on PATH) and runs the
# plugin's tests. helm is built from its Go module through the module proxy when not on PATH;
# the build is cached by Go, so a second run takes seconds.
# Usage: scripts/ci/kubernetes.sh [--no-test]
set -euo pipefail
cd "$(dirname "$0")/../.."
root=$PWD
bin=$root/.tools/bin
helm_version=v3.16.4
mkdir -p "$bin"
# shellcheck source=scripts/ci/tool-cache.sh
source "$root/scripts/ci/tool-cache.sh"
script=$root/scripts/ci/kubernetes.sh

if command -v helm >/dev/null; then
  echo "scripts/ci/kubernetes.sh: using helm from PATH: $(command -v helm)"
elif [ -x "$bin/helm" ] && [ "$(cat "$bin/helm.version" 2>/dev/null)" = "$helm_version" ]; then
  echo "scripts/ci/kubernetes.sh: using $bin/helm ($helm_version)"
elif tool_from_cache helm "$helm_version" "$bin/helm" "$script"; then
  echo "$helm_version" > "$bin/helm.version"
  echo "scripts/ci/kubernetes.sh: helm $helm_version from the machine's cache ($tool_cache_dir)"
else
  command -v go >/dev/null || { echo "scripts/ci/kubernetes.sh: no helm on PATH and no go to build it" >&2; exit 1; }
  echo "scripts/ci/kubernetes.sh: building helm $helm_version into $bin"
  GOBIN="$bin" go install "helm.sh/helm/v3/cmd/helm@$helm_version"
  tool_to_cache helm "$helm_version" "$bin/helm" "$script"
  echo "$helm_version" > "$bin/helm.version"
fi

if [ "${1:-}" != "--no-test" ]; then
  scripts/test.sh test/plugins/kubernetes/
fi
