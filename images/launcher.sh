#!/bin/sh
# /opt/holt/bin/holt: runs the bundled holt CLI with the bundled node, wherever /opt/holt was copied.
here=$(cd "$(dirname "$0")/.." && pwd)
# A pup keeps V8's young generation at 1 MB a semi-space (as holt up starts it: PUP_NODE_FLAGS).
case "$1" in pup) young=--max-semi-space-size=1 ;; *) young= ;; esac
exec "$here/bin/node" $young --no-warnings=ExperimentalWarning "$here/app/cli/main.js" "$@"
