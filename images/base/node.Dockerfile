# A local stand-in for node:<version>-bookworm-slim (no registry can be pulled on the project's own
# machines): the Debian base made by debootstrap, plus node and npm from the npm registry's packages,
# at the paths the official image uses. Built by scripts/images.sh; never pushed.
ARG BASE_IMAGE=holt.local/debian:bookworm-slim
FROM ${BASE_IMAGE}
COPY node /usr/local/
RUN ln -s ../lib/node_modules/npm/bin/npm-cli.js /usr/local/bin/npm \
 && ln -s ../lib/node_modules/npm/bin/npx-cli.js /usr/local/bin/npx \
 && node --version && npm --version
CMD ["node"]
