# A local stand-in for redis:7-alpine, built from Debian's redis-server for the project's own cluster
# (the official image cannot be pulled there). Same interface as the operator uses of the official one:
# redis-server and redis-cli on PATH, data in /data, uid 999. Built by scripts/images.sh; never pushed.
ARG BASE_IMAGE=debian:bookworm-slim
FROM ${BASE_IMAGE}
RUN groupadd --gid 999 redis && useradd --uid 999 --gid 999 --no-create-home --home-dir /data --shell /usr/sbin/nologin redis \
 && apt-get update && apt-get install -y --no-install-recommends redis-server redis-tools \
 && rm -rf /var/lib/apt/lists/* /etc/redis \
 && mkdir /data && chown redis:redis /data
COPY images/store/redis-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /data
WORKDIR /data
USER 999:999
EXPOSE 6379
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["redis-server"]
