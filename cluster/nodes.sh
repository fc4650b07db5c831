# shellcheck shell=bash
# The multi-node cluster's worker nodes (RINGLEADER_CLUSTER_NODES=K > 1). Sourced after lib.sh.
#
# Node i (1..K) is named rl-node-i and lives in network namespace rl-node-i. Its NIC is eth0, one end of a
# veth pair whose host end rlnic-i is a port of the host bridge NODES_BRIDGE (the control plane listens on its
# address NODES_HOST_IP); RINGLEADER_NODE_NIC_RATE caps both ends (tbf), so the node's traffic is shaped both
# ways and traffic between its own pods (its own CNI bridge rlbr0 inside the namespace) is not. Each node runs
# its own containerd (state, sockets, runc root and a content store cloned from the cached one with hard links,
# all under $RUN_DIR/nodes/NAME), kubelet (cgroup root /NAME in every hierarchy) and kube-proxy (iptables of its
# namespace). Only the network namespace is entered (nsenter --net): mounts stay in the host's namespace, where
# down.sh finds them.

node_name() { echo "rl-node-$1"; }
node_ip() { echo "${NODES_HOST_IP%.*}.$((10 + $1))"; }
node_pod_cidr() { echo "${NODES_POD_NET%%.*}.$(cut -d. -f2 <<< "$NODES_POD_NET").$1.0/24"; }
node_index() { [[ "$1" =~ ^rl-node-([0-9]+)$ ]] && grep -qx "$1" "$RUN_DIR/nodes.list" 2>/dev/null && echo "${BASH_REMATCH[1]}"; }
node_dir() { echo "$RUN_DIR/nodes/$(node_name "$1")"; }
in_node() { local i="$1"; shift; nsenter --net="/run/netns/$(node_name "$i")" "$@"; }
running_node_count() {
  if [[ -s "$RUN_DIR/nodes.list" ]]; then wc -l < "$RUN_DIR/nodes.list"; elif [[ -d "$RUN_DIR/pids" ]]; then echo 1; else echo 0; fi
}
node_ctr() { echo ctr --address "$(node_dir "$1")/containerd/containerd.sock" --namespace k8s.io --timeout 900s; }

# The host's end: a bridge for the nodes' NICs, and the egress guard (nodes and pods reach each other and the
# host, nothing is forwarded anywhere else).
nodes_host_network() {
  if ! ip link show "$NODES_BRIDGE" >/dev/null 2>&1; then
    ip link add "$NODES_BRIDGE" type bridge
    ip addr add "$NODES_HOST_IP/${NODES_NET#*/}" dev "$NODES_BRIDGE"
  fi
  ip link set "$NODES_BRIDGE" up
  iptables -w 5 -N RL-FORWARD 2>/dev/null || iptables -w 5 -F RL-FORWARD
  iptables -w 5 -A RL-FORWARD -i "$NODES_BRIDGE" -o "$NODES_BRIDGE" -j ACCEPT
  iptables -w 5 -A RL-FORWARD -i "$NODES_BRIDGE" -j REJECT --reject-with icmp-net-prohibited
  iptables -w 5 -C FORWARD -j RL-FORWARD 2>/dev/null || iptables -w 5 -I FORWARD 1 -j RL-FORWARD
}

# tbf_burst RATE: 10 ms of RATE (tc units: bit, kbit, mbit, gbit), at least 64 KiB (one GSO segment).
tbf_burst() {
  awk -v r="$1" 'BEGIN { n = r + 0; u = tolower(r); sub(/^[0-9.]+/, "", u)
    m = (u == "kbit") ? 1e3 : (u == "mbit") ? 1e6 : (u == "gbit") ? 1e9 : (u == "bit" || u == "") ? 1 : -1
    if (m < 0 || n <= 0) exit 1
    b = int(n * m / 8 / 100); if (b < 65536) b = 65536; print b }'
}
# set_nic_rate I RATE: cap node I's NIC at RATE both ways (a tbf on each end of its veth); "" or off: no cap.
set_nic_rate() {
  local i="$1" rate="$2" burst
  if [[ -z "$rate" || "$rate" == off ]]; then
    tc qdisc del dev "rlnic-$i" root 2>/dev/null || true   # (no cap to remove: fine)
    in_node "$i" tc qdisc del dev eth0 root 2>/dev/null || true
    return 0
  fi
  burst="$(tbf_burst "$rate")" || die "NIC rate '$rate': give a tc rate such as 500mbit or 1gbit"
  tc qdisc replace dev "rlnic-$i" root tbf rate "$rate" burst "$burst" latency 50ms
  in_node "$i" tc qdisc replace dev eth0 root tbf rate "$rate" burst "$burst" latency 50ms
}

