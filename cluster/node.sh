#!/usr/bin/env bash
# One node of the running multi-node cluster (RINGLEADER_CLUSTER_NODES > 1, nodes.sh):
#   cluster/node.sh list                  the nodes, each with its NIC's state and rate
#   cluster/node.sh stop NAME             a lost node: its NIC goes down, its kubelet, kube-proxy, containerd and
#                                         pods are killed (the API server sees it NotReady after the grace period)
#   cluster/node.sh start NAME            brings it back: NIC up, containerd, kubelet and kube-proxy started
#   cluster/node.sh rate RATE [NAME...]   caps the NIC of the named nodes (default: all) at RATE both ways
#                                         (tc units: 500mbit, 1gbit; "off" removes the cap)
. "$(dirname "$0")/lib.sh"
. "$CLUSTER_DIR/node-config.sh"
. "$CLUSTER_DIR/nodes.sh"
K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
usage() { sed -n '2,8p' "$0" | sed 's/^# \?//' >&2; exit 2; }
[[ -s "$RUN_DIR/nodes.list" ]] || die "no multi-node cluster is up (start one with RINGLEADER_CLUSTER_NODES=3 cluster/up.sh or make cluster-up NODES=3)"
index_of() { node_index "$1" || die "no node '$1' in this cluster (nodes: $(tr '\n' ' ' < "$RUN_DIR/nodes.list"))"; }
take_lock

case "${1:-}" in
  list)
    while read -r name; do
      i="$(node_index "$name")"
      state="$(cat "/sys/class/net/rlnic-$i/operstate" 2>/dev/null)"
      rate="$(tc qdisc show dev "rlnic-$i" root 2>/dev/null | awk '/tbf/ {for (f = 1; f < NF; f++) if ($f == "rate") print $(f + 1)}')"
      echo "$name ip $(node_ip "$i") pods $(node_pod_cidr "$i") nic ${state:-?} rate ${rate:-uncapped}"
    done < "$RUN_DIR/nodes.list" ;;
  stop) (( $# == 2 )) || usage; node_stop "$(index_of "$2")" ;;
  start)
    (( $# == 2 )) || usage
    i="$(index_of "$2")"
    proc_alive "$2.kubelet" && { log "$2 is running"; exit 0; }
    node_stop "$i" >/dev/null 2>&1   # whatever is left of it
    node_start "$i"
    wait_for "node $2 Ready" "${RINGLEADER_UP_TIMEOUT:-180}" bash -c "[[ \"\$('$K8S_BIN/kubectl' --kubeconfig '$RUN_DIR/kubeconfig' get node $2 -o 'jsonpath={.status.conditions[?(@.type==\"Ready\")].status}')\" == True ]]" ;;
  rate)
    (( $# >= 2 )) || usage
    rate="$2"; shift 2
    (( $# )) || mapfile -t names < "$RUN_DIR/nodes.list"
    (( $# )) && names=("$@")
    for name in "${names[@]}"; do set_nic_rate "$(index_of "$name")" "$rate"; log "$name: NIC rate ${rate}"; done ;;
  *) usage ;;
esac
