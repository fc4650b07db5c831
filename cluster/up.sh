#!/usr/bin/env bash
# Bring up the test cluster (idempotent): build what is missing, then start etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS as background
# processes (logs: $RUN_DIR/logs), wait until the node is Ready and CoreDNS answers, print KUBECONFIG.
# RINGLEADER_CLUSTER_NODES=K (K > 1): K worker nodes, each in its own network namespace (nodes.sh).
. "$(dirname "$0")/lib.sh"
. "$CLUSTER_DIR/node-config.sh"
. "$CLUSTER_DIR/nodes.sh"
NODE_NAME="${NODE_NAME:-rl-node}"
UP_TIMEOUT="${RINGLEADER_UP_TIMEOUT:-180}"   # per wait step, seconds
T0=$SECONDS

K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
ETCD_BIN="$CACHE/etcd-$ETCD_VERSION/bin"
KUBECTL=("$K8S_BIN/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" --request-timeout=20s)
CTR=(ctr --address "$RUN_DIR/containerd/containerd.sock" --namespace k8s.io --timeout 900s)  # a torch image (7.8 GB) built while the cluster was down takes minutes to import

# What to run next: the kubeconfig, and the harness's kubectl and helm (the cluster's version; a machine's own
# kubectl may be minor versions behind), on PATH through $CACHE/bin.
usage() {
  echo "KUBECONFIG=$RUN_DIR/kubeconfig"
  echo "# kubectl $K8S_VERSION and helm $HELM_VERSION of this cluster are in $CACHE/bin; in a shell:"
  echo "#   export KUBECONFIG=$RUN_DIR/kubeconfig PATH=$CACHE/bin:\$PATH"
  echo "#   kubectl get nodes; helm install ringleader charts/ringleader -n ringleader --create-namespace"
}
cluster_healthy() {
  local p
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler; do proc_alive "$p" || return 1; done
  if (( CLUSTER_NODES > 1 )); then
    [[ "$(running_node_count)" == "$CLUSTER_NODES" ]] && nodes_healthy && in_node 1 python3 "$CLUSTER_DIR/dnsprobe.py" \
      "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP" >/dev/null 2>&1
    return
  fi
  [[ "$(running_node_count)" == 1 ]] || return 1
  for p in containerd kubelet kube-proxy; do proc_alive "$p" || return 1; done
  [[ "$("${KUBECTL[@]}" get node "$NODE_NAME" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] &&
    python3 "$CLUSTER_DIR/dnsprobe.py" "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP" >/dev/null 2>&1
}

take_lock
if [[ -s "$OWNER_FILE" && "$(cat "$OWNER_FILE")" != "$RUN_DIR" ]]; then
  other="$(cat "$OWNER_FILE")"
  if [[ -d "$other/pids" ]]; then
    die "another ringleader cluster (run dir $other) owns this machine's cluster network; run RINGLEADER_CLUSTER_RUN=$other $CLUSTER_DIR/down.sh (or with its RINGLEADER_CACHE) first"
  fi
fi
if [[ -d "$RUN_DIR/pids" ]]; then
  if cluster_healthy; then
    log "cluster already up"; usage; exit 0
  fi
  log "found a partial/stale cluster in $RUN_DIR: tearing it down first"
  RINGLEADER_LOCK_HELD=1 "$CLUSTER_DIR/down.sh"
fi

# ---------------------------------------------------------------------------------------------- build
"$CLUSTER_DIR/install-deps.sh"
"$CLUSTER_DIR/build-kubernetes.sh"   # Kueue and crictl with it
"$CLUSTER_DIR/build-tools.sh" etcd coredns helm
"$CLUSTER_DIR/build-images.sh" pause coredns debian-base
# One PATH entry for the client tools: $CACHE/bin/{kubectl,helm,crictl,etcdctl}
mkdir -p "$CACHE/bin"
ln -sfn "$K8S_BIN/kubectl" "$CACHE/bin/kubectl"; ln -sfn "$ETCD_BIN/etcdctl" "$CACHE/bin/etcdctl"
ln -sfn "$CACHE/helm-$HELM_VERSION/bin/helm" "$CACHE/bin/helm"; ln -sfn "$CACHE/crictl-$CRICTL_VERSION/bin/crictl" "$CACHE/bin/crictl"
log "build phase done ($((SECONDS - T0))s)"

echo "$RUN_DIR" > "$OWNER_FILE"
mkdir -p "$RUN_DIR"/{logs,pids,etcd,containerd,kubelet,pod-logs,cni/net.d,cni/ipam}
chmod 700 "$RUN_DIR"

# ---------------------------------------------------------------------------------------------- host network
# Sysctls this harness (or kubelet / kube-proxy) may change; saved once, restored by down.sh.
SYSCTLS=(net.ipv4.ip_forward net.bridge.bridge-nf-call-iptables vm.overcommit_memory vm.panic_on_oom
  kernel.panic kernel.panic_on_oops kernel.keys.root_maxkeys kernel.keys.root_maxbytes)
if [[ ! -s "$RUN_DIR/sysctl.saved" ]]; then
  for s in "${SYSCTLS[@]}"; do v="$(sysctl -n "$s" 2>/dev/null)" && echo "$s=$v"; done > "$RUN_DIR/sysctl.saved"
  cp "$RUN_DIR/sysctl.saved" "$CACHE/sysctl.before-up"
fi
sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
CD_ROOT="$CACHE/containerd-$(containerd --version | awk '{print $3}')/root"
if (( CLUSTER_NODES > 1 )); then
  nodes_host_network
else
# The node/pod bridge: NODE_IP is the node's InternalIP, the API server's address and the pods' gateway.
if ! ip link show "$NODE_BRIDGE" >/dev/null 2>&1; then
  ip link add "$NODE_BRIDGE" type bridge
  ip addr add "$NODE_IP/${POD_CIDR#*/}" dev "$NODE_BRIDGE"
fi
ip link set "$NODE_BRIDGE" up
# Service IPs never leave the machine, even before kube-proxy has written its DNAT rules.
ip route replace "$SERVICE_CIDR" dev "$NODE_BRIDGE"
# Egress guard: pods may talk to each other, to services and to this host, never be forwarded elsewhere.
iptables -w 5 -N RL-FORWARD 2>/dev/null || iptables -w 5 -F RL-FORWARD
iptables -w 5 -A RL-FORWARD -i "$NODE_BRIDGE" -o "$NODE_BRIDGE" -j ACCEPT
iptables -w 5 -A RL-FORWARD -i "$NODE_BRIDGE" -j REJECT --reject-with icmp-net-prohibited
iptables -w 5 -C FORWARD -j RL-FORWARD 2>/dev/null || iptables -w 5 -I FORWARD 1 -j RL-FORWARD
fi
: > "$RUN_DIR/resolv.conf"   # pods with dnsPolicy Default get no upstream resolver

# ---------------------------------------------------------------------------------------------- pki
"$CLUSTER_DIR/pki.sh"
PKI="$RUN_DIR/pki"

# ---------------------------------------------------------------------------------------------- etcd
start_proc etcd "$ETCD_BIN/etcd" --name rl --data-dir "$RUN_DIR/etcd" \
  --listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
  --listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
  --initial-cluster "rl=http://127.0.0.1:$ETCD_PEER_PORT" --listen-metrics-urls "" \
  --quota-backend-bytes 2147483648 --unsafe-no-fsync --log-level warn
wait_proc etcd "etcd healthy" "$ETCD_BIN/etcdctl" --endpoints "127.0.0.1:$ETCD_PORT" --dial-timeout 2s --command-timeout 3s endpoint health

# ---------------------------------------------------------------------------------------------- control plane
start_proc kube-apiserver "$K8S_BIN/kube-apiserver" \
  --etcd-servers "http://127.0.0.1:$ETCD_PORT" \
  --bind-address "$APISERVER_IP" --advertise-address "$APISERVER_IP" --secure-port "$APISERVER_PORT" \
  --service-cluster-ip-range "$SERVICE_CIDR" --service-node-port-range 30000-32767 \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --profiling=false --v=1
wait_proc kube-apiserver "kube-apiserver /readyz" "${KUBECTL[@]}" get --raw /readyz

# Multi-node: a lost node is marked NotReady/Unknown after RINGLEADER_NODE_MONITOR_GRACE (default 20s; the
# controller-manager's own default is 50s, docs/cluster.md), so node-loss tests do not wait out the default.
NODE_MONITOR_FLAGS=()
(( CLUSTER_NODES > 1 )) && NODE_MONITOR_FLAGS=(--node-monitor-period 2s --node-monitor-grace-period "${RINGLEADER_NODE_MONITOR_GRACE:-20s}")
start_proc kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --use-service-account-credentials=true --service-cluster-ip-range "$SERVICE_CIDR" \
  --allocate-node-cidrs=false "${NODE_MONITOR_FLAGS[@]}" --profiling=false --v=1
start_proc kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false --profiling=false --v=1

# ---------------------------------------------------------------------------------------------- node(s)
if (( CLUSTER_NODES > 1 )); then
  nodes_up "$CLUSTER_NODES"
else
CD="$RUN_DIR/containerd"
# containerd's content store and snapshots persist across cluster-down/up (so imported images are kept);
# its state (tasks, sandboxes, netns mounts) lives in the run dir and is wiped by cluster-down.
containerd_config "$CD/config.toml" "$CD" "$CD_ROOT" "$RUN_DIR/cni/net.d"
modprobe ifb 2>/dev/null || true
if ip link add rl-ifb-probe type ifb 2>/dev/null; then ip link delete rl-ifb-probe
else log "WARNING: no ifb device type (kernel module ifb): pods with kubernetes.io/egress-bandwidth will fail to start"; fi
cni_config "$RUN_DIR/cni/net.d/10-ringleader.conflist" "$NODE_BRIDGE" "$POD_CIDR" "$NODE_IP" "$RUN_DIR/cni/ipam"
start_proc containerd containerd --config "$CD/config.toml"
wait_proc containerd "containerd socket" "${CTR[@]}" version
import_images "${CTR[@]}"

kubelet_config "$RUN_DIR/kubelet-config.yaml" "$NODE_IP" "$CD" kubelet "$RUN_DIR/pod-logs"
start_proc kubelet "$K8S_BIN/kubelet" --config "$RUN_DIR/kubelet-config.yaml" \
  --kubeconfig "$RUN_DIR/kubelet.kubeconfig" --root-dir "$RUN_DIR/kubelet" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1
kube_proxy_config "$RUN_DIR/kube-proxy.yaml" "$NODE_NAME" "$NODE_IP" "$POD_CIDR"
start_proc kube-proxy "$K8S_BIN/kube-proxy" --config "$RUN_DIR/kube-proxy.yaml" --v=1

wait_proc kubelet "node $NODE_NAME registered" "${KUBECTL[@]}" get node "$NODE_NAME"
wait_proc kubelet "node $NODE_NAME Ready" bash -c "[[ \"\$(${KUBECTL[*]} get node $NODE_NAME -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].status}')\" == True ]]"
fi

# ---------------------------------------------------------------------------------------------- CoreDNS
wait_proc kube-controller-manager "default service account" "${KUBECTL[@]}" -n default get serviceaccount default
sed -e "s|@CLUSTER_DOMAIN@|$CLUSTER_DOMAIN|g" -e "s|@CLUSTER_DNS_IP@|$CLUSTER_DNS_IP|g" \
    -e "s|@COREDNS_IMAGE@|$(cat "$CACHE/images/coredns-$COREDNS_VERSION/ref")|g" \
    "$CLUSTER_DIR/manifests/coredns.yaml" | "${KUBECTL[@]}" apply -f - >/dev/null
# Whose death ends the wait: one node's kubelet, or with several nodes the scheduler (any node may run CoreDNS).
pods_proc=kubelet; (( CLUSTER_NODES > 1 )) && pods_proc=kube-scheduler
wait_proc "$pods_proc" "CoreDNS deployment available" "${KUBECTL[@]}" -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
if (( CLUSTER_NODES > 1 )); then
  wait_proc kube-apiserver "CoreDNS answers kubernetes.default via $CLUSTER_DNS_IP (from $(node_name 1))" \
    in_node 1 python3 "$CLUSTER_DIR/dnsprobe.py" "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP"
else
  wait_proc kube-proxy "CoreDNS answers kubernetes.default via $CLUSTER_DNS_IP" \
    python3 "$CLUSTER_DIR/dnsprobe.py" "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP"
fi

date +%s > "$RUN_DIR/up.stamp"
log "cluster up in $((SECONDS - T0))s"
usage
