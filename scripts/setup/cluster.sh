#!/usr/bin/env bash
# Installs what the project's real node needs besides the control plane (scripts/setup/k8s.sh builds
# kube-apiserver ... kubelet, kube-proxy), into the cache OUTSIDE the clone:
#   containerd, runc, CNI plugins, iptables, conntrack   Debian packages
#   CoreDNS (cluster DNS)                                built from the github.com/coredns/coredns Go module
#   kube-router (NetworkPolicy enforcement)              built from its Go module
#   local-path-provisioner (PVCs)                        built from its Go module
#   pause (the pod sandbox process)                      scripts/setup/cluster/pause.c, static
#   Prometheus (the e2e's in-cluster scraper)            built from the github.com/prometheus/prometheus Go module
# and writes $CACHE/cluster/current.env with their paths (read by test/cluster/bins.ts).
# Idempotent: a re-run with everything present takes a second.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

COREDNS_VERSION=1.12.4
# kube-router: only its NetworkPolicy firewall runs (the bridge CNI and kube-proxy do the rest).
KUBE_ROUTER_VERSION=2.1.0
LOCAL_PATH_VERSION=0.0.30
# Prometheus 3.x, as its Go module numbers it (v0.3xx.y); the web UI's assets are not built (the API is).
PROMETHEUS_VERSION=0.316.0
DIR="$CACHE/cluster"
BIN="$DIR/bin-coredns$COREDNS_VERSION-lpp$LOCAL_PATH_VERSION"
LOGS="$CACHE/logs"
JOBS="${HOLT_SETUP_JOBS:-$(nproc)}"
mkdir -p "$BIN" "$LOGS"

say() { printf '    cluster setup: %s\n' "$*"; }
built() { # built LOG CMD...: runs CMD with its output in LOG, the log's tail on failure
  local log=$1
  shift
  "$@" >"$log" 2>&1 || { tail -n 25 "$log" >&2; die "cluster setup: $(basename "$log" .log) failed (log: $log)"; }
}

${SUDO:-} bash -c ". '$HERE/lib.sh'; apt_install containerd runc containernetworking-plugins iptables ipset conntrack iproute2 busybox-static gcc libc6-dev"

if [[ ! -x "$BIN/coredns" ]]; then
  say "building CoreDNS v$COREDNS_VERSION (cold: ~2 min)"
  src="$DIR/src/coredns-$COREDNS_VERSION"
  built "$LOGS/coredns-$COREDNS_VERSION.log" bash -c "
    set -euo pipefail
    rm -rf '$src' && mkdir -p '$src' && cd '$src'
    cp '$HERE/cluster/coredns.go' main.go
    go mod init holt.local/coredns-build
    go get github.com/coredns/coredns@v$COREDNS_VERSION
    CGO_ENABLED=0 go build -mod=mod -p $JOBS -trimpath -ldflags '-s -w' -o '$BIN/coredns' .
    '$BIN/coredns' -version"
fi

if [[ ! -x "$BIN/local-path-provisioner" ]]; then
  say "building local-path-provisioner v$LOCAL_PATH_VERSION (cold: ~1 min)"
  built "$LOGS/local-path-provisioner-$LOCAL_PATH_VERSION.log" \
    env GOBIN="$BIN" CGO_ENABLED=0 GOFLAGS=-trimpath go install -ldflags '-s -w' \
    "github.com/rancher/local-path-provisioner@v$LOCAL_PATH_VERSION"
fi

KR_BIN="$DIR/bin-kube-router$KUBE_ROUTER_VERSION"
if [[ ! -x "$KR_BIN/kube-router" ]]; then
  say "building kube-router v$KUBE_ROUTER_VERSION (cold: ~3 min)"
  mkdir -p "$KR_BIN"
  built "$LOGS/kube-router-$KUBE_ROUTER_VERSION.log" \
    env GOBIN="$KR_BIN" CGO_ENABLED=0 GOFLAGS='-trimpath -mod=mod' go install -ldflags '-s -w' \
    "github.com/cloudnativelabs/kube-router/v2/cmd/kube-router@v$KUBE_ROUTER_VERSION"
fi

PROM_BIN="$DIR/bin-prometheus$PROMETHEUS_VERSION"
if [[ ! -x "$PROM_BIN/prometheus" ]]; then
  say "building Prometheus v$PROMETHEUS_VERSION (cold: ~6 min)"
  mkdir -p "$PROM_BIN"
  built "$LOGS/prometheus-$PROMETHEUS_VERSION.log" \
    env GOBIN="$PROM_BIN" CGO_ENABLED=0 GOFLAGS='-trimpath -mod=mod' go install -p "$JOBS" -ldflags '-s -w' \
    "github.com/prometheus/prometheus/cmd/prometheus@v$PROMETHEUS_VERSION"
fi

pause_hash=$(sha256sum "$HERE/cluster/pause.c" | cut -c1-12)
if [[ ! -x "$BIN/pause-$pause_hash" ]]; then
  gcc -static -O2 -s -o "$BIN/pause-$pause_hash" "$HERE/cluster/pause.c" || die "cluster setup: pause.c did not compile"
fi

env_tmp=$(mktemp "$DIR/.current.env.XXXXXX")
cat >"$env_tmp" <<ENV
# written by scripts/setup/cluster.sh
COREDNS=$BIN/coredns
COREDNS_VERSION=$COREDNS_VERSION
LOCAL_PATH_PROVISIONER=$BIN/local-path-provisioner
LOCAL_PATH_VERSION=$LOCAL_PATH_VERSION
PAUSE=$BIN/pause-$pause_hash
CONTAINERD=$(command -v containerd)
CTR=$(command -v ctr)
RUNC=$(command -v runc)
BUSYBOX=/bin/busybox
KUBE_ROUTER=$KR_BIN/kube-router
PROMETHEUS=$PROM_BIN/prometheus
PROMETHEUS_VERSION=$PROMETHEUS_VERSION
CNI_BIN_DIR=/usr/lib/cni
ENV
mv -f "$env_tmp" "$DIR/current.env"
say "CoreDNS $COREDNS_VERSION, kube-router $KUBE_ROUTER_VERSION, local-path-provisioner $LOCAL_PATH_VERSION, pause, containerd $(containerd --version | awk '{print $3}'): $DIR/current.env"
