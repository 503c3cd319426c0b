#!/usr/bin/env bash
# A container engine for `make images`: Podman or Docker if one already answers, else Debian's
# docker.io, with dockerd started in the background (log and pid in the cache) when none runs.
# Idempotent: seconds when the engine runs.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

for e in podman docker; do
  if command -v "$e" >/dev/null && "$e" info >/dev/null 2>&1; then
    echo "    $e answers: $("$e" version --format '{{.Server.Version}}' 2>/dev/null || echo running)"
    exit 0
  fi
done
${SUDO:-} bash -c ". '$HERE/lib.sh'; apt_install docker.io debootstrap"
mkdir -p "$CACHE/logs"
log="$CACHE/logs/dockerd.log"
# No systemd here: dockerd runs detached from this script, and lasts until the machine stops.
# Inherited descriptors above 2 are closed first: a caller's lock (`flock LOCK make setup`) would
# otherwise be held by dockerd for as long as it runs.
${SUDO:-} setsid nohup bash -c 'for f in /proc/$$/fd/*; do n=${f##*/}; [ "$n" -gt 2 ] && eval "exec $n>&-" 2>/dev/null; done
  exec /usr/sbin/dockerd --pidfile "$1"' dockerd "$CACHE/dockerd.pid" >>"$log" 2>&1 </dev/null &
for _ in $(seq 1 60); do
  docker info >/dev/null 2>&1 && { echo "    dockerd $(docker version --format '{{.Server.Version}}') started (log: $log)"; exit 0; }
  sleep 1
done
tail -n 20 "$log" >&2
die "dockerd did not start in 60 s (log: $log)"
