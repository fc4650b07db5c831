#!/usr/bin/env bash
# Runs one end-to-end test N times in a row on the running harness cluster while busy loops keep every
# core busy, and says how many passed; exit status 0 only if all did. Outside CI (make e2e-repeat):
#
#   make e2e E2E_KEEP_CLUSTER=1                 # once: cluster, image, the whole suite
#   make e2e-repeat                             # 20 x the kill test under load (E2E_REPEAT, E2E_REPEAT_TEST)
#   make cluster-down
#
# Every loop is bounded: each run by pytest's timeouts, the busy loops by `timeout`, the whole by N.
set -uo pipefail
runs=${1:-20}
test_name=${2:-test_a_killed_worker_with_backoff_limit_0_fails_the_experiment_naming_the_pod}
logs=${E2E_REPEAT_LOGS:-$(mktemp -d -t ringleader-e2e-repeat.XXXXXX)}
mkdir -p "$logs"
burners=()
for _ in $(seq "$(nproc)"); do
  timeout 14400 python3 -c 'while True: pass' &
  burners+=($!)
done
trap 'kill "${burners[@]}" 2>/dev/null' EXIT
passed=0
for i in $(seq "$runs"); do
  start=$(date +%s)
  if RINGLEADER_E2E_SKIP_BUILD=1 make -s e2e-test E2E_PYTEST_ARGS="-k $test_name -x -q" >"$logs/run-$i.log" 2>&1; then
    passed=$((passed + 1)); outcome=passed
  else
    outcome="FAILED (log: $logs/run-$i.log)"
  fi
  echo "run $i/$runs: $outcome in $(($(date +%s) - start)) s, load $(cut -d' ' -f1 /proc/loadavg)"
done
echo "$passed/$runs passed; logs in $logs"
[ "$passed" -eq "$runs" ]
