#!/usr/bin/env bash
# Build every pinned command made of the Kubernetes 1.34 libraries in ONE `go build` of one wrapper module
# (cluster/go/kubernetes): the six Kubernetes binaries, Kueue's controller manager and crictl share their k8s.io,
# gRPC and Prometheus packages, which are then compiled once (docs/cluster.md has the measured saving).
# Output: $CACHE/kubernetes-$K8S_VERSION/bin/{kube-apiserver,kube-controller-manager,kube-scheduler,kubelet,kube-proxy,kubectl}
#         $CACHE/kueue-$KUEUE_VERSION/bin/kueue and crds/*.yaml (the CRDs of the same module version)
#         $CACHE/crictl-$CRICTL_VERSION/bin/crictl
# A directory's binaries are reused only if they were built from the same go.mod, go.sum and version stamps (its
# .build file, lib.sh's build_key); otherwise only the stale ones are built again, in the one `go build`.
. "$(dirname "$0")/lib.sh"

MODULE="$CLUSTER_DIR/go/kubernetes"
K8S_OUT="$CACHE/kubernetes-$K8S_VERSION/bin"
KUEUE_OUT="$CACHE/kueue-$KUEUE_VERSION"
CRICTL_OUT="$CACHE/crictl-$CRICTL_VERSION/bin"
KUBE_BINS=(kube-apiserver kube-controller-manager kube-scheduler kubelet kube-proxy kubectl)

# What each project's own release build stamps, in one -ldflags: a binary without a package ignores its -X.
minor="${K8S_VERSION#v1.}"; minor="${minor%%.*}"
ld=""
for pkg in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
  ld+=" -X $pkg.gitVersion=$K8S_VERSION -X $pkg.gitCommit=$K8S_GIT_COMMIT -X $pkg.gitTreeState=clean"
  ld+=" -X $pkg.buildDate=$K8S_BUILD_DATE -X $pkg.gitMajor=1 -X $pkg.gitMinor=$minor"
done
kueue_version=sigs.k8s.io/kueue/pkg/version
ld+=" -X $kueue_version.GitVersion=$KUEUE_VERSION -X $kueue_version.GitCommit=$KUEUE_GIT_COMMIT"
ld+=" -X $kueue_version.BuildDate=$KUEUE_BUILD_DATE"
ld+=" -X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION"
BUILD_KEY="$(build_key "$MODULE" "$ld")"
force=0; [[ "${1:-}" == --force ]] && force=1

pkgs=() outs=()
if (( force )) || ! current "$K8S_OUT" "$BUILD_KEY" "${KUBE_BINS[@]}"; then
  for b in "${KUBE_BINS[@]}"; do pkgs+=("k8s.io/kubernetes/cmd/$b"); done; outs+=("$K8S_OUT:${KUBE_BINS[*]}")
fi
if (( force )) || ! current "$KUEUE_OUT/bin" "$BUILD_KEY" kueue \
    || [[ ! -s "$KUEUE_OUT/crds/kueue.x-k8s.io_workloads.yaml" ]]; then
  pkgs+=(sigs.k8s.io/kueue/cmd/kueue); outs+=("$KUEUE_OUT/bin:kueue")
fi
if (( force )) || ! current "$CRICTL_OUT" "$BUILD_KEY" crictl; then
  pkgs+=(sigs.k8s.io/cri-tools/cmd/crictl); outs+=("$CRICTL_OUT:crictl")
fi
if (( ${#pkgs[@]} == 0 )); then
  log "kubernetes $K8S_VERSION, kueue $KUEUE_VERSION, crictl $CRICTL_VERSION: cached"; exit 0
fi

command -v go >/dev/null || die "go not found (need Go >= 1.24)"
log "building ${outs[*]##*:} - cold, all of them take ~15 min of CPU (~8 min on 2 idle cores)"
start=$SECONDS
tmp="$CACHE/kubernetes-build.tmp"; rm -rf "$tmp"; mkdir -p "$tmp"
# Download first: a cold `go build` fetching k8s.io/kubernetes for many packages at once can race on its
# .ziphash ("no such file or directory").
( cd "$MODULE" && timeout 1200 go mod download )
( cd "$MODULE" && "${NICE[@]}" go build -trimpath -tags selinux,notest,grpcnotrace -ldflags "-s -w$ld" \
    -o "$tmp/" "${pkgs[@]}" )
# The Kueue CRDs as Kueue generates them (config/components/crd/bases), without its kustomize patches: those add
# a conversion webhook and CA injection, which the single served version (v1beta1) does not need.
if [[ " ${pkgs[*]} " == *" sigs.k8s.io/kueue/cmd/kueue "* ]]; then
  mkdir -p "$tmp/crds"
  cp "$(cd "$MODULE" && go list -m -f '{{.Dir}}' sigs.k8s.io/kueue)"/config/components/crd/bases/*.yaml "$tmp/crds/"
  chmod -R u+w "$tmp/crds"
  rm -rf "$KUEUE_OUT/crds"; mkdir -p "$KUEUE_OUT"; mv "$tmp/crds" "$KUEUE_OUT/crds"
fi
for out in "${outs[@]}"; do
  dir="${out%%:*}"; rm -rf "$dir.tmp"; mkdir -p "$dir.tmp"
  for b in ${out#*:}; do mv "$tmp/$b" "$dir.tmp/"; done
  echo "$BUILD_KEY" > "$dir.tmp/.build"
  rm -rf "$dir"; mv "$dir.tmp" "$dir"
done
rm -rf "$tmp"
log "built ${outs[*]##*:} in $((SECONDS - start))s"
