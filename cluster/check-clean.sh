#!/usr/bin/env bash
# Verify that no trace of the test cluster is left on this machine: processes, mounts, network
# interfaces, netns, routes, iptables rules/chains, cgroups, listening ports, changed sysctls, run dir.
# Exit 0 and print "clean" when nothing is left; otherwise list every leftover and exit 1.
. "$(dirname "$0")/lib.sh"
set +e; trap - ERR  # best effort: a failing step is expected, not an error
problems=0
bad() { log "LEFTOVER: $*"; problems=$((problems + 1)); }

# processes: everything the cluster starts names its run dir on the command line (configs, data dirs,
# sockets); shims name our containerd socket. (Other users of the cached binaries, e.g. an envtest-style
# API server started by a test with its own data dir, are not this cluster's and are not reported.)
for pat in "$RUN_DIR/" "-address $RUN_DIR/containerd/containerd.sock"; do
  for pid in $(pgrep -f -- "$pat"); do
    [[ "$pid" == "$$" ]] && continue
    bad "process $pid: $(tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | cut -c1-150)"
  done
done
# mounts
while read -r _ mnt fstype _; do
  case "$mnt" in "$RUN_DIR"/*|"$RUN_DIR"|/run/netns/cni-*|/var/run/netns/cni-*) bad "mount $mnt ($fstype)";; esac
done < /proc/self/mounts
# network
ip link show "$NODE_BRIDGE" >/dev/null 2>&1 && bad "interface $NODE_BRIDGE"
for ns in $(ip netns list 2>/dev/null | awk '/^(cni-|rl-node-)/{print $1}'); do bad "netns $ns"; done
ip link show "$NODES_BRIDGE" >/dev/null 2>&1 && bad "interface $NODES_BRIDGE"
for v in $(ip -o link show 2>/dev/null | awk -F': ' '$2 ~ /^rlnic-/ {print $2}' | cut -d@ -f1); do bad "interface $v"; done
for v in $(ip -o link show type ifb 2>/dev/null | awk -F': ' '$2 ~ /^bwp/ {print $2}' | cut -d@ -f1); do bad "ifb interface $v"; done
while read -r r; do bad "route $r"; done < <(ip route show | grep -E "^(${SERVICE_CIDR%/*}|${POD_CIDR%/*}|${NODES_NET%.*}\.|${NODES_POD_NET%%.*}\.$(cut -d. -f2 <<< "$NODES_POD_NET")\.)")
# iptables
for cmd in iptables ip6tables; do
  for table in filter nat mangle; do
    out="$($cmd -w 5 -t "$table" -S 2>/dev/null | grep -E -- '(KUBE-|CNI-|RL-)|'"${POD_CIDR%.*}"'\.|'"${SERVICE_CIDR%.*}"'\.|'"${NODES_NET%.*}"'\.')"
    [[ -n "$out" ]] && bad "$cmd -t $table: $(echo "$out" | head -5 | tr '\n' ';')"
  done
done
# cgroups
for d in /sys/fs/cgroup/*/kubepods /sys/fs/cgroup/*/rl-node-*; do [[ -d "$d" ]] && bad "cgroup $d"; done
# listening ports the cluster uses
for port in "$APISERVER_PORT" "$ETCD_PORT" "$ETCD_PEER_PORT" 10248 10249 10250 10256 10257 10259; do
  ss -Hltn "sport = :$port" 2>/dev/null | grep -q . && bad "listening on port $port: $(ss -Hltnp "sport = :$port" | head -1)"
done
# sysctls back to their pre-up values
if [[ -s "$CACHE/sysctl.before-up" ]]; then
  while IFS='=' read -r k v; do
    cur="$(sysctl -n "$k" 2>/dev/null)"
    [[ "$cur" == "$v" ]] || bad "sysctl $k=$cur (was $v before cluster-up)"
  done < "$CACHE/sysctl.before-up"
fi
[[ -e "$RUN_DIR" ]] && bad "run dir $RUN_DIR still exists"

if (( problems )); then log "check-clean: $problems leftover(s)"; exit 1; fi
log "check-clean: clean (no process, mount, interface, netns, route, iptables rule, cgroup, port or sysctl left)"
echo clean
