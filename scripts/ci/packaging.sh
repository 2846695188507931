#!/usr/bin/env bash
# What the packaging tests (test/packaging) need, installed only when missing: systemd-analyze
# (Debian's systemd package) to verify the unit, buildah to build the container image and
# debootstrap to make its Debian base from Debian's package mirror (no registry image is pulled).
# Also makes the image's Debian base once. Nothing is started or enabled: the packages' services
# are not needed and not run.
set -euo pipefail
missing=()
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
if [ "${#missing[@]}" -gt 0 ]; then
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
# The image's Debian base (debootstrap: minutes, once per machine; cached in ~/.cache/manent/container by its recipe).
bash "$(dirname "$0")/../../packaging/container/build.sh" --base-only
