# Everything runs on the pinned Node LTS that `make setup` installs into the cache (outside git).
CACHE ?= $(or $(HOLT_CACHE_DIR),$(or $(XDG_CACHE_HOME),$(HOME)/.cache)/holt)
NODE_VERSION := $(shell cat .node-version)
export PATH := $(CACHE)/node/$(NODE_VERSION)/bin:$(CACHE)/tools/bin:$(PATH)
export NODE_OPTIONS ?= --no-warnings=ExperimentalWarning

.PHONY: setup test typecheck lint format unit demo bench version crds images cluster-up cluster-down e2e-kind help

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

setup: ## install everything the project needs (idempotent)
	@bash scripts/setup.sh

test: typecheck lint images unit ## typecheck + lint + images + all tests, the real cluster's e2e included (the CI command)

typecheck: ## TypeScript strict typecheck
	npx --no-install tsc --noEmit -p tsconfig.json

lint: ## Biome lint and format check
	npx --no-install biome check .

format: ## apply Biome's formatting and safe fixes
	npx --no-install biome check --write .

unit: ## run every test file (real servers, started per file)
	npx --no-install vitest run

version: ## set the release version (V=x.y.z) in package.json and the chart; images and programs read it from there
	node scripts/set-version.ts $(V)

crds: ## regenerate crds/, the Helm chart's CRDs and examples/k8s/demo.yaml from src/api
	node scripts/gen-crds.ts

images: ## build the operator, runtime and store images with the local engine (docker or podman); prints sizes
	@bash scripts/images.sh

NODES ?= 1
NAME ?= holt
cluster-up: ## a real local cluster (NODES=2 for two), the project's images loaded; prints the kubeconfig path last
	node scripts/cluster.ts up --name $(NAME) --nodes $(NODES)

cluster-down: ## stop the local cluster and remove everything it made
	node scripts/cluster.ts down --name $(NAME)

e2e-kind: ## the real-cluster e2e on a kind cluster (needs kind and Docker with registry access; not on the project's CI)
	@bash e2e/kind/run.sh

demo: ## run the demo
	@bash scripts/demo.sh

bench: ## run the benchmarks (print JSON figures)
	@for b in bench/*/main.ts; do [ -f "$$b" ] && node "$$b"; done; true
