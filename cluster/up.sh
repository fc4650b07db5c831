#!/usr/bin/env bash
# Bring up the single-node test cluster (idempotent): build what is missing, then start etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler, containerd, kubelet, kube-proxy and CoreDNS as background
# processes (logs: $RUN_DIR/logs), wait until the node is Ready and CoreDNS answers, print KUBECONFIG.
. "$(dirname "$0")/lib.sh"
NODE_NAME="${NODE_NAME:-rl-node}"
UP_TIMEOUT="${RINGLEADER_UP_TIMEOUT:-180}"   # per wait step, seconds
T0=$SECONDS

K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
ETCD_BIN="$CACHE/etcd-$ETCD_VERSION/bin"
KUBECTL=("$K8S_BIN/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" --request-timeout=20s)
CTR=(ctr --address "$RUN_DIR/containerd/containerd.sock" --namespace k8s.io --timeout 60s)

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
  for p in etcd kube-apiserver kube-controller-manager kube-scheduler containerd kubelet kube-proxy; do
    proc_alive "$p" || return 1
  done
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
"$CLUSTER_DIR/build-kubernetes.sh"
"$CLUSTER_DIR/build-tools.sh" etcd coredns crictl helm
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
  --bind-address "$NODE_IP" --advertise-address "$NODE_IP" --secure-port "$APISERVER_PORT" \
  --service-cluster-ip-range "$SERVICE_CIDR" --service-node-port-range 30000-32767 \
  --authorization-mode Node,RBAC --enable-admission-plugins NodeRestriction --allow-privileged=true \
  --client-ca-file "$PKI/ca.crt" --tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
  --kubelet-client-certificate "$PKI/apiserver-kubelet-client.crt" --kubelet-client-key "$PKI/apiserver-kubelet-client.key" \
  --kubelet-certificate-authority "$PKI/ca.crt" --kubelet-preferred-address-types InternalIP \
  --service-account-issuer "https://kubernetes.default.svc.$CLUSTER_DOMAIN" \
  --service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
  --profiling=false --v=1
wait_proc kube-apiserver "kube-apiserver /readyz" "${KUBECTL[@]}" get --raw /readyz

start_proc kube-controller-manager "$K8S_BIN/kube-controller-manager" \
  --kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/controller-manager.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10257 --leader-elect=false \
  --service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
  --cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
  --use-service-account-credentials=true --service-cluster-ip-range "$SERVICE_CIDR" \
  --allocate-node-cidrs=false --profiling=false --v=1
start_proc kube-scheduler "$K8S_BIN/kube-scheduler" \
  --kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --authentication-kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --authorization-kubeconfig "$RUN_DIR/scheduler.kubeconfig" \
  --bind-address 127.0.0.1 --secure-port 10259 --leader-elect=false --profiling=false --v=1

# ---------------------------------------------------------------------------------------------- containerd
CD="$RUN_DIR/containerd"
# containerd's content store and snapshots persist across cluster-down/up (so imported images are kept);
# its state (tasks, sandboxes, netns mounts) lives in the run dir and is wiped by cluster-down.
CD_ROOT="$CACHE/containerd-$(containerd --version | awk '{print $3}')/root"
mkdir -p "$CD/certs.d" "$CD_ROOT" "$CD_ROOT/../imported"
# Any registry pull is sent to a closed loopback port: images must be imported, never pulled.
for reg in _default docker.io registry.k8s.io ghcr.io quay.io gcr.io; do
  mkdir -p "$CD/certs.d/$reg"
  printf 'server = "http://127.0.0.1:9"\n\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' > "$CD/certs.d/$reg/hosts.toml"
done
PAUSE_IMAGE="$(cat "$CACHE/images/pause-$PAUSE_VERSION/ref")"
cat > "$CD/config.toml" <<TOML
version = 2
root = "$CD_ROOT"
state = "$CD/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$CD/containerd.sock"
[ttrpc]
  address = "$CD/containerd.sock.ttrpc"
[debug]
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$PAUSE_IMAGE"
  stream_server_address = "127.0.0.1"
  stream_server_port = "0"
  disable_tcp_service = true
  netns_mounts_under_state_dir = true
  # This sandbox lacks CAP_SYS_RESOURCE, so lowering oom_score_adj (kubelet asks -998 for sandboxes) fails
  # in runc init; never go below containerd's own score (containerd's rootless-mode knob).
  restrict_oom_score_adj = true
  enable_selinux = false
  max_container_log_line_size = 16384
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        BinaryName = "$(command -v runc)"
        Root = "$CD/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$RUN_DIR/cni/net.d"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$CD/certs.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$CD/opt"
