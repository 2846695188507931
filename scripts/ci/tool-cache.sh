# Sourced by the set-up scripts that build binaries from the Go module proxy into .tools/bin: a
# cache of those binaries per machine (~/.cache/manent/tools; MANENT_TOOL_CACHE overrides), shared
# by every checkout and clone. Go's build cache makes a rebuild in a fresh clone cheaper, not free
# (linking Vault, kube-apiserver or cosign again is 5-30 s each); this copies the binary instead.
# A binary is keyed by its name, its version and the bytes of its recipe (the building script and
# the go.mod/go.sum it builds from), so a changed recipe builds again. Written aside and renamed,
# so two checkouts setting up at once do not clash.
tool_cache_dir=${MANENT_TOOL_CACHE:-${XDG_CACHE_HOME:-$HOME/.cache}/manent/tools}

tool_cache_key() { # name version recipe-file...
  local name=$1 version=$2
  shift 2
  echo "$name-$version-$(cat "$@" | sha256sum | cut -c1-16)"
}

# Copies the cached binary to DEST and succeeds; fails when none is cached.
tool_from_cache() { # name version dest recipe-file...
  local name=$1 version=$2 dest=$3
  shift 3
  local cached
  cached=$tool_cache_dir/$(tool_cache_key "$name" "$version" "$@")
  [ -x "$cached" ] || return 1
  cp "$cached" "$dest.tmp.$$" && mv "$dest.tmp.$$" "$dest"
}

# Keeps a copy of BUILT for the next checkout.
tool_to_cache() { # name version built recipe-file...
  local name=$1 version=$2 built=$3
  shift 3
  local cached
  cached=$tool_cache_dir/$(tool_cache_key "$name" "$version" "$@")
  mkdir -p "$tool_cache_dir"
  cp "$built" "$cached.tmp.$$" && mv "$cached.tmp.$$" "$cached"
}
