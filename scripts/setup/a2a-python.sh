#!/usr/bin/env bash
# The official A2A Python SDK (a2a-sdk from PyPI, written by others), in a venv in the cache OUTSIDE
# the clone: the tests drive Holt's A2A server with its client (src/a2a/python.test.ts). Writes
# $CACHE/a2a-python/current.env with the venv's python (read by test/harness/a2a-python.ts).
# Only PyPI is used. Idempotent: a re-run with the venv present takes a second.
set -euo pipefail
HERE=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
. "$HERE/lib.sh"

A2A_SDK_VERSION=1.3.0
DIR="$CACHE/a2a-python"
VENV="$DIR/venv-$A2A_SDK_VERSION"
command -v python3 >/dev/null || die "a2a-python setup: python3 is not installed"
if [[ ! -x "$VENV/bin/python" ]] || ! "$VENV/bin/python" -c 'import a2a.client' 2>/dev/null; then
  rm -rf "$VENV"
  python3 -m venv "$VENV" || die "a2a-python setup: python3 -m venv failed (Debian: apt-get install python3-venv)"
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "a2a-sdk==$A2A_SDK_VERSION" \
    || die "a2a-python setup: pip install a2a-sdk==$A2A_SDK_VERSION failed"
  printf '    installed a2a-sdk %s in %s\n' "$A2A_SDK_VERSION" "$VENV"
else
  printf '    a2a-sdk %s present\n' "$A2A_SDK_VERSION"
fi
printf 'A2A_PYTHON=%s\n' "$VENV/bin/python" > "$DIR/current.env"
