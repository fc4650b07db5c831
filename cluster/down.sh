#!/usr/bin/env bash
# Tear the test cluster down: stop every process it started, remove pod sandboxes, mounts, network
# namespaces, interfaces, iptables rules and cgroups it created, restore sysctls, delete $RUN_DIR.
# Safe to run when nothing is up. Verify with cluster/check-clean.sh.
. "$(dirname "$0")/lib.sh"
. "$CLUSTER_DIR/nodes.sh"
[[ -n "${RINGLEADER_LOCK_HELD:-}" ]] || take_lock
set +e; trap - ERR  # best effort: a failing step is expected, not an error
T0=$SECONDS
K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
CD="$RUN_DIR/containerd"

pid_of() { [[ -s "$RUN_DIR/pids/$1.pid" ]] && cat "$RUN_DIR/pids/$1.pid"; }
# stop_proc NAME [TIMEOUT]: SIGTERM, wait, then SIGKILL - only the pid this harness recorded.
stop_proc() {
  local name="$1" timeout="${2:-20}" pid
  pid="$(pid_of "$name")" || return 0
  if kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid" 2>/dev/null
    local start=$SECONDS
    while kill -0 "$pid" 2>/dev/null && (( SECONDS - start < timeout )); do sleep 0.2; done
    if kill -0 "$pid" 2>/dev/null; then log "$name (pid $pid) did not stop in ${timeout}s: SIGKILL"; kill -KILL "$pid"; sleep 0.5; fi
    log "stopped $name (pid $pid)"
  fi
  rm -f "$RUN_DIR/pids/$name.pid"
}

# Leftovers that are ours by construction, each killed by pid: containerd shims serving our containerd
# socket, and processes still inside the pod cgroups our kubelet created.
our_pids() {
  pgrep -f -- "-address $CD/containerd.sock" 2>/dev/null
  cat /sys/fs/cgroup/pids/kubepods/cgroup.procs /sys/fs/cgroup/pids/kubepods/*/cgroup.procs \
    /sys/fs/cgroup/pids/kubepods/*/*/cgroup.procs /sys/fs/cgroup/pids/kubepods/*/*/*/cgroup.procs 2>/dev/null
}

# 1. kubelet first, so nothing restarts containers; then remove all pod sandboxes through the CRI.
nodes_down   # the multi-node cluster's nodes, each the same way (nodes.sh)
stop_proc kubelet 20
if [[ -S "$CD/containerd.sock" ]] && [[ -n "$(pid_of containerd)" ]] && kill -0 "$(pid_of containerd)" 2>/dev/null; then
  CRICTL="$CACHE/crictl-$CRICTL_VERSION/bin/crictl"
  if [[ -x "$CRICTL" ]]; then
    timeout 60 "$CRICTL" --runtime-endpoint "unix://$CD/containerd.sock" --timeout 20s rmp -a -f >/dev/null 2>&1
  else
    ctrk=(ctr --address "$CD/containerd.sock" --namespace k8s.io --timeout 20s)
    for c in $(timeout 20 "${ctrk[@]}" tasks ls -q 2>/dev/null); do timeout 20 "${ctrk[@]}" tasks kill -s SIGKILL "$c" >/dev/null 2>&1; done
    sleep 1
    for c in $(timeout 20 "${ctrk[@]}" tasks ls -q 2>/dev/null); do timeout 20 "${ctrk[@]}" tasks delete -f "$c" >/dev/null 2>&1; done
  fi
  log "pod sandboxes removed"
fi
stop_proc kueue 10 &   # cluster/kueue-up.sh, when it ran
stop_proc containerd 20 &
stop_proc kube-proxy 10 &
stop_proc kube-scheduler 10 &
stop_proc kube-controller-manager 10 &
wait
stop_proc kube-apiserver 20
stop_proc etcd 20
for pid in $(our_pids); do log "killing leftover pid $pid: $(tr '\0' ' ' < /proc/$pid/cmdline 2>/dev/null | cut -c1-120)"; kill -KILL "$pid" 2>/dev/null; done

