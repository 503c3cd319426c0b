# A local stand-in for nats:2-alpine, built from Debian's nats-server for the project's own cluster.
# Same interface as the operator uses: nats-server on PATH (JetStream, /healthz on the monitor port,
# `--signal ldm`), a shell, uid 1000. Built by scripts/images.sh; never pushed.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
# The package makes a system user `nats`; the server runs as uid 1000, as the operator's pods ask.
RUN apt-get update && apt-get install -y --no-install-recommends nats-server \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 natsd && useradd --uid 1000 --gid 1000 --no-create-home --home-dir /data --shell /usr/sbin/nologin natsd \
 && mkdir /data && chown natsd:natsd /data
COPY images/store/nats-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
USER 1000:1000
EXPOSE 4222 8222
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["nats-server", "--jetstream", "--store_dir", "/data", "--http_port", "8222"]
