# Tailor's entry points. `make help` lists them.
SHELL := /usr/bin/env bash
.DEFAULT_GOAL := help
DIR ?= .local
FUZZTIME ?= 30s
# The Go toolchain that builds and tests Tailor: go.mod's toolchain line (hack/lib.sh does the same).
export GOTOOLCHAIN := $(shell awk '/^toolchain /{print $$2}' go.mod)
# Images are tagged with the chart's appVersion, the tag the chart deploys by default.
IMAGE_TAG ?= $(shell awk '/^appVersion:/ {gsub(/"/, "", $$2); print $$2}' manifests/charts/tailor/Chart.yaml)

.PHONY: help
help: ## List the targets.
	@awk 'BEGIN {FS = ":.*## "} /^[a-zA-Z_-]+:.*## / {printf "  %-20s %s\n", $$1, $$2}' $(MAKEFILE_LIST)

.PHONY: demo
demo: binaries ## Build, start the local stack, run the demo scenario, print it, stop everything. KUBE_SERVER_VERSION=1.37.2 runs the control plane of that release.
	$(if $(KUBE_SERVER_VERSION),hack/build-server.sh $(KUBE_SERVER_VERSION))
	_output/bin/tailor-dev demo

.PHONY: test
test: ## Run every check and test: generated code, unit, integration and end-to-end.
	hack/test.sh

.PHONY: test-compat
test-compat: ## The compact end-to-end set against every API server release of test/compat/servers.txt (VERSIONS= narrows it): prints release × scenario, writes _output/bench/compat.json.
	@VERSIONS=$(VERSIONS) hack/test-compat.sh

.PHONY: bump-kubernetes
bump-kubernetes: ## Move every Kubernetes pin at once (go.mod, scheduler-plugins, controller-runtime, controller-tools, etcd, the chart, the docs): VERSION=1.36.3.
	hack/bump-kubernetes.sh $(VERSION)

.PHONY: fuzz
fuzz: ## Run every Go fuzz target for FUZZTIME (30s) each, one after another: a table of executions, new corpus entries and crashers; fails on any crasher. FUZZ_PARALLEL= sets workers.
	@FUZZTIME=$(FUZZTIME) hack/fuzz.sh

.PHONY: bench
bench: ## Benchmark the planner on the shared workloads (1k/5k/10k pods, full catalog): pods/s, nodes, $/hour, ratio to the LP bound.
	@hack/bench.sh

.PHONY: bench-burst
bench-burst: binaries ## The provisioner under a burst of 10,000 webmix pods handed over at once on a real API server: plan time, pod → NodeClaim written (p50/p99) per client rate; writes _output/bench/burst.json. PODS=, QPS= (a list) narrow it.
	@hack/bench-burst.sh

.PHONY: bench-consolidation
bench-consolidation: binaries ## Consolidation's growth curve in memory (about 500 to 5,000 nodes): first decision, later passes, cost vs a fresh plan; writes _output/bench/consolidation.json. NODES=, SHAPES=, DECISIONS= narrow it; DAEMONSETS=eks adds the EKS DaemonSets.
	@hack/bench-consolidation.sh

.PHONY: bench-nodecost
bench-nodecost: binaries ## What nodes really cost (tiny 3k, diverse 1k, webmix 1k with EKS DaemonSets, 20 GiB gp3 roots): instance-priced vs whole-node plans, both priced whole; writes _output/bench/nodecost.json. PUBLIC_SUBNETS=1, WORKLOADS="shape:pods ...".
	@hack/bench-nodecost.sh

.PHONY: bench-scheduler
bench-scheduler: binaries ## Scheduler throughput on existing nodes with and without NodeProvisioning (scheduler_perf; NODES=5000, ROUNDS=1, PERCENTAGE_OF_NODES_TO_SCORE=as shipped): _output/bench/scheduler.json.
	@hack/bench-scheduler.sh

.PHONY: bench-scaledown
bench-scaledown: binaries ## Scale webmix 2000→500 and diverse 1000→700 pods on the local stack: cost vs a fresh plan, nodes disrupted, evictions, PDB violations, time to converge; writes _output/bench/scaledown.json. FEATURE_GATES=SpotToSpotConsolidation=true lets spot replace spot; DELETION_COSTS=false runs without steering the scale-down.
	_output/bin/tailor-dev scaledown $(if $(FEATURE_GATES),--feature-gates $(FEATURE_GATES)) $(if $(DELETION_COSTS),--pod-deletion-costs=$(DELETION_COSTS))

