#!/usr/bin/env bash
# make e2e-kind: the real-cluster e2e (e2e/cluster.test.ts) on a kind cluster, for machines where kind
# runs (it needs Docker and the kindest/node image from its registry: not the project's own CI machine).
#   e2e/kind/run.sh [--keep] [--recreate]
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
keep=false recreate=false
for a in "$@"; do
  case "$a" in
    --keep) keep=true ;;
    --recreate) recreate=true ;;
    -h | --help)
      sed -n '2,4p' "$0" | sed 's/^# \{0,1\}//'
      echo "  --keep      leave the cluster running afterwards"
      echo "  --recreate  delete an existing holt-e2e cluster first"
      exit 0
      ;;
    *) echo "unknown argument: $a (see --help)" >&2; exit 2 ;;
  esac
done
for tool in kind docker kubectl helm; do
  command -v "$tool" >/dev/null || { echo "e2e-kind: $tool is not installed (see https://kind.sigs.k8s.io/docs/user/quick-start/ for kind)" >&2; exit 1; }
done
name=holt-e2e
echo "==> make images"
make -C "$root" images
if kind get clusters | grep -qx "$name"; then
  if $recreate; then kind delete cluster --name "$name"; fi
fi
kind get clusters | grep -qx "$name" || { echo "==> kind create cluster"; kind create cluster --config "$root/e2e/kind/cluster.yaml" --wait 120s; }
# The project's own images; the store images are pulled from Docker Hub by the nodes (the local
# stand-ins carry the same names, so they are loaded only where no registry can be reached).
for image in $(bash "$root/scripts/images.sh" --list | grep '^ghcr.io/holt-k8s/'); do
  echo "==> kind load docker-image $image"
  kind load docker-image --name "$name" "$image"
done
kubeconfig=$(mktemp)
trap 'rm -f "$kubeconfig"; $keep || kind delete cluster --name "$name"' EXIT
kind get kubeconfig --name "$name" >"$kubeconfig"
echo "==> e2e/cluster.test.ts on kind"
# Tests that cannot apply to kind say why in this file, printed at the end (never a silent skip).
summary=$(mktemp)
status=0
(cd "$root" && HOLT_E2E_KUBECONFIG="$kubeconfig" HOLT_E2E_SUMMARY="$summary" npx --no-install vitest run e2e/cluster.test.ts) || status=$?
echo "==> summary"
if [ -s "$summary" ]; then cat "$summary"; else echo "every test applied to this cluster"; fi
rm -f "$summary"
exit "$status"
