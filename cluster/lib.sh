# shellcheck shell=bash
# Common settings for the ringleader cluster harness. Sourced, not executed.
set -Eeuo pipefail
# A script that fails names the command and line that failed (set -e alone exits without a word); cluster/harness.py
# ends its error on the script's last lines, where this one is.
trap 'log "ERROR: exit $? at ${BASH_SOURCE[0]##*/}:$LINENO: $BASH_COMMAND"' ERR

CLUSTER_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
# shellcheck source=versions.env
. "$CLUSTER_DIR/versions.env"

RINGLEADER_CACHE="${RINGLEADER_CACHE:-$HOME/.cache/ringleader}"
CACHE="$RINGLEADER_CACHE/cluster"
RUN_DIR="${RINGLEADER_CLUSTER_RUN:-$CACHE/run}"
# Go build/module caches live under the cluster cache too, so one `rm -rf` resets everything.
export GOCACHE="$CACHE/go-build"
export GOMODCACHE="$CACHE/go-mod"
export GOFLAGS="-mod=readonly -buildvcs=false"
# k8s.io/kubernetes >= v1.34.11 is on the proxy but not (yet) in sum.golang.org, nor is the pinned cri-tools:
# go.sum pins their hashes.
export GONOSUMDB="k8s.io/kubernetes,sigs.k8s.io/cri-tools"
export GOTOOLCHAIN=local
export CGO_ENABLED=0
NICE=(nice -n "${RINGLEADER_NICE:-10}")
# Worker nodes: RINGLEADER_CLUSTER_NODES at cluster-up (unset or 1: the single-node cluster, the host is its
# node; K > 1: K nodes, each in its own network namespace, see nodes.sh); later commands read the running
# cluster's count from $RUN_DIR/nodes.list.
if [[ -n "${RINGLEADER_CLUSTER_NODES:-}" ]]; then CLUSTER_NODES="$RINGLEADER_CLUSTER_NODES"
elif [[ -s "$RUN_DIR/nodes.list" ]]; then CLUSTER_NODES="$(wc -l < "$RUN_DIR/nodes.list")"
else CLUSTER_NODES=1; fi
[[ "$CLUSTER_NODES" =~ ^[1-9][0-9]?$ ]] || { echo "RINGLEADER_CLUSTER_NODES=$CLUSTER_NODES: give a node count from 1 to 99" >&2; exit 2; }
# The API server's address: the single node's bridge address, or the host's end of the nodes' network.
APISERVER_IP="$NODE_IP"; (( CLUSTER_NODES > 1 )) && APISERVER_IP="$NODES_HOST_IP"

# build_key MODULE_DIR LDFLAGS: what a binary built from a wrapper module is reused by: the module graph (go.mod,
# go.sum) and the version stamps it was linked with. current DIR KEY BIN...: every BIN in DIR, built with KEY.
build_key() { cat "$1/go.mod" "$1/go.sum" <(printf '%s' "$2") | sha256sum | cut -c1-16; }
current() {
  local dir="$1" key="$2" b; shift 2
  [[ "$(cat "$dir/.build" 2>/dev/null)" == "$key" ]] || return 1
  for b in "$@"; do [[ -x "$dir/$b" ]] || return 1; done
}

log() { printf '[cluster %s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() { log "ERROR: $*"; exit 1; }

# wait_for DESCRIPTION TIMEOUT_S CMD...: poll CMD every second until it succeeds or time runs out (then CMD's last
# output is shown).
wait_for() {
  local what="$1" timeout="$2"; shift 2
  local start=$SECONDS n=0 out
  until out="$("$@" 2>&1)"; do
    if (( SECONDS - start >= timeout )); then
      log "timeout after ${timeout}s waiting for $what; the last try said:"; tail -5 <<<"$out" >&2; return 1
    fi
    n=$((n + 1)); (( n % 10 == 0 )) && log "still waiting for $what ($((SECONDS - start))s)"
    sleep 1
  done
  log "ok: $what ($((SECONDS - start))s)"
}

# One cluster per machine: the bridge, the node IP and the ports are machine-wide. up.sh/down.sh hold this
# lock while they run, and OWNER_FILE names the run dir of the cluster that owns the machine's resources.
LOCK_FILE=/run/ringleader-cluster.lock
OWNER_FILE=/run/ringleader-cluster.owner
take_lock() {
  exec 9>"$LOCK_FILE"
  flock -w "${RINGLEADER_LOCK_TIMEOUT:-900}" 9 || die "another cluster-up/down holds $LOCK_FILE"
}

# Processes of the cluster: one pid file each under $RUN_DIR/pids (down.sh stops them by pid), one log under logs/.
proc_alive() { [[ -s "$RUN_DIR/pids/$1.pid" ]] && kill -0 "$(cat "$RUN_DIR/pids/$1.pid")" 2>/dev/null; }

# start_proc NAME CMD...: run CMD in its own session in the background, log to logs/NAME.log.
start_proc() {
  local name="$1"; shift
  if proc_alive "$name"; then log "$name already running (pid $(cat "$RUN_DIR/pids/$name.pid"))"; return 0; fi
  setsid "$@" >> "$RUN_DIR/logs/$name.log" 2>&1 < /dev/null 9>&- &
  echo $! > "$RUN_DIR/pids/$name.pid"
  log "started $name (pid $!, log $RUN_DIR/logs/$name.log)"
}

# check_alive NAME: fail with the log tail if NAME died (called while waiting).
check_alive() { proc_alive "$1" || { tail -25 "$RUN_DIR/logs/$1.log" >&2; die "$1 exited (log: $RUN_DIR/logs/$1.log)"; }; }
wait_proc() { # NAME DESCRIPTION CMD... - wait for CMD, bailing out early if NAME dies
  local name="$1" what="$2"; shift 2
  local start=$SECONDS n=0 out
  until out="$("$@" 2>&1)"; do
    check_alive "$name"
    if (( SECONDS - start >= ${UP_TIMEOUT:-180} )); then
      tail -25 "$RUN_DIR/logs/$name.log" >&2; log "the last try said:"; tail -5 <<<"$out" >&2
      die "timeout (${UP_TIMEOUT:-180}s) waiting for $what"
    fi
    n=$((n + 1)); (( n % 10 == 0 )) && log "still waiting for $what ($((SECONDS - start))s)"
    sleep 1
  done
  log "ok: $what ($((SECONDS - start))s)"
}
