#!/usr/bin/env bash
# Import the cluster's images (pause, CoreDNS, the Debian base and every image build-image.sh built) into the
# cached containerd content store that the nodes of the multi-node cluster clone at cluster-up, before it:
# `make test` runs this in the background once the project image is built, so that the e2e tier's cluster-up
# finds the 7.7 GB image already stored instead of importing it then. Idempotent (import stamps).
# Its containerd's state and log live in a run directory of their own, removed at the end: no cluster is up.
export RINGLEADER_CLUSTER_RUN="${RINGLEADER_CACHE:-$HOME/.cache/ringleader}/cluster/seed-run"
. "$(dirname "$0")/lib.sh"
. "$CLUSTER_DIR/node-config.sh"
. "$CLUSTER_DIR/nodes.sh"
take_lock
start=$SECONDS
CD_ROOT="$CACHE/containerd-$(containerd --version | awk '{print $3}')/root"
"$CLUSTER_DIR/build-images.sh" pause coredns debian-base
rm -rf "$RUN_DIR"; mkdir -p "$RUN_DIR"/{logs,pids}
trap '[[ -s "$RUN_DIR/pids/seed.containerd.pid" ]] && kill -TERM "$(cat "$RUN_DIR/pids/seed.containerd.pid")" 2>/dev/null
      rm -rf "$RUN_DIR"' EXIT
seed_store
log "content store $CD_ROOT seeded in $((SECONDS - start))s"
