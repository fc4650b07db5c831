# End-to-end tests (tests/e2e, docs/e2e.md) on a real Kubernetes cluster.
# Included by the top-level Makefile (`-include mk/*.mk`); `make -f mk/e2e.mk e2e` works on its own too.
#
#   make e2e        the harness's cluster (built from pinned upstream sources, no Docker; E2E_NODES=3 for three
#                   nodes, each in its own network namespace, which the multi-node tests need):
#                   cluster-up, image build + import (cached by content hash), pytest tests/e2e, then
#                   cluster-down and cluster-check-clean even when the tests fail; exits with the tests' status.
#   make e2e-kind   the same tests on a kind cluster (needs docker and kind): docker build, kind load, pytest.
#
# Variables: E2E_NODES (default 1: one node; 3: the multi-node cluster, docs/cluster.md), E2E_NIC_RATE (each
# node's NIC cap with E2E_NODES > 1, e.g. 500mbit; default uncapped), E2E_PYTEST_ARGS (e.g. "-k faults -x"), E2E_KEEP_CLUSTER=1 (skip cluster-down), E2E_IMAGE,
# E2E_PYTHON (default: ./.venv/bin/python if present, else the Makefile's cached venv).
RL_E2E_ROOT := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/..)
RL_E2E_CLUSTER := $(RL_E2E_ROOT)/cluster
E2E_IMAGE ?= localhost/ringleader/ringleader:0.1.0
# The project's one Dockerfile: on buildah's overlay driver its dependency layer (torch, mlflow) is built once
# and reused until requirements-runtime.lock changes; a code change rebuilds only the small layers after it.
E2E_DOCKERFILE ?= Dockerfile
E2E_PYTEST_ARGS ?=
E2E_NODES ?= $(or $(RINGLEADER_CLUSTER_NODES),1)
E2E_NIC_RATE ?= $(RINGLEADER_NODE_NIC_RATE)
# Exported to these targets' commands, so that cluster/up.sh, build-image.sh and the tests' harness.up() all see
# the same cluster shape.
e2e e2e-image e2e-test e2e-repeat: export RINGLEADER_CLUSTER_NODES := $(E2E_NODES)
e2e e2e-image e2e-test e2e-repeat: export RINGLEADER_NODE_NIC_RATE := $(E2E_NIC_RATE)
E2E_KEEP_CLUSTER ?=
E2E_PYTHON ?= $(firstword $(wildcard $(RL_E2E_ROOT)/.venv/bin/python) $(PY) python3)
# Per-test bound (pytest-timeout); the first test's setup includes cluster-up and the image build when
# pytest is run alone, cold. Every wait inside the tests has its own, shorter, bound.
E2E_TEST_TIMEOUT ?= 3600
E2E_TESTS ?= tests/e2e
E2E_PYTEST = RINGLEADER_E2E=1 PYTHONPATH=operator $(E2E_PYTHON) -m pytest $(E2E_TESTS) -m e2e \
	-p no:cacheprovider --timeout=$(E2E_TEST_TIMEOUT) -rA --durations=0 $(E2E_PYTEST_ARGS)

KIND ?= kind
DOCKER ?= docker
KIND_CLUSTER ?= ringleader-e2e
KIND_NODE_IMAGE ?= kindest/node:v1.34.0
KIND_KUBECONFIG ?= $(or $(RINGLEADER_CACHE),$(HOME)/.cache/ringleader)/e2e-kind/kubeconfig
# e.g. KIND_BUILD_ARGS="--build-arg EXTRA_PACKAGES=psycopg2-binary==2.9.10" (see the Dockerfile).
KIND_BUILD_ARGS ?=
E2E_KIND_KEEP_CLUSTER ?=

.PHONY: e2e e2e-nodes e2e-image e2e-test e2e-repeat e2e-kind study-nodes study-two-levels study-plan

