#!/usr/bin/env bash
# What the packaging tests (test/packaging) need, installed only when missing: systemd-analyze
# (Debian's systemd package) to verify the unit, buildah to build the container image and
# debootstrap to make its Debian base from Debian's package mirror (no registry image is pulled).
# Nothing is started or enabled: the packages' services are not needed and not run.
set -euo pipefail
missing=()
command -v systemd-analyze >/dev/null || missing+=(systemd)
command -v buildah >/dev/null || missing+=(buildah)
command -v debootstrap >/dev/null || missing+=(debootstrap)
[ "${#missing[@]}" -eq 0 ] && exit 0
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq
apt-get install -y -qq --no-install-recommends "${missing[@]}"
