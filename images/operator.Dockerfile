# syntax=docker/dockerfile:1
# The Holt operator (`holt operator`): reconciles Holt, Agent and WorkerPool resources.
# Build from the repository root: docker build -f images/operator.Dockerfile -t ghcr.io/holt-k8s/operator:0.1.0 .
ARG NODE_IMAGE=node:24-bookworm-slim
# Behind a TLS-inspecting proxy: BUILD_CA_PEM (PEM text of its CA) is trusted by npm in the build
# stages only; the final image never sees it. scripts/images.sh passes the machine's added CAs.

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

# 3. Runtime: node, the compiled program and its production dependencies; npm and yarn removed
#    (less to patch and to exploit; the operator never installs anything).
FROM ${NODE_IMAGE}
RUN rm -rf /usr/local/lib/node_modules/npm /usr/local/lib/node_modules/corepack /usr/local/bin/npm \
      /usr/local/bin/npx /usr/local/bin/corepack /opt/yarn-* /usr/local/bin/yarn /usr/local/bin/yarnpkg
WORKDIR /app
COPY --from=deps /src/node_modules ./node_modules
COPY --from=build /src/dist ./
COPY package.json ./
ENV NODE_ENV=production
# A numeric non-root user, so runAsNonRoot can be verified; matches the chart's runAsUser.
USER 65532:65532
# metrics, health (/healthz, /readyz)
EXPOSE 8080 8081
# --optimize-for-size: V8 collects sooner instead of growing the heap through reconcile bursts
# (bench/operator, 100 Holts x 5 Agents: RSS ~320 MB -> ~175 MB, convergence time about the same).
# A V8 flag, not allowed in NODE_OPTIONS, hence here; bench/operator/child.ts runs with it too.
ENTRYPOINT ["node", "--optimize-for-size", "--no-warnings=ExperimentalWarning", "/app/cli/main.js", "operator"]
