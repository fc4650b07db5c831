#!/usr/bin/env bash
# Download every pinned Go module of cluster/go/*/ at once, before the builds: the downloads wait on the network,
# the builds on the CPU, so `make test` runs this beside its first tiers and the builds then only compile.
. "$(dirname "$0")/lib.sh"
command -v go >/dev/null || die "go not found (need Go >= 1.24)"
start=$SECONDS; pids=(); rc=0
for module in "$CLUSTER_DIR"/go/*/; do ( cd "$module" && timeout 1200 go mod download ) & pids+=($!); done
for pid in "${pids[@]}"; do wait "$pid" || rc=1; done
(( rc == 0 )) || die "go mod download failed in one of $CLUSTER_DIR/go/*/ (its error is above)"
log "modules of $(ls -d "$CLUSTER_DIR"/go/*/ | wc -l) builds downloaded in $((SECONDS - start))s"
