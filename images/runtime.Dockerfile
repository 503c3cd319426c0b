# syntax=docker/dockerfile:1
# The Holt runtime: the orchestrator and the pup (`holt orchestrator`, `holt pup`), plus a
# self-contained bundle under /opt/holt that an init container copies into users' own agent images.
# Build from the repository root: docker build -f images/runtime.Dockerfile -t ghcr.io/holt-k8s/runtime:0.1.0 .
ARG NODE_IMAGE=node:24-bookworm-slim
# Behind a TLS-inspecting proxy: BUILD_CA_PEM (PEM text of its CA) is trusted by npm in the build
# stages only; the final image never sees it. scripts/images.sh passes the machine's added CAs.
ARG BASE_IMAGE=debian:bookworm-slim

# 1. Compile TypeScript to dist/.
FROM ${NODE_IMAGE} AS build
WORKDIR /src
COPY package.json package-lock.json ./
ARG BUILD_CA_PEM=""
RUN if [ -n "$BUILD_CA_PEM" ]; then printf '%s\n' "$BUILD_CA_PEM" >/tmp/build-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/build-ca.pem; fi \
 && npm ci --ignore-scripts --no-audit --no-fund
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
RUN npm run build

# 2. Production dependencies only, without what only compilers and editors read (types, sources, maps).
FROM ${NODE_IMAGE} AS deps
WORKDIR /src
COPY package.json package-lock.json ./
ARG BUILD_CA_PEM=""
RUN if [ -n "$BUILD_CA_PEM" ]; then printf '%s\n' "$BUILD_CA_PEM" >/tmp/build-ca.pem; export NODE_EXTRA_CA_CERTS=/tmp/build-ca.pem; fi \
 && npm ci --omit=dev --ignore-scripts --no-audit --no-fund && npm cache clean --force \
 && find node_modules -type f \( -name '*.map' -o -name '*.ts' -o -name '*.mts' -o -name '*.cts' -o -name '*.md' \) -delete

# 3. The bundle: its own node binary, the compiled program, its dependencies and two launchers.
FROM ${NODE_IMAGE} AS bundle
COPY --from=deps /src/node_modules /opt/holt/app/node_modules
COPY --from=build /src/dist /opt/holt/app
COPY package.json /opt/holt/app/package.json
COPY images/launcher.sh /opt/holt/bin/holt
RUN cp /usr/local/bin/node /opt/holt/bin/node \
 && printf '#!/bin/sh\nexec "$(dirname "$0")/holt" pup "$@"\n' > /opt/holt/bin/pup \
 && chmod 0755 /opt/holt/bin/holt /opt/holt/bin/pup

# 4. The runtime image: Debian slim (the base of node:24-slim) + git (the tool runner verifies CodeCommit
# artefacts with git, and tools commit) + the bundle; node on PATH is the bundle's, so it exists once.
FROM ${BASE_IMAGE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends git ca-certificates tini \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 1000 holt && useradd --uid 1000 --gid 1000 --create-home --shell /usr/sbin/nologin holt
COPY --from=bundle /opt/holt /opt/holt
# The workspace volume's root belongs to whoever made it (root, for most provisioners) while the agents
# run as another user: the tools' own git would refuse it as of "dubious ownership". The pup never runs
# git, and the runner's CodeCommit check reads no system config (src/pup/git.ts), so this serves tools only.
RUN ln -s /opt/holt/bin/node /usr/local/bin/node && ln -s /opt/holt/bin/holt /usr/local/bin/holt \
 && git config --system --add safe.directory /workspace
ENV NODE_ENV=production HOLT_WORKSPACE=/workspace
WORKDIR /workspace
USER 1000:1000
# /healthz, /readyz and /metrics of the pup and the orchestrator.
EXPOSE 8080
ENTRYPOINT ["/usr/bin/tini", "--", "/opt/holt/bin/holt"]
CMD ["pup"]
