#!/bin/sh
# /opt/holt/bin/holt: runs the bundled holt CLI with the bundled node, wherever /opt/holt was copied.
here=$(cd "$(dirname "$0")/.." && pwd)
exec "$here/bin/node" --no-warnings=ExperimentalWarning "$here/app/cli/main.js" "$@"
