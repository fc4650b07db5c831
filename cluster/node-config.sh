# shellcheck shell=bash
# The configuration files of one node's containerd, CNI, kubelet and kube-proxy, written alike for the
# single node (up.sh) and for each node of the multi-node cluster (nodes.sh). Sourced after lib.sh.

# containerd_config FILE CD ROOT CNI_CONF_DIR: CD holds the node's state, sockets and runc root; ROOT its
# content store and snapshots.
containerd_config() {
  local file="$1" cd="$2" root="$3" cni_conf="$4" reg
  mkdir -p "$cd/certs.d" "$root"
  # Any registry pull is sent to a closed loopback port: images must be imported, never pulled.
  for reg in _default docker.io registry.k8s.io ghcr.io quay.io gcr.io; do
    mkdir -p "$cd/certs.d/$reg"
    printf 'server = "http://127.0.0.1:9"\n\n[host."http://127.0.0.1:9"]\n  capabilities = ["pull", "resolve"]\n' > "$cd/certs.d/$reg/hosts.toml"
  done
  cat > "$file" <<TOML
version = 2
root = "$root"
state = "$cd/state"
oom_score = 0
disabled_plugins = ["io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs",
  "io.containerd.snapshotter.v1.devmapper", "io.containerd.snapshotter.v1.aufs"]
[grpc]
  address = "$cd/containerd.sock"
[ttrpc]
  address = "$cd/containerd.sock.ttrpc"
[debug]
  level = "info"
[metrics]
  address = ""
[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "$(cat "$CACHE/images/pause-$PAUSE_VERSION/ref")"
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
        Root = "$cd/runc"
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = "/usr/lib/cni"
    conf_dir = "$cni_conf"
  [plugins."io.containerd.grpc.v1.cri".registry]
    config_path = "$cd/certs.d"
[plugins."io.containerd.internal.v1.opt"]
  path = "$cd/opt"
TOML
}

# cni_config FILE BRIDGE SUBNET GATEWAY IPAM_DIR
# bandwidth: pods annotated kubernetes.io/ingress-bandwidth / egress-bandwidth get a tbf qdisc on their host
# veth (what they receive) and on an ifb device their traffic is redirected through (what they send);
# containerd passes the annotations as the plugin's `bandwidth` capability. Egress needs the ifb module.
cni_config() {
  cat > "$1" <<JSON
{
  "cniVersion": "0.4.0",
  "name": "ringleader",
  "plugins": [
    {
      "type": "bridge", "bridge": "$2", "isGateway": true, "isDefaultGateway": true,
      "ipMasq": false, "hairpinMode": true, "promiscMode": false,
      "ipam": {
        "type": "host-local", "dataDir": "$5",
        "ranges": [[{"subnet": "$3", "gateway": "$4"}]]
      }
    },
    {"type": "portmap", "capabilities": {"portMappings": true}, "snat": false},
    {"type": "bandwidth", "capabilities": {"bandwidth": true}}
  ]
}
JSON
}

# kubelet_config FILE NODE_IP CONTAINERD_DIR CERT_NAME POD_LOGS_DIR [CGROUP_ROOT]
kubelet_config() {
  local file="$1" ip="$2" cd="$3" cert="$4" pod_logs="$5" cgroup_root="${6:-}"
  cat > "$file" <<YAML
apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: $ip
port: 10250
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: 10248
containerRuntimeEndpoint: unix://$cd/containerd.sock
authentication:
  anonymous: {enabled: false}
  webhook: {enabled: true}
  x509: {clientCAFile: $RUN_DIR/pki/ca.crt}
authorization: {mode: Webhook}
tlsCertFile: $RUN_DIR/pki/$cert.crt
tlsPrivateKeyFile: $RUN_DIR/pki/$cert.key
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
podLogsDir: $pod_logs
YAML
  if [[ -n "$cgroup_root" ]]; then echo "cgroupRoot: $cgroup_root" >> "$file"; fi
}

# kube_proxy_config FILE NODE_NAME NODE_IP CLUSTER_CIDR
kube_proxy_config() {
  cat > "$1" <<YAML
apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection: {kubeconfig: $RUN_DIR/kube-proxy.kubeconfig}
hostnameOverride: $2
bindAddress: $3
clusterCIDR: $4
healthzBindAddress: 127.0.0.1:10256
metricsBindAddress: 127.0.0.1:10249
nodePortAddresses: ["$3/32"]
conntrack: {maxPerCore: 0, min: 0, tcpEstablishedTimeout: 0s, tcpCloseWaitTimeout: 0s}
iptables: {localhostNodePorts: false, masqueradeAll: false}
YAML
}

# import_images CTR...: import the pause, CoreDNS and Debian base images and every image built with
# build-image.sh that the containerd behind CTR lacks (stamps: $CD_ROOT/../imported).
import_images() {
  local img dir ref s stamp
  for img in pause coredns debian-base; do
    dir="$("$CLUSTER_DIR/build-images.sh" --dir "$img")"
    ref="$(cat "$dir/ref")"
    if [[ -n "$("$@" images ls -q "name==$ref")" ]]; then continue; fi
    s=$SECONDS
    "$@" images import "$dir/image.tar" >/dev/null
    "$@" images label "$ref" io.cri-containerd.pinned=pinned >/dev/null 2>&1 || true
    log "imported $ref ($((SECONDS - s))s)"
  done
  # Images built with cluster/build-image.sh while the cluster was down (or rebuilt since) are imported now.
  mkdir -p "$CD_ROOT/../imported"
  for dir in "$CACHE"/built-images/*/; do
    [[ -s "$dir/image.tar" && -s "$dir/key" ]] || continue
    stamp="$CD_ROOT/../imported/$(basename "$dir").key"
    ref="$(cat "$dir/ref")"
    if [[ "$(cat "$stamp" 2>/dev/null)" == "$(cat "$dir/key")" && -n "$("$@" images ls -q "name==$ref")" ]]; then continue; fi
    s=$SECONDS
    "$@" images import "$dir/image.tar" >/dev/null && cp "$dir/key" "$stamp" && log "imported $ref ($((SECONDS - s))s)"
  done
}
