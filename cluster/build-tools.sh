#!/usr/bin/env bash
# Build the pinned Go tools: etcd+etcdctl (cluster/go/etcd), helm and CoreDNS (one module, cluster/go/helm-coredns:
# the second build reuses what the first compiled of their shared libraries). crictl, made of the Kubernetes
# libraries, is built with Kubernetes (build-kubernetes.sh).
# Output: $CACHE/<tool>-<version>/bin/. Usage: build-tools.sh [etcd|coredns|helm ...]
. "$(dirname "$0")/lib.sh"

build() { # MODULE NAME VERSION "BIN..." LDFLAGS PKG...
  local module="$CLUSTER_DIR/go/$1" name="$2" ver="$3" bins="$4" ld="$5"; shift 5
  local out="$CACHE/$name-$ver" key b
  key="$(build_key "$module" "$ld")"
  if current "$out/bin" "$key" $bins; then log "$name $ver: cached in $out/bin"; return 0; fi
  log "building $name $ver"
  local start=$SECONDS tmp="$out/bin.tmp"
  rm -rf "$tmp"; mkdir -p "$tmp"
  ( cd "$module" && timeout 1200 go mod download )
  ( cd "$module" && "${NICE[@]}" go build -trimpath -ldflags "-s -w $ld" -o "$tmp/" "$@" )
  # `go build` names a module-root main package after the module's last path element (etcdctl/v3 -> v3).
  [[ -e "$tmp/v3" ]] && mv "$tmp/v3" "$tmp/etcdctl"
  echo "$key" > "$tmp/.build"
  rm -rf "$out/bin"; mv "$tmp" "$out/bin"
  log "$name built in $((SECONDS - start))s"
}

# What helm's own release build stamps (its Makefile): the Kubernetes version its client-go module speaks
# (v0.37.x -> 1.37) is the default `.Capabilities.KubeVersion`; unstamped, helm assumes 1.20 and refuses
# charts whose kubeVersion needs more (`helm template charts/ringleader` without --kube-version).
helm_kube=$(sed -nE 's#^[[:space:]]*k8s.io/client-go v0\.([0-9]+)\..*#\1#p' "$CLUSTER_DIR/go/helm-coredns/go.mod")
[[ -n "$helm_kube" ]] || die "cannot read k8s.io/client-go's version from cluster/go/helm-coredns/go.mod"
helm_ld="-X helm.sh/helm/v3/internal/version.version=$HELM_VERSION -X helm.sh/helm/v3/internal/version.gitTreeState=clean"
for pkg in pkg/lint/rules pkg/chartutil; do
  helm_ld+=" -X helm.sh/helm/v3/$pkg.k8sVersionMajor=1 -X helm.sh/helm/v3/$pkg.k8sVersionMinor=$helm_kube"
done

want=("$@"); (( ${#want[@]} )) || want=(etcd coredns helm)
for t in "${want[@]}"; do
  case "$t" in
    etcd) build etcd etcd "$ETCD_VERSION" "etcd etcdctl" "" . go.etcd.io/etcd/etcdctl/v3 ;;
    coredns) build helm-coredns coredns "$COREDNS_VERSION" coredns "" ./coredns ;;
    helm) build helm-coredns helm "$HELM_VERSION" helm "$helm_ld" helm.sh/helm/v3/cmd/helm ;;
    *) die "unknown tool $t" ;;
  esac
done
