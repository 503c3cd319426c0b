#!/usr/bin/env bash
# The README's demo: a five-agent workflow on this machine, from goal to Terminal, in a scratch git repo.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
holt="$root/bin/holt"
scratch=$(mktemp -d /tmp/holt-demo.XXXXXX)
ws="$scratch/workspace"
export HOLT_HOME="$scratch/home"   # instance state, logs and data (kept out of the workspace)

mkdir -p "$ws" && cp -r "$root/examples/demo/." "$ws/"
git -C "$ws" init -q && git -C "$ws" add -A
git -C "$ws" -c user.name=demo -c user.email=demo@holt.local commit -qm "demo workspace"

cleanup() { "$holt" down --name demo --purge >/dev/null 2>&1 || true; }
trap cleanup EXIT

echo "==> holt up (workspace: $ws)"
(cd "$ws" && "$holt" up --name demo)
echo
echo "==> holt forage --watch"
(cd "$ws" && "$holt" forage --name demo --goal "Write a two-step plan and publish it" --watch --timeout 60)
echo
echo "==> holt hoard (the artefact trail)"
"$holt" hoard --name demo
echo
echo "==> holt graph (the same trail as a picture)"
"$holt" graph --name demo -o svg --file "$scratch/workflow.svg"
echo
echo "==> git log of the workspace"
git -C "$ws" log --oneline
echo
echo "Files: $ws (docs/plan.md); picture: $scratch/workflow.svg; logs: $HOLT_HOME/instances/demo/logs"