e2e: ## e2e tests on the harness cluster: up, image, pytest tests/e2e, then down + check-clean (tests' exit status)
	@start=$$(date +%s); rc=0; \
	if [ "$(E2E_NODES)" != 1 ]; then echo ">> e2e: image $(E2E_IMAGE), before cluster-up: imported once, into the store every node clones"; \
	  cd $(RL_E2E_ROOT) && $(RL_E2E_CLUSTER)/build-image.sh $(E2E_DOCKERFILE) . $(E2E_IMAGE) || rc=$$?; fi; \
	echo ">> e2e: cluster-up"; \
	[ $$rc -ne 0 ] || $(RL_E2E_CLUSTER)/up.sh || rc=$$?; \
	if [ $$rc -eq 0 ]; then echo ">> e2e: image $(E2E_IMAGE)"; \
	  t=$$(date +%s); cd $(RL_E2E_ROOT) && $(RL_E2E_CLUSTER)/build-image.sh $(E2E_DOCKERFILE) . $(E2E_IMAGE) || rc=$$?; \
	  echo ">> e2e: image ready in $$(( $$(date +%s) - t ))s"; fi; \
	if [ $$rc -eq 0 ]; then echo ">> e2e: pytest tests/e2e"; \
	  cd $(RL_E2E_ROOT) && RINGLEADER_E2E_CLUSTER=harness RINGLEADER_E2E_IMAGE=$(E2E_IMAGE) RINGLEADER_E2E_DOCKERFILE=$(E2E_DOCKERFILE) $(E2E_PYTEST) || rc=$$?; fi; \
	if [ -z "$(E2E_KEEP_CLUSTER)" ]; then \
	  echo ">> e2e: cluster-down"; $(RL_E2E_CLUSTER)/down.sh || { echo ">> e2e: cluster-down FAILED"; [ $$rc -ne 0 ] || rc=1; }; \
	  echo ">> e2e: cluster-check-clean"; $(RL_E2E_CLUSTER)/check-clean.sh || { echo ">> e2e: cluster-check-clean FAILED"; [ $$rc -ne 0 ] || rc=1; }; \
	fi; \
	echo ">> e2e: exit $$rc after $$(( $$(date +%s) - start ))s"; exit $$rc

# Only the tests that need several nodes (placement, a lost node), on a 3-node cluster; they skip on one node.
# `make test` runs the whole tier once on three nodes instead (mk/test.sh), these included.
e2e-nodes: ## the multi-node e2e tests (test_placement_nodes.py, test_lost_node.py) on a 3-node harness cluster: up, pytest, down + check-clean
	$(MAKE) -f $(RL_E2E_ROOT)/mk/e2e.mk e2e E2E_NODES=3 E2E_PYTHON=$(E2E_PYTHON) E2E_PYTEST_ARGS="-k 'placement_nodes or lost_node' $(E2E_PYTEST_ARGS)"

STUDY_NIC_RATE ?= 500mbit
study-nodes: ## Study 1 across nodes (not a test, not in CI): 1PS/P2P/ring at 2 and 3 workers, spread and packed, on 3 nodes with NICs capped at STUDY_NIC_RATE; writes bench/results/study1_nodes.json (~15 min)
	$(MAKE) -f $(RL_E2E_ROOT)/mk/e2e.mk e2e E2E_NODES=3 E2E_NIC_RATE=$(STUDY_NIC_RATE) E2E_PYTHON=$(E2E_PYTHON) E2E_TESTS=tests/e2e/study_across_nodes.py

study-two-levels: ## Study 1 on two levels (not a test, not in CI): ring, hierarchical ring, 1PS, 1PS with pod aggregation and P2P at 3 pods x 2 ranks on 3 nodes with NICs capped at STUDY_NIC_RATE; writes bench/results/study1_two_levels.json (~10 min)
	$(MAKE) -f $(RL_E2E_ROOT)/mk/e2e.mk e2e E2E_NODES=3 E2E_NIC_RATE=$(STUDY_NIC_RATE) E2E_PYTHON=$(E2E_PYTHON) E2E_TESTS=tests/e2e/study_two_levels.py