# node_network I K: node I's namespace, NIC, addresses and routes (to the host and to every other node's pods).
node_network() {
  local i="$1" k="$2" name
  name="$(node_name "$i")"
  ip netns add "$name"
  ip link add "rlnic-$i" type veth peer name eth0 netns "$name"
  ip link set "rlnic-$i" master "$NODES_BRIDGE" up
  in_node "$i" ip link set lo up
  in_node "$i" ip addr add "$(node_ip "$i")/${NODES_NET#*/}" dev eth0
  in_node "$i" ip link set eth0 up
  node_routes "$i" "$k"
  ip route replace "$(node_pod_cidr "$i")" via "$(node_ip "$i")"
  in_node "$i" sysctl -qw net.ipv4.ip_forward=1 net.bridge.bridge-nf-call-iptables=1
  set_nic_rate "$i" "${RINGLEADER_NODE_NIC_RATE:-}"
}

# node_routes I K: node I's default route (the host) and its routes to every other node's pods; the kernel
# drops them whenever eth0 goes down (node.sh stop), so node_start sets them again.
node_routes() {
  local i="$1" k="$2" j
  in_node "$i" ip route replace default via "$NODES_HOST_IP"
  for (( j = 1; j <= k; j++ )); do
    (( j == i )) || in_node "$i" ip route replace "$(node_pod_cidr "$j")" via "$(node_ip "$j")"
  done
}

# node_cgroups NAME: the kubelet's cgroup root /NAME in every cgroup v1 hierarchy (cpuset needs its cpus and
# mems filled before a task may join).
node_cgroups() {
  local ctl
  for ctl in /sys/fs/cgroup/*/; do
    [[ "$ctl" == */unified/ ]] && continue
    mkdir -p "$ctl$1" 2>/dev/null || continue
    if [[ -e "${ctl}cpuset.cpus" ]]; then
      cat "${ctl}cpuset.cpus" > "$ctl$1/cpuset.cpus"; cat "${ctl}cpuset.mems" > "$ctl$1/cpuset.mems"
    fi
  done
}

# node_configure I: node I's directories, certificates, containerd root (a hard-link clone of the seeded
# content store: the 8 GB project image is stored once) and configuration files.
node_configure() {
  local i="$1" name dir f
  name="$(node_name "$i")"; dir="$(node_dir "$i")"
  mkdir -p "$dir"/{containerd,kubelet,pod-logs,cni/net.d,cni/ipam}
  "$CLUSTER_DIR/pki.sh" node "$name" "$(node_ip "$i")"
  cp -al "$CD_ROOT" "$dir/containerd/root"
  # Files containerd rewrites in place (its bolt databases) are copied, not shared.
  while IFS= read -r -d '' f; do cp --remove-destination "$CD_ROOT/${f#"$dir/containerd/root/"}" "$f"; done \
    < <(find "$dir/containerd/root" -maxdepth 2 -type f -print0)
  containerd_config "$dir/containerd/config.toml" "$dir/containerd" "$dir/containerd/root" "$dir/cni/net.d"
  cni_config "$dir/cni/net.d/10-ringleader.conflist" "$NODE_BRIDGE" "$(node_pod_cidr "$i")" \
    "${NODES_POD_NET%%.*}.$(cut -d. -f2 <<< "$NODES_POD_NET").$i.1" "$dir/cni/ipam"
  kubelet_config "$dir/kubelet-config.yaml" "$(node_ip "$i")" "$dir/containerd" "kubelet-$name" "$dir/pod-logs" "/$name"
  # Every kubelet sees the whole machine: each keeps all but its 1/K share for the "system", so the nodes'
  # allocatable CPU and memory add up to the machine's, and the scheduler does not place K times what fits.
  local k cpu_m mem_mi
  k="$(wc -l < "$RUN_DIR/nodes.list")"
  cpu_m=$(( $(nproc) * 1000 * (k - 1) / k ))
  mem_mi=$(( $(awk '/^MemTotal:/ {print $2}' /proc/meminfo) / 1024 * (k - 1) / k ))
  echo "systemReserved: {cpu: ${cpu_m}m, memory: ${mem_mi}Mi}" >> "$dir/kubelet-config.yaml"
  kube_proxy_config "$dir/kube-proxy.yaml" "$name" "$(node_ip "$i")" "$NODES_POD_NET"
  node_cgroups "$name"
}