.PHONY: bench-scale
bench-scale: binaries ## Burst to 5,000 nodes (webmix+diverse, NODES= or PODS= for less), scale down to a third: latencies, binds/s, RSS/CPU, API requests, consolidation; writes _output/bench/scale.json.
	_output/bin/tailor-dev scale $(if $(NODES),--nodes $(NODES)) $(if $(PODS),--pods $(PODS))

.PHONY: bench-disruption
bench-disruption: binaries ## Replace-before-evict on the local stack: 20 single-replica Deployments behind Services and PDBs of minAvailable 1, half opted in, every node drifted, fillers scaled down: seconds without a ready endpoint per Deployment, drifted nodes replaced or kept, extra pods, time to converge; writes _output/bench/disruption.json. DEPLOYMENTS= sizes it.
	_output/bin/tailor-dev disruption $(if $(DEPLOYMENTS),--deployments $(DEPLOYMENTS))

.PHONY: chaos
chaos: binaries ## Randomized fault trials on local stacks (2 replicas each): TRIALS= (100) trials from SEED= (from the time) on STACKS= (1) stacks side by side, faults at random moments, invariants after each; prints the table, writes _output/bench/chaos.json, fails on any breach.
	go run ./test/chaos/cmd/tailor-chaos --trials $(or $(TRIALS),100) --stacks $(or $(STACKS),1) $(if $(SEED),--seed $(SEED))

.PHONY: binaries
binaries: ## Build every binary into _output/bin (Kubernetes binaries cached by version).
	hack/build.sh

.PHONY: up
up: binaries ## Start the local stack in $(DIR) and leave it running; prints what to export. KUBE_SERVER_VERSION=1.37.2 runs the control plane of that release.
	$(if $(KUBE_SERVER_VERSION),hack/build-server.sh $(KUBE_SERVER_VERSION))
	_output/bin/tailor-dev up --dir $(DIR)

.PHONY: env
env: ## Print the exports of the running local stack.
	@_output/bin/tailor-dev env --dir $(DIR)

.PHONY: down
down: ## Stop the local stack and remove its state.
	_output/bin/tailor-dev down --dir $(DIR)

.PHONY: generate
generate: ## Regenerate CRDs, deepcopy, plugin-args code, gRPC code, the chart's CRDs, the rendered manifests, the reference pages of docs/reference and the diagrams of docs/ (SVG from their .dot sources).
	hack/update-crds.sh
	hack/update-chart.sh
	hack/update-codegen.sh
	hack/update-proto.sh
	hack/update-docs.sh
	hack/update-diagrams.sh

.PHONY: verify
verify: ## Fail when generated code, manifests, reference pages or diagrams are stale, code is not gofmt'ed, go vet or helm lint complains, a package imports one from a layer above its own (hack/layers), golangci-lint or logcheck finds something (hack/verify-lint.sh), promtool rejects the alerting rules, a Markdown link or anchor points nowhere, or govulncheck finds a vulnerability our code reaches.
	hack/verify-gofmt.sh
	go vet ./...
	hack/verify-crds.sh
	hack/verify-codegen.sh
	hack/verify-proto.sh
	hack/verify-chart.sh
	hack/verify-rules.sh
	hack/verify-docs.sh
	hack/verify-diagrams.sh
	hack/verify-layers.sh
	hack/verify-lint.sh
	hack/verify-links.sh
	hack/verify-vulns.sh

.PHONY: lint
lint: ## Run golangci-lint (.golangci.yml), logcheck and the log-message check alone, at the pinned versions (part of make verify).
	hack/verify-lint.sh

.PHONY: verify-deps
verify-deps: ## Fail when a direct dependency (Kubernetes' own modules aside) has a newer patch release within its pinned minor; asks the module proxy.
	hack/verify-deps.sh

.PHONY: images
images: ## Build the tailor-scheduler and tailor-provisioner images for linux/amd64 and linux/arm64 without Docker (hack/images), and the chart's OCI artifact: OCI layouts in _output/images, digests printed. PUSH=<registry>/<prefix> pushes them as <prefix>/<image>:IMAGE_TAG (the chart's appVersion) and <prefix>/charts/tailor:<chart version>.
	go run ./hack/images/cmd/tailor-images --tag $(IMAGE_TAG) $(if $(PUSH),--push $(PUSH))

.PHONY: clean
clean: ## Remove build output (the version cache in ~/.cache/tailor stays).
	rm -rf _output
