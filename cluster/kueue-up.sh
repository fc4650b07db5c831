#!/usr/bin/env bash
# Run the pinned Kueue controller manager (built by build-kubernetes.sh) against the running test cluster
# (idempotent): its CRDs applied, the manager a process of this machine like the control plane's, stopped by down.sh.
#
# Kueue runs as its release does (internal certificate management, its scheduler and Workload controllers),
# but nothing registers its admission webhooks with the API server: ringleader creates Workloads itself, the
# documented integration for a custom workload API, which needs no webhook (docs/operator.md). Its webhook
# server still starts (controller-runtime always serves it), on 127.0.0.1, with the certificate Kueue issues
# into its Secret, copied into its certDir as a Secret volume would be. Metrics, the visibility API server
# and leader election are off. Log: $RUN_DIR/logs/kueue.log.
. "$(dirname "$0")/lib.sh"
UP_TIMEOUT="${RINGLEADER_UP_TIMEOUT:-180}"   # per wait step, seconds
NAMESPACE=kueue-system
K8S_BIN="$CACHE/kubernetes-$K8S_VERSION/bin"
KUEUE="$CACHE/kueue-$KUEUE_VERSION"
KUBECTL=("$K8S_BIN/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" --request-timeout=20s)

[[ -s "$RUN_DIR/kubeconfig" && -d "$RUN_DIR/pids" ]] || die "the cluster is not up: run cluster/up.sh first"
"$CLUSTER_DIR/build-kubernetes.sh"   # Kueue is built with Kubernetes
take_lock
if proc_alive kueue; then log "kueue already running (pid $(cat "$RUN_DIR/pids/kueue.pid"))"; exit 0; fi
T0=$SECONDS

# Server-side: Kueue's CRDs are too big for the last-applied annotation of a client-side apply. The Workload's
# schema (0.7 MB) is the slowest write of the bring-up: two minutes per try, tried again while the server is busy.
wait_for "Kueue's CRDs applied" "$UP_TIMEOUT" "$K8S_BIN/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" \
  --request-timeout=120s apply --server-side --force-conflicts -f "$KUEUE/crds"
# All of them served (a CRD is in discovery once Established) before Kueue starts: it watches all eleven (cohorts,
# topologies and admission checks too), and a kind its REST mapper cannot find yet stalls its caches.
crds=("$KUEUE"/crds/kueue.x-k8s.io_*.yaml)
wait_for "the ${#crds[@]} Kueue resources Established and in discovery" "$UP_TIMEOUT" bash -c \
  "(( \$(${KUBECTL[*]} api-resources --api-group=kueue.x-k8s.io -o name | wc -l) >= ${#crds[@]} ))"
"${KUBECTL[@]}" create namespace "$NAMESPACE" --dry-run=client -o yaml | "${KUBECTL[@]}" apply -f - >/dev/null
# Kueue's certificate rotator fills this Secret (its install manifests create it empty).
"${KUBECTL[@]}" -n "$NAMESPACE" create secret generic kueue-webhook-server-cert --dry-run=client -o yaml |
  "${KUBECTL[@]}" apply -f - >/dev/null

work="$RUN_DIR/kueue"
rm -rf "$work"; mkdir -p "$work/certs"
# Two free ports below the kernel's ephemeral range (and the NodePorts, 30000-32767): no outgoing connection of the
# tests beside is given one of them between this pick and Kueue's bind, as it could be a port the kernel picked.
read -r health_port webhook_port < <(python3 -c 'import random, socket
low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
ports = list(range(20000, min(low, 30000)))
random.shuffle(ports)
held = []
for port in ports[:200] + [0, 0]:  # the kernel picks where the range leaves no room
    try:
        held.append(socket.create_server(("127.0.0.1", port)))
    except OSError:
        continue
    if len(held) == 2:
        break
print(*(s.getsockname()[1] for s in held))')
sed -e "s|@HEALTH_PORT@|$health_port|" -e "s|@WEBHOOK_PORT@|$webhook_port|" -e "s|@CERT_DIR@|$work/certs|" \
  "$CLUSTER_DIR/manifests/kueue-config.yaml" > "$work/config.yaml"
start_proc kueue env KUBECONFIG="$RUN_DIR/kubeconfig" "$KUEUE/bin/kueue" --config="$work/config.yaml" --zap-log-level=2

# Play the kubelet's part: the certificate Kueue writes into its Secret, projected into its certDir (it waits
# for the files before it starts its controllers).
cert() { "${KUBECTL[@]}" -n "$NAMESPACE" get secret kueue-webhook-server-cert -o "jsonpath={.data.$1}"; }
wait_proc kueue "Kueue to issue its webhook certificate" bash -c "[[ -n \"\$(${KUBECTL[*]} -n $NAMESPACE get secret \
  kueue-webhook-server-cert -o 'jsonpath={.data.tls\\.key}')\" ]]"
for key in tls.crt tls.key ca.crt; do
  data="$(cert "${key//./\\.}")"
  [[ -n "$data" ]] || continue
  (umask 077; base64 -d <<<"$data" > "$work/certs/$key")
done
wait_proc kueue "Kueue ready (127.0.0.1:$health_port/readyz)" python3 -c "import urllib.request
urllib.request.build_opener(urllib.request.ProxyHandler({})).open('http://127.0.0.1:$health_port/readyz', timeout=2)"
log "kueue $KUEUE_VERSION running ($((SECONDS - T0))s; log $RUN_DIR/logs/kueue.log)"
