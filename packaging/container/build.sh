#!/usr/bin/env bash
# Builds the manent-server image with buildah (see Containerfile) and prints its name, reusing
# what is cached when its inputs are unchanged, in the user's cache (MANENT_IMAGE_CACHE, else
# ~/.cache/manent/container), shared by every checkout and clone as Go's build cache is:
#   - the Debian base (debootstrap, minutes), keyed by build-rootfs.sh;
#   - the production node_modules, keyed by package-lock.json;
#   - the image itself, tagged with a hash of every input (base, package, dependencies,
#     Containerfile, manent.yml): an unchanged checkout finds it in buildah's storage at once.
# Usage: packaging/container/build.sh [--base-only]   (root: debootstrap and buildah's storage)
#   --base-only: make the cached Debian base only (scripts/ci/packaging.sh, at test set-up)
set -euo pipefail
cd "$(dirname "$0")/../.."
here=$PWD/packaging/container
cache=${MANENT_IMAGE_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manent/container}
mkdir -p "$cache"
log() { echo "packaging/container/build.sh: $*" >&2; }

rootfs=$cache/rootfs-$(sha256sum "$here/build-rootfs.sh" | cut -c1-16).tar
if [ ! -f "$rootfs" ]; then
  log "making the Debian base with debootstrap (once; minutes)"
  bash "$here/build-rootfs.sh" "$rootfs"
  find "$cache" -maxdepth 1 -name 'rootfs-*.tar' ! -path "$rootfs" -delete
fi

[ "${1:-}" = --base-only ] && exit 0

work=$(mktemp -d "${TMPDIR:-/tmp}/manent-image.XXXXXX")
trap 'rm -rf "$work"' EXIT
# The npm package exactly as published (package.json's files: bin/, dist/, with the web UI).
# Packed from dist/ as built (without npm's prepare, which would rebuild dist/ under tests that run it).
node scripts/build-js.mjs --if-stale
[ -f dist/ui/index.html ] || node scripts/build-ui.mjs
npm pack --silent --ignore-scripts --pack-destination "$work" >/dev/null
mkdir "$work/context"
tar -xzf "$work"/manent-*.tgz -C "$work/context"
mv "$work/context/package" "$work/context/manent"
# The build's timestamp, which only the checkout's stale-dist check reads: it would change the key.
rm -f "$work/context/manent/dist/.js-build-stamp"

deps=$cache/node-modules-$(cat package-lock.json package.json | sha256sum | cut -c1-16)
if [ ! -d "$deps/node_modules" ]; then
  log "installing the production dependencies (once per package-lock.json)"
  # Made aside and renamed: another checkout sharing the cache may be making the same one.
  made=$deps.tmp.$$
  rm -rf "$made" && mkdir -p "$made"
  cp package.json package-lock.json "$made/"
  # Only the dependencies' own install scripts (allowScripts), not manent's prepare (which builds from src/).
  (cd "$made" && npm pkg delete scripts.prepare)
  (cd "$made" && npm ci --omit=dev --ignore-scripts=false --no-audit --no-fund --loglevel=error >&2)
  mv -T "$made" "$deps" 2>/dev/null || rm -rf "$made"
  # Those of earlier lockfiles are not needed any more.
  find "$cache" -maxdepth 1 -name 'node-modules-*' ! -name '*.tmp.*' ! -path "$deps" -exec rm -rf {} +
fi
cp -a "$deps/node_modules" "$work/context/manent/node_modules"
ln "$rootfs" "$work/context/rootfs.tar" 2>/dev/null || cp "$rootfs" "$work/context/rootfs.tar"
cp "$here/Containerfile" "$here/manent.yml" "$work/context/"

# Every input of the image, by content (file names and bytes; npm pack's tarball is reproducible).
key=$( (cd "$work/context/manent" && find . -path ./node_modules -prune -o -type f -print0 | sort -z | xargs -0 sha256sum;
  basename "$rootfs" "$deps"; sha256sum "$here/Containerfile" "$here/manent.yml") | sha256sum | cut -c1-16)
image=localhost/manent-server:$key
if buildah inspect --type image "$image" >/dev/null 2>&1; then
  log "$image is built already"
else
  log "building $image"
  # --layers: the base's layer (ADD rootfs.tar) is reused from the last build while the base is unchanged.
  buildah build --quiet --layers -f "$work/context/Containerfile" -t "$image" "$work/context" >/dev/null
  # Earlier builds of this image are not needed any more: their layers are freed (the base's is shared).
  for old in $(buildah images --noheading --format '{{.Name}}:{{.Tag}}' | grep '^localhost/manent-server:' | grep -vx "$image"); do
    buildah rmi "$old" >/dev/null 2>&1 || true
  done
fi
echo "$image"
