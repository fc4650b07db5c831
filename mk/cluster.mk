# Kubernetes test cluster built from pinned upstream sources (see docs/cluster.md): one node, or NODES=K nodes
# (each in its own network namespace; NIC_RATE=500mbit caps every node's NIC both ways).
# Included by the top-level Makefile (`include mk/*.mk`).
RL_CLUSTER_DIR := $(abspath $(dir $(lastword $(MAKEFILE_LIST)))/../cluster)

.PHONY: cluster-deps cluster-build cluster-up cluster-down cluster-check-clean cluster-status cluster-image cluster-kubeconfig cluster-prune cluster-smoke cluster-kueue

cluster-deps: ## install the host packages the cluster needs (apt)
	$(RL_CLUSTER_DIR)/install-deps.sh

cluster-build: cluster-deps ## build Kubernetes, etcd, CoreDNS, crictl, helm, Kueue and the images (cached)
	$(RL_CLUSTER_DIR)/build-kubernetes.sh
	$(RL_CLUSTER_DIR)/build-tools.sh
	$(RL_CLUSTER_DIR)/build-images.sh

NODES ?=
NIC_RATE ?=
cluster-up: ## start the cluster (idempotent; builds what is missing; NODES=3 for three nodes); prints KUBECONFIG and how to use its kubectl and helm
	$(if $(NODES),RINGLEADER_CLUSTER_NODES=$(NODES)) $(if $(NIC_RATE),RINGLEADER_NODE_NIC_RATE=$(NIC_RATE)) $(RL_CLUSTER_DIR)/up.sh

cluster-kueue: ## run Kueue (its CRDs and controller manager) against the running cluster (idempotent; cluster-down stops it)
	$(RL_CLUSTER_DIR)/kueue-up.sh

cluster-down: ## stop the cluster and remove everything it created on the host
	$(RL_CLUSTER_DIR)/down.sh

cluster-check-clean: ## fail if any process, mount, interface, netns, iptables rule... of the cluster is left
	$(RL_CLUSTER_DIR)/check-clean.sh

cluster-smoke: ## end-to-end checks of the running cluster (pods, DNS, Services, API server from pods)
	$(RL_CLUSTER_DIR)/smoke-test.sh

cluster-status: ## show node and pods of the running cluster
	$(RL_CLUSTER_DIR)/status.sh

cluster-kubeconfig: ## print the path of the admin kubeconfig
	@$(RL_CLUSTER_DIR)/status.sh --kubeconfig

# make cluster-image DOCKERFILE=Dockerfile CONTEXT=. TAG=localhost/ringleader/operator:dev [BUILD_ARGS="K=V ..."]
cluster-image: ## build a Dockerfile on the Debian base image without a Docker engine, import into containerd
	$(RL_CLUSTER_DIR)/build-image.sh $(or $(DOCKERFILE),Dockerfile) $(or $(CONTEXT),.) $(or $(TAG),localhost/ringleader/operator:dev) $(foreach a,$(BUILD_ARGS),--build-arg $(a))

cluster-prune: ## free ~7 GB: drop the Go build/module caches (binaries and images stay; a rebuild is cold again)
	-chmod -R u+w $${RINGLEADER_CACHE:-$$HOME/.cache/ringleader}/cluster/go-mod 2>/dev/null
	rm -rf $${RINGLEADER_CACHE:-$$HOME/.cache/ringleader}/cluster/go-build $${RINGLEADER_CACHE:-$$HOME/.cache/ringleader}/cluster/go-mod $${RINGLEADER_CACHE:-$$HOME/.cache/ringleader}/cluster/buildah/tmp
