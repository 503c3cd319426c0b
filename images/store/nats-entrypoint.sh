#!/bin/sh
# nats:2's contract: arguments starting with '-' are nats-server's.
set -e
case "$1" in -*) set -- nats-server "$@" ;; esac
exec "$@"
