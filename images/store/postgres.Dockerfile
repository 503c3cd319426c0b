# A local stand-in for postgres:17-alpine, built from Debian's PostgreSQL 15 for the project's own
# cluster. The official image's contract as the operator uses it: POSTGRES_USER, POSTGRES_PASSWORD,
# POSTGRES_DB and PGDATA (initialised when empty, password logins over TCP, listening on all
# addresses), pg_isready and psql on PATH, uid 70. Built by scripts/images.sh; never pushed.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The server user exists before the package's scripts would make one (initdb refuses a uid that is not
# in /etc/passwd), and the package makes no cluster of its own.
RUN groupadd --gid 70 postgres \
 && useradd --uid 70 --gid 70 --home-dir /var/lib/postgresql --no-create-home --shell /bin/sh postgres \
 && apt-get update && apt-get install -y --no-install-recommends postgresql-common \
 && sed -i 's/^#\?create_main_cluster.*/create_main_cluster = false/' /etc/postgresql-common/createcluster.conf \
 && apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH PGDATA=/var/lib/postgresql/data
COPY images/store/postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER 70:70
EXPOSE 5432
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