# node_start I: node I's NIC up, then its containerd, kubelet and kube-proxy (inside its network namespace).
node_start() {
  local i="$1" name dir
  name="$(node_name "$i")"; dir="$(node_dir "$i")"
  ip link set "rlnic-$i" up; in_node "$i" ip link set eth0 up
  node_routes "$i" "$(wc -l < "$RUN_DIR/nodes.list")"
  start_proc "$name.containerd" nsenter --net="/run/netns/$name" containerd --config "$dir/containerd/config.toml"
  # shellcheck disable=SC2046
  wait_proc "$name.containerd" "$name containerd socket" $(node_ctr "$i") version
  start_proc "$name.kubelet" nsenter --net="/run/netns/$name" "$K8S_BIN/kubelet" --config "$dir/kubelet-config.yaml" \
    --kubeconfig "$dir/kubelet.kubeconfig" --root-dir "$dir/kubelet" \
    --hostname-override "$name" --node-ip "$(node_ip "$i")" --v=1
  start_proc "$name.kube-proxy" nsenter --net="/run/netns/$name" "$K8S_BIN/kube-proxy" --config "$dir/kube-proxy.yaml" --v=1
}

# node_stop I: a lost node: its NIC goes down first (nothing more leaves or arrives), then every process of its
# pods, its containerd's shims, its kubelet, kube-proxy and containerd are killed, as a power cut would.
node_stop() {
  local i="$1" name dir p pid
  name="$(node_name "$i")"; dir="$(node_dir "$i")"
  ip link set "rlnic-$i" down; in_node "$i" ip link set eth0 down
  for p in kubelet kube-proxy containerd; do
    pid="$(cat "$RUN_DIR/pids/$name.$p.pid" 2>/dev/null)" && kill -KILL "$pid" 2>/dev/null
    rm -f "$RUN_DIR/pids/$name.$p.pid"
  done
  for pid in $(node_pids "$i"); do kill -KILL "$pid" 2>/dev/null; done
  log "$name stopped (NIC down, kubelet, kube-proxy, containerd and its pods killed)"
}
# node_pids I: containerd shims serving node I's socket and the processes in its pods' cgroups.
node_pids() {
  local name; name="$(node_name "$1")"
  pgrep -f -- "-address $(node_dir "$1")/containerd/containerd.sock" 2>/dev/null
  find "/sys/fs/cgroup/pids/$name" -name cgroup.procs -exec cat {} + 2>/dev/null
}

nodes_healthy() {
  local i name p
  for (( i = 1; i <= CLUSTER_NODES; i++ )); do
    name="$(node_name "$i")"
    for p in containerd kubelet kube-proxy; do proc_alive "$name.$p" || return 1; done
    [[ "$("${KUBECTL[@]}" get node "$name" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" == True ]] || return 1
  done
}