study-plan: ## plans checked on the cluster (not a test, not in CI): one worker's profile and the probed network predict 1PS/P2P/ring at 2 and 3 workers across nodes; writes bench/results/plan_nodes.json and keeps its inputs in bench/results/plan_nodes/<run>/ (~13 min)
	$(MAKE) -f $(RL_E2E_ROOT)/mk/e2e.mk e2e E2E_NODES=3 E2E_NIC_RATE=$(STUDY_NIC_RATE) E2E_PYTHON=$(E2E_PYTHON) E2E_TESTS=tests/e2e/study_plan.py

e2e-image: ## build the project image for the harness cluster (cached by content hash) and import it
	cd $(RL_E2E_ROOT) && $(RL_E2E_CLUSTER)/build-image.sh $(E2E_DOCKERFILE) . $(E2E_IMAGE)

e2e-test: ## only pytest tests/e2e against the running harness cluster (no up/down)
	cd $(RL_E2E_ROOT) && RINGLEADER_E2E_CLUSTER=harness RINGLEADER_E2E_IMAGE=$(E2E_IMAGE) RINGLEADER_E2E_DOCKERFILE=$(E2E_DOCKERFILE) $(E2E_PYTEST)

E2E_REPEAT ?= 20
E2E_REPEAT_TEST ?= test_a_killed_worker_with_backoff_limit_0_fails_the_experiment_naming_the_pod
e2e-repeat: ## run one e2e test E2E_REPEAT times on the running cluster while every core is kept busy (not in CI)
	cd $(RL_E2E_ROOT) && tests/e2e/repeat_under_load.sh $(E2E_REPEAT) $(E2E_REPEAT_TEST)

e2e-kind: ## the same e2e tests on a kind cluster from kind-config.yaml (docker build, kind load); deleted at the end
	@command -v $(KIND) >/dev/null && command -v $(DOCKER) >/dev/null || { echo "e2e-kind needs docker and kind on PATH"; exit 2; }
	@command -v kubectl >/dev/null && command -v helm >/dev/null || { echo "e2e-kind needs kubectl and helm on PATH"; exit 2; }
	@start=$$(date +%s); rc=0; \
	echo ">> e2e-kind: docker build $(E2E_IMAGE)"; \
	cd $(RL_E2E_ROOT) && $(DOCKER) build -t $(E2E_IMAGE) $(KIND_BUILD_ARGS) . || rc=$$?; \
	if [ $$rc -eq 0 ]; then \
	  if $(KIND) get clusters 2>/dev/null | grep -qx '$(KIND_CLUSTER)'; then echo ">> e2e-kind: reusing kind cluster $(KIND_CLUSTER)"; \
	  else echo ">> e2e-kind: kind create cluster $(KIND_CLUSTER)"; \
	    $(KIND) create cluster --name $(KIND_CLUSTER) --config kind-config.yaml --image $(KIND_NODE_IMAGE) --wait 300s || rc=$$?; fi; fi; \
	if [ $$rc -eq 0 ]; then mkdir -p $$(dirname $(KIND_KUBECONFIG)) && \
	  $(KIND) get kubeconfig --name $(KIND_CLUSTER) > $(KIND_KUBECONFIG) && \
	  echo ">> e2e-kind: kind load docker-image $(E2E_IMAGE)" && \
	  $(KIND) load docker-image $(E2E_IMAGE) --name $(KIND_CLUSTER) || rc=$$?; fi; \
	if [ $$rc -eq 0 ]; then echo ">> e2e-kind: pytest tests/e2e"; \
	  cd $(RL_E2E_ROOT) && RINGLEADER_E2E_CLUSTER=kind RINGLEADER_E2E_KUBECONFIG=$(KIND_KUBECONFIG) RINGLEADER_E2E_IMAGE=$(E2E_IMAGE) \
	    $(E2E_PYTEST) || rc=$$?; fi; \
	if [ -z "$(E2E_KIND_KEEP_CLUSTER)" ]; then echo ">> e2e-kind: kind delete cluster $(KIND_CLUSTER)"; \
	  $(KIND) delete cluster --name $(KIND_CLUSTER) || { [ $$rc -ne 0 ] || rc=1; }; fi; \
	echo ">> e2e-kind: exit $$rc after $$(( $$(date +%s) - start ))s"; exit $$rc
