#!/usr/bin/env bash
# Build the pinned Kubernetes binaries from the Go module proxy in ONE `go build` (shared compile work).
# Output: $CACHE/kubernetes-$K8S_VERSION/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl}
. "$(dirname "$0")/lib.sh"

OUT="$CACHE/kubernetes-$K8S_VERSION"
BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)
have_all() { local b; for b in "${BINS[@]}"; do [[ -x "$OUT/bin/$b" ]] || return 1; done; }
if have_all && [[ "${1:-}" != --force ]]; then log "kubernetes $K8S_VERSION: cached in $OUT/bin"; exit 0; fi

command -v go >/dev/null || die "go not found (need Go >= 1.24)"
mkdir -p "$OUT"
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ld=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitCommit=$K8S_GIT_COMMIT -X $pkg.gitTreeState=clean"
  ld+=" -X $pkg.buildDate=$K8S_BUILD_DATE -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
pkgs=(); for b in "${BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done
log "building kubernetes $K8S_VERSION (${BINS[*]}) - cold build takes ~20-30 min on 2 cores"
start=$SECONDS
tmp="$OUT/bin.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
# Download first: a cold `go build` fetching k8s.io/kubernetes for many packages at once can race on its
# .ziphash ("no such file or directory").
( cd "$CLUSTER_DIR/go/kubernetes" && timeout 1200 go mod download )
( cd "$CLUSTER_DIR/go/kubernetes" && "${NICE[@]}" go build -trimpath -tags selinux,notest,grpcnotrace \
    -ldflags "-s -w$ld" -o "$tmp/" "${pkgs[@]}" )
rm -rf "$OUT/bin"; mv "$tmp" "$OUT/bin"
log "kubernetes built in $((SECONDS - start))s -> $OUT/bin"
