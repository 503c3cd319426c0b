#!/bin/sh
# The official postgres image's start-up contract, as far as the operator uses it: an empty $PGDATA is
# initialised with $POSTGRES_USER / $POSTGRES_PASSWORD (scram-sha-256 over TCP, trust on the local
# socket only), $POSTGRES_DB is created, and the server listens on every address.
set -eu
[ "${1#-}" != "$1" ] && set -- postgres "$@"
if [ "$1" = postgres ]; then
  : "${PGDATA:?}" "${POSTGRES_PASSWORD:?POSTGRES_PASSWORD must be set}"
  user=${POSTGRES_USER:-postgres}
  db=${POSTGRES_DB:-$user}
  if [ ! -s "$PGDATA/PG_VERSION" ]; then
    mkdir -p "$PGDATA" && chmod 700 "$PGDATA"
    pw=$(mktemp) && printf '%s' "$POSTGRES_PASSWORD" >"$pw"
    initdb --pgdata="$PGDATA" --username="$user" --pwfile="$pw" --auth-local=trust --auth-host=scram-sha-256 \
      --encoding=UTF8 >/dev/null
    rm -f "$pw"
    printf "listen_addresses = '*'\nunix_socket_directories = '/var/run/postgresql'\n" >>"$PGDATA/postgresql.conf"
    printf 'host all all all scram-sha-256\n' >>"$PGDATA/pg_hba.conf"
    if [ "$db" != postgres ]; then
      sock=$(mktemp -d)
      pg_ctl --pgdata="$PGDATA" --options="-c listen_addresses='' -c unix_socket_directories=$sock" --wait start >/dev/null
      psql --host="$sock" --username="$user" --dbname=postgres --set ON_ERROR_STOP=1 --quiet \
        --command="CREATE DATABASE \"$db\""
      pg_ctl --pgdata="$PGDATA" --mode=fast --wait stop >/dev/null
      rmdir "$sock" 2>/dev/null || true
    fi
    echo "postgres entrypoint: initialised $PGDATA (user $user, database $db)"
  fi
  set -- "$@" -D "$PGDATA"
fi
exec "$@"
