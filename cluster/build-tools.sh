#!/usr/bin/env bash
# Build the pinned Go tools (etcd+etcdctl, coredns, crictl, helm), each from its wrapper module in cluster/go/.
# Output: $CACHE/<tool>-<version>/bin/. Usage: build-tools.sh [etcd|coredns|crictl|helm ...]
. "$(dirname "$0")/lib.sh"
export GONOSUMDB="$GONOSUMDB,sigs.k8s.io/cri-tools"

build() { # NAME VERSION "BIN..." LDFLAGS PKG...
  local name="$1" ver="$2" bins="$3" ld="$4"; shift 4
  local out="$CACHE/$name-$ver"
  local b missing=0
  for b in $bins; do [[ -x "$out/bin/$b" ]] || missing=1; done
  # A build is reused only if it was linked with the same stamps (version variables) as asked now.
  [[ "$(cat "$out/bin/.ldflags" 2>/dev/null)" == "$ld" ]] || missing=1
  if (( !missing )); then log "$name $ver: cached in $out/bin"; return 0; fi
  log "building $name $ver"
  local start=$SECONDS tmp="$out/bin.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  ( cd "$CLUSTER_DIR/go/$name" && timeout 1200 go mod download )
  ( cd "$CLUSTER_DIR/go/$name" && "${NICE[@]}" go build -trimpath -ldflags "-s -w $ld" -o "$tmp/" "$@" )
  # `go build` names a module-root main package after the module's last path element (etcdctl/v3 -> v3).
  [[ -e "$tmp/v3" ]] && mv "$tmp/v3" "$tmp/etcdctl"
  printf '%s' "$ld" > "$tmp/.ldflags"
  rm -rf "$out/bin"; mv "$tmp" "$out/bin"
  log "$name built in $((SECONDS - start))s"
}

# What helm's own release build stamps (its Makefile): the Kubernetes version its client-go module speaks
# (v0.37.x -> 1.37) is the default `.Capabilities.KubeVersion`; unstamped, helm assumes 1.20 and refuses
# charts whose kubeVersion needs more (`helm template charts/ringleader` without --kube-version).
helm_kube=$(sed -nE 's#^[[:space:]]*k8s.io/client-go v0\.([0-9]+)\..*#\1#p' "$CLUSTER_DIR/go/helm/go.mod")
[[ -n "$helm_kube" ]] || die "cannot read k8s.io/client-go's version from cluster/go/helm/go.mod"
helm_ld="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  helm_ld+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$helm_kube"
done

want=("$@"); (( ${#want[@]} )) || want=(etcd coredns crictl helm)
for t in "${want[@]}"; do
  case "$t" in
    etcd) build etcd "$ETCD_VERSION" "etcd etcdctl" "" . go.etcd.io/etcd/etcdctl/v3 ;;
    coredns) build coredns "$COREDNS_VERSION" coredns "" . ;;
    crictl) build crictl "$CRICTL_VERSION" crictl "-X sigs.k8s.io/cri-tools/pkg/version.Version=$CRICTL_VERSION" sigs.k8s.io/cri-tools/cmd/crictl ;;
    helm) build helm "$HELM_VERSION" helm "$helm_ld" helm.sh/helm/v3/cmd/helm ;;
    *) die "unknown tool $t" ;;
  esac
done