# 2. iptables: kube-proxy's chains (its own cleanup mode), CNI portmap chains, our guard chain.
if [[ -x "$K8S_BIN/kube-proxy" ]]; then timeout 60 "$K8S_BIN/kube-proxy" --cleanup --v=0 >/dev/null 2>&1; fi
for table in filter nat mangle; do
  # Jumps from built-in chains into chains of ours (KUBE-*, CNI-*, RL-*), then the chains themselves.
  iptables -w 5 -t "$table" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE-|CNI-|RL-)' |
    while read -r _ chain rest; do eval "iptables -w 5 -t $table -D $chain $rest" 2>/dev/null; done
  chains="$(iptables -w 5 -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-|RL-)/{print $2}')"
  for c in $chains; do iptables -w 5 -t "$table" -F "$c" 2>/dev/null; done
  for c in $chains; do iptables -w 5 -t "$table" -X "$c" 2>/dev/null; done
done
# kubelet/kube-proxy also write ip6tables canary chains
for table in filter nat mangle; do
  chains="$(ip6tables -w 5 -t "$table" -S 2>/dev/null | awk '/^-N (KUBE-|CNI-|RL-)/{print $2}')"
  ip6tables -w 5 -t "$table" -S 2>/dev/null | grep -E '^-A (INPUT|OUTPUT|FORWARD|PREROUTING|POSTROUTING) .*-j (KUBE-|CNI-|RL-)' |
    while read -r _ chain rest; do eval "ip6tables -w 5 -t $table -D $chain $rest" 2>/dev/null; done
  for c in $chains; do ip6tables -w 5 -t "$table" -F "$c" 2>/dev/null; done
  for c in $chains; do ip6tables -w 5 -t "$table" -X "$c" 2>/dev/null; done
done

# 3. mounts under the run dir (pod volumes, sandbox netns and shm, overlay rootfs), deepest first.
if [[ -d "$RUN_DIR" ]]; then
  for _ in 1 2 3; do
    mapfile -t mnts < <(awk -v p="$RUN_DIR/" 'index($2, p) == 1 {print $2}' /proc/self/mounts | sort -r)
    (( ${#mnts[@]} )) || break
    for m in "${mnts[@]}"; do umount "$m" 2>/dev/null || umount -l "$m" 2>/dev/null; done
  done
fi

# 4. network: pod veths went with their netns; the bridge (and its routes) is ours.
for ns in $(ip netns list 2>/dev/null | awk '/^cni-/{print $1}'); do ip netns delete "$ns" 2>/dev/null; done
for v in $(ip -o link show master "$NODE_BRIDGE" 2>/dev/null | awk -F': ' '{print $2}' | cut -d@ -f1); do ip link delete "$v" 2>/dev/null; done
# The bandwidth plugin's ifb devices (bwp<hash>) live in the host namespace: gone with CNI DEL, not with a netns.
for v in $(ip -o link show type ifb 2>/dev/null | awk -F': ' '$2 ~ /^bwp/ {print $2}' | cut -d@ -f1); do ip link delete "$v" 2>/dev/null; done
nodes_network_down
ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && ip link delete "$NODE_BRIDGE" && log "deleted bridge $NODE_BRIDGE"
conntrack -D -s "$POD_CIDR" >/dev/null 2>&1; conntrack -D -d "$POD_CIDR" >/dev/null 2>&1

# 5. cgroups kubelet created (cgroupfs driver, cgroup v1): kubepods hierarchy in every controller (the
# nodes' cgroup roots went with nodes_network_down).
for ctl in /sys/fs/cgroup/*/; do
  [[ -d "${ctl}kubepods" ]] || continue
  find "${ctl}kubepods" -depth -type d -exec rmdir {} + 2>/dev/null
done

# 6. sysctls back to what they were before cluster-up.
if [[ -s "$RUN_DIR/sysctl.saved" ]]; then
  while IFS= read -r kv; do sysctl -qw "$kv" 2>/dev/null; done < "$RUN_DIR/sysctl.saved"
  log "sysctls restored"
fi

rm -rf "$RUN_DIR"
[[ "$(cat "$OWNER_FILE" 2>/dev/null)" == "$RUN_DIR" ]] && rm -f "$OWNER_FILE"
log "cluster down ($((SECONDS - T0))s)"
