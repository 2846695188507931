#!/usr/bin/env bash
# Makes the image's base filesystem from Debian packages, without any registry: debootstrap from
# Debian's package mirror, Debian 13 (trixie), whose nodejs package is 20.19 (manent needs Node
# >= 20.19; Debian 12's is 18). Minimal variant plus what manent-server runs: node and CA
# certificates (HTTPS artifact sources, OIDC, Kubernetes API servers). The manent user (uid 10001)
# and its state directory are made here so the Containerfile needs no RUN step (no container
# runtime is needed to build the image).
# Usage: build-rootfs.sh OUTPUT.tar     (needs root: debootstrap chroots into the new tree)
set -euo pipefail
out=$1
suite=trixie
mirror=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
packages=nodejs,ca-certificates
tree=$(mktemp -d "${TMPDIR:-/tmp}/manent-rootfs.XXXXXX")
trap 'rm -rf "$tree"' EXIT
debootstrap --variant=minbase --include="$packages" "$suite" "$tree" "$mirror" >&2
chroot "$tree" groupadd --system --gid 10001 manent
chroot "$tree" useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/manent --shell /usr/sbin/nologin \
  --comment "manent deployment orchestrator" manent
install -d -o 10001 -g 10001 -m 0750 "$tree/var/lib/manent"
install -d -m 0755 "$tree/etc/manent" "$tree/opt"
# What only the build needed: package lists, caches, documentation, logs.
chroot "$tree" apt-get clean
rm -rf "$tree"/var/lib/apt/lists/* "$tree"/usr/share/doc/* "$tree"/usr/share/man/* "$tree"/usr/share/info/* \
  "$tree"/var/log/* "$tree"/var/cache/debconf/*-old "$tree"/tmp/*
# Written aside and renamed: another checkout sharing the cache may be making the same base.
tar --numeric-owner --xattrs -C "$tree" -cf "$out.tmp.$$" .
mv "$out.tmp.$$" "$out"
