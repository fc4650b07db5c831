#!/usr/bin/env bash
# Build the pinned Kueue controller manager from the Go module proxy (wrapper module cluster/go/kueue) and
# copy the CRDs of the same module version next to it.
# Output: $CACHE/kueue-$KUEUE_VERSION/bin/kueue and $CACHE/kueue-$KUEUE_VERSION/crds/*.yaml
. "$(dirname "$0")/lib.sh"

OUT="$CACHE/kueue-$KUEUE_VERSION"
if [[ -x "$OUT/bin/kueue" && -s "$OUT/crds/kueue.x-k8s.io_workloads.yaml" && "${1:-}" != --force ]]; then
  log "kueue $KUEUE_VERSION: cached in $OUT"; exit 0
fi
command -v go >/dev/null || die "go not found (need Go >= 1.24)"
# What Kueue's own release build stamps (its Makefile's LD_FLAGS): version, commit and build date.
ld="-X sigs.k8s.io/kueue/pkg/version.GitVersion=$KUEUE_VERSION -X sigs.k8s.io/kueue/pkg/version.GitCommit=$KUEUE_GIT_COMMIT"
ld+=" -X sigs.k8s.io/kueue/pkg/version.BuildDate=$KUEUE_BUILD_DATE"
log "building kueue $KUEUE_VERSION - cold build takes ~10 min on 2 cores"
start=$SECONDS
mkdir -p "$OUT"
tmp="$OUT/tmp"; rm -rf "$tmp"; mkdir -p "$tmp/bin" "$tmp/crds"
( cd "$CLUSTER_DIR/go/kueue" && timeout 1200 go mod download )
( cd "$CLUSTER_DIR/go/kueue" && "${NICE[@]}" go build -trimpath -ldflags "-s -w $ld" -o "$tmp/bin/kueue" sigs.k8s.io/kueue/cmd/kueue )
# The CRDs as Kueue generates them (config/components/crd/bases), without its kustomize patches: those add
# a conversion webhook and CA injection, which the single served version (v1beta1) does not need.
module=$(cd "$CLUSTER_DIR/go/kueue" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)
cp "$module"/config/components/crd/bases/*.yaml "$tmp/crds/"
chmod -R u+w "$tmp"
rm -rf "$OUT/bin" "$OUT/crds"; mv "$tmp/bin" "$tmp/crds" "$OUT/"; rm -rf "$tmp"
log "kueue built in $((SECONDS - start))s -> $OUT"
