#!/bin/sh
# redis:7's contract: arguments starting with '-' or ending in .conf are redis-server's.
set -e
case "$1" in -*|*.conf) set -- redis-server "$@" ;; esac
exec "$@"
