#!/usr/bin/env bash
# Show the state of the test cluster; `status.sh --kubeconfig` prints only the admin kubeconfig path.
. "$(dirname "$0")/lib.sh"
if [[ "${1:-}" == --kubeconfig ]]; then echo "$RUN_DIR/kubeconfig"; exit 0; fi
[[ -s "$RUN_DIR/kubeconfig" ]] || { echo "cluster is down (no $RUN_DIR/kubeconfig)"; exit 1; }
for f in "$RUN_DIR"/pids/*.pid; do
  [[ -e "$f" ]] || continue
  n="$(basename "$f" .pid)"; p="$(cat "$f")"
  if kill -0 "$p" 2>/dev/null; then echo "$n: running (pid $p)"; else echo "$n: DEAD (pid $p)"; fi
done
echo "KUBECONFIG=$RUN_DIR/kubeconfig"
K=("$CACHE/kubernetes-$K8S_VERSION/bin/kubectl" --kubeconfig "$RUN_DIR/kubeconfig" --request-timeout=10s)
"${K[@]}" get nodes -o wide && "${K[@]}" get pods -A -o wide