TOML
# bandwidth: pods annotated kubernetes.io/ingress-bandwidth / egress-bandwidth get a tbf qdisc on their host
# veth (what they receive) and on an ifb device their traffic is redirected through (what they send);
# containerd passes the annotations as the plugin's `bandwidth` capability. Egress needs the ifb module.
modprobe ifb 2>/dev/null || true
if ip link add rl-ifb-probe type ifb 2>/dev/null; then ip link delete rl-ifb-probe
else log "WARNING: no ifb device type (kernel module ifb): pods with kubernetes.io/egress-bandwidth will fail to start"; fi
cat > "$RUN_DIR/cni/net.d/10-ringleader.conflist" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "ringleader",
  "plugins": [
    {
      "type": "bridge", "bridge": "$NODE_BRIDGE", "isGateway": true, "isDefaultGateway": true,
      "ipMasq": false, "hairpinMode": true, "promiscMode": false,
      "ipam": {
        "type": "host-local", "dataDir": "$RUN_DIR/cni/ipam",
        "ranges": [[{"subnet": "$POD_CIDR", "gateway": "$NODE_IP"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": false},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}
JSON
start_proc containerd containerd --config "$CD/config.toml"
wait_proc containerd "containerd socket" "${CTR[@]}" version

for img in pause "coredns" debian-base; do
  dir="$("$CLUSTER_DIR/build-images.sh" --dir "$img")"
  ref="$(cat "$dir/ref")"
  if [[ -n "$("${CTR[@]}" images ls -q "name==$ref")" ]]; then continue; fi
  s=$SECONDS
  "${CTR[@]}" images import "$dir/image.tar" >/dev/null
  "${CTR[@]}" images label "$ref" io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
  log "imported $ref ($((SECONDS - s))s)"
done
# Images built with cluster/build-image.sh while the cluster was down (or rebuilt since) are imported now.
for dir in "$CACHE"/built-images/*/; do
  [[ -s "$dir/image.tar" && -s "$dir/key" ]] || continue
  stamp="$CD_ROOT/../imported/$(basename "$dir").key"
  ref="$(cat "$dir/ref")"
  if [[ "$(cat "$stamp" 2>/dev/null)" == "$(cat "$dir/key")" && -n "$("${CTR[@]}" images ls -q "name==$ref")" ]]; then continue; fi
  "${CTR[@]}" images import "$dir/image.tar" >/dev/null && cp "$dir/key" "$stamp" && log "imported $ref"
done

# ---------------------------------------------------------------------------------------------- kubelet
cat > "$RUN_DIR/kubelet-config.yaml" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $NODE_IP
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$CD/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $PKI/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $PKI/kubelet.crt
tlsPrivateKeyFile: $PKI/kubelet.key
cgroupDriver: cgroupfs
failSwapOn: false
clusterDNS: [$CLUSTER_DNS_IP]
clusterDomain: $CLUSTER_DOMAIN
resolvConf: $RUN_DIR/resolv.conf
# The sandbox and base images are imported, not pullable: never garbage-collect images.
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
# Disk pressure would still reclaim images, the sandbox image included (containerd 1.6 does not pin it), and
# then no pod starts: building the 8 GB image beside a running cluster can leave less than 2 % of a big disk
# free for a while. An absolute floor keeps that transient from reaching the kubelet.
evictionHard: {memory.available: 100Mi, nodefs.available: 1Gi, imagefs.available: 1Gi, nodefs.inodesFree: 2%}
serializeImagePulls: false
maxPods: 110
rotateCertificates: false
serverTLSBootstrap: false
podPidsLimit: -1
podLogsDir: $RUN_DIR/pod-logs
YAML
start_proc kubelet "$K8S_BIN/kubelet" --config "$RUN_DIR/kubelet-config.yaml" \
  --kubeconfig "$RUN_DIR/kubelet.kubeconfig" --root-dir "$RUN_DIR/kubelet" \
  --hostname-override "$NODE_NAME" --node-ip "$NODE_IP" --v=1

# ---------------------------------------------------------------------------------------------- kube-proxy
cat > "$RUN_DIR/kube-proxy.yaml" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN_DIR/kube-proxy.kubeconfig}
hostnameOverride: $NODE_NAME
bindAddress: $NODE_IP
clusterCIDR: $POD_CIDR
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$NODE_IP/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, masqueradeAll: false}
YAML
start_proc kube-proxy "$K8S_BIN/kube-proxy" --config "$RUN_DIR/kube-proxy.yaml" --v=1

wait_proc kubelet "node $NODE_NAME registered" "${KUBECTL[@]}" get node "$NODE_NAME"
wait_proc kubelet "node $NODE_NAME Ready" bash -c "[[ \"\$(${KUBECTL[*]} get node $NODE_NAME -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].status}')\" == True ]]"

# ---------------------------------------------------------------------------------------------- CoreDNS
wait_proc kube-controller-manager "default service account" "${KUBECTL[@]}" -n default get serviceaccount default
sed -e "s|@CLUSTER_DOMAIN@|$CLUSTER_DOMAIN|g" -e "s|@CLUSTER_DNS_IP@|$CLUSTER_DNS_IP|g" \
    -e "s|@COREDNS_IMAGE@|$(cat "$CACHE/images/coredns-$COREDNS_VERSION/ref")|g" \
    "$CLUSTER_DIR/manifests/coredns.yaml" | "${KUBECTL[@]}" apply -f - >/dev/null
wait_proc kubelet "CoreDNS deployment available" "${KUBECTL[@]}" -n kube-system wait --for=condition=Available deployment/coredns --timeout=5s
wait_proc kube-proxy "CoreDNS answers kubernetes.default via $CLUSTER_DNS_IP" \
  python3 "$CLUSTER_DIR/dnsprobe.py" "kubernetes.default.svc.$CLUSTER_DOMAIN" "$CLUSTER_DNS_IP"

date +%s > "$RUN_DIR/up.stamp"
log "cluster up in $((SECONDS - T0))s"
usage
