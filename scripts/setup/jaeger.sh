#!/usr/bin/env bash
# Builds Jaeger (the tests' trace backend: OTLP in, query API out) from its Go module
# github.com/jaegertracing/jaeger/cmd/jaeger into the cache OUTSIDE the clone, and writes
# $CACHE/jaeger/current.env with its path (read by test/harness/jaeger.ts).
# Only the Go module proxy is used. Idempotent: a re-run with the binary present takes a second.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

# v1.76.0's cmd/jaeger is Jaeger v2 (an OpenTelemetry Collector distribution run from a YAML config).
JAEGER_VERSION=1.76.0
DIR="$CACHE/jaeger"
BIN="$DIR/bin-$JAEGER_VERSION"
LOGS="$CACHE/logs"
LOG="$LOGS/jaeger-$JAEGER_VERSION.log"
JOBS="${HOLT_SETUP_JOBS:-$(nproc)}"
mkdir -p "$BIN" "$LOGS"

say() { printf '    jaeger setup: %s\n' "$*"; }

command -v go >/dev/null || die "jaeger setup: go is not installed (scripts/setup/k8s.sh needs it too)"
if [[ ! -x "$BIN/jaeger" ]]; then
  say "building Jaeger v$JAEGER_VERSION with $(go env GOVERSION) (cold: ~5-10 min, 8 min of CPU; log: $LOG)"
  t0=$(date +%s)
  # `go install …@v` refuses a module whose go.mod has replace directives (Jaeger's has one), so the
  # module is downloaded and built as the main module: its own go.mod, go.sum and replace, as upstream.
  # The web UI's assets are not embedded (the module ships a placeholder page); tests use the query API.
  ldflags="-s -w -X github.com/jaegertracing/jaeger/internal/version.latestVersion=v$JAEGER_VERSION"
  ( set -euo pipefail
    src=$(GOFLAGS=-mod=mod go mod download -json "github.com/jaegertracing/jaeger@v$JAEGER_VERSION" \
      | sed -n 's/^\t"Dir": "\(.*\)",$/\1/p')
    [[ -n "$src" && -d "$src/cmd/jaeger" ]] || { echo "no module source for jaeger@v$JAEGER_VERSION"; exit 1; }
    cd "$src"
    CGO_ENABLED=0 GOFLAGS='-trimpath -mod=readonly' go build -p "$JOBS" -ldflags "$ldflags" \
      -o "$BIN/jaeger.tmp" ./cmd/jaeger
    mv -f "$BIN/jaeger.tmp" "$BIN/jaeger"
    "$BIN/jaeger" version
  ) >"$LOG" 2>&1 || { tail -n 25 "$LOG" >&2; die "jaeger setup: the build failed (log: $LOG)"; }
  say "built in $(( $(date +%s) - t0 ))s: $BIN/jaeger ($(du -h "$BIN/jaeger" | cut -f1))"
fi

env_tmp=$(mktemp "$DIR/.current.env.XXXXXX")
cat >"$env_tmp" <<ENV
# written by scripts/setup/jaeger.sh
JAEGER=$BIN/jaeger
JAEGER_VERSION=$JAEGER_VERSION
ENV
mv -f "$env_tmp" "$DIR/current.env"
say "Jaeger $JAEGER_VERSION: $BIN/jaeger"