# seed_store: import into the cached content store $CD_ROOT every image it lacks (one containerd on the host,
# stopped again); the nodes clone that store. A no-op when seed-store.sh has already done it.
seed_store() {
  local seed="$RUN_DIR/seed"
  mkdir -p "$seed"
  containerd_config "$seed/config.toml" "$seed" "$CD_ROOT" "$seed/cni"
  start_proc seed.containerd containerd --config "$seed/config.toml"
  wait_proc seed.containerd "seed containerd socket" ctr --address "$seed/containerd.sock" version
  import_images ctr --address "$seed/containerd.sock" --namespace k8s.io --timeout 900s
  kill -TERM "$(cat "$RUN_DIR/pids/seed.containerd.pid")"
  wait_for "seed containerd stopped" 30 bash -c "! kill -0 $(cat "$RUN_DIR/pids/seed.containerd.pid")"
  rm -f "$RUN_DIR/pids/seed.containerd.pid"
}

# nodes_up K: seed the cached content store with the images, then build and start K nodes and wait until each
# is Ready.
nodes_up() {
  local k="$1" i name
  modprobe ifb 2>/dev/null || true
  seed_store
  : > "$RUN_DIR/nodes.list"
  for (( i = 1; i <= k; i++ )); do node_name "$i" >> "$RUN_DIR/nodes.list"; done
  for (( i = 1; i <= k; i++ )); do node_network "$i" "$k"; done
  # Service IPs reached from the host go through node 1's kube-proxy rules (masqueraded: the host is outside
  # the pods' network, so the answer comes back the same way).
  ip route replace "$SERVICE_CIDR" via "$(node_ip 1)"
  for (( i = 1; i <= k; i++ )); do node_configure "$i"; node_start "$i"; done
  for (( i = 1; i <= k; i++ )); do
    name="$(node_name "$i")"
    wait_proc "$name.kubelet" "node $name Ready" bash -c "[[ \"\$(${KUBECTL[*]} get node $name -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].status}' 2>/dev/null)\" == True ]]"
  done
  log "$k nodes Ready (NIC rate: ${RINGLEADER_NODE_NIC_RATE:-uncapped})"
}

# nodes_down: for down.sh: every node of $RUN_DIR/nodes.list stopped, its sandboxes removed, its namespace,
# NIC, routes and cgroups deleted; then the nodes' bridge.
nodes_down() {
  local name i pid crictl="$CACHE/crictl-$CRICTL_VERSION/bin/crictl"
  [[ -s "$RUN_DIR/nodes.list" ]] || return 0
  while read -r name; do
    i="${name##*-}"
    stop_proc "$name.kubelet" 20
    if proc_alive "$name.containerd" && [[ -x "$crictl" ]]; then
      timeout 60 "$crictl" --runtime-endpoint "unix://$(node_dir "$i")/containerd/containerd.sock" --timeout 20s rmp -a -f >/dev/null 2>&1
    fi
    stop_proc "$name.kube-proxy" 10
    stop_proc "$name.containerd" 20
    for pid in $(node_pids "$i"); do kill -KILL "$pid" 2>/dev/null; done
  done < "$RUN_DIR/nodes.list"
  stop_proc seed.containerd 10
}
nodes_network_down() {
  local name i ctl
  [[ -s "$RUN_DIR/nodes.list" ]] || return 0
  while read -r name; do
    i="${name##*-}"
    ip route del "$(node_pod_cidr "$i")" 2>/dev/null
    ip link delete "rlnic-$i" 2>/dev/null
    ip netns delete "$name" 2>/dev/null
    for ctl in /sys/fs/cgroup/*/; do
      [[ -d "$ctl$name" ]] && find "$ctl$name" -depth -type d -exec rmdir {} + 2>/dev/null
    done
  done < "$RUN_DIR/nodes.list"
  ip route del "$SERVICE_CIDR" 2>/dev/null
  ip link show "$NODES_BRIDGE" >/dev/null 2>&1 && ip link delete "$NODES_BRIDGE" && log "deleted bridge $NODES_BRIDGE"
  conntrack -D -s "$NODES_POD_NET" >/dev/null 2>&1; conntrack -D -d "$NODES_POD_NET" >/dev/null 2>&1
}
