#!/usr/bin/env bash
# `make test` (what .ci/run calls): every tier, each timed, the total against CI's 90-minute limit.
#
# The slow builds are mostly waiting (module downloads, Debian packages, a 7.7 GB image written and copied) or
# run beside tests that wait on processes: they start in the background at once, in the order the tiers need
# them, and each foreground tier waits only for the parts it uses:
#
#   background  Go modules -> tools (etcd, helm, crictl, CoreDNS) -> Kubernetes -> Kueue
#               beside: base images (pause, Debian) -> the project image; then both: the nodes' image store
#   foreground  environment, host packages, lint -> integration -> unit (helm) -> operator (Kubernetes,
#               etcd, Kueue) -> e2e on one three-node cluster (the image)
#
# Each pytest tier runs on both cores (pytest-xdist). The table at the end lists each tier's time; above
# WARN_MINUTES it says so, so that the suite cannot outgrow the limit silently.
set -uo pipefail
cd "$(dirname "$0")/.."
LIMIT_MINUTES=90   # CI's wall for .ci/run
WARN_MINUTES=60    # a third of the limit left for what the next change adds
MAKE="${MAKE:-make}"
PY=.venv/bin/python
export RINGLEADER_HEAVY_TESTS=1
STATE="$(mktemp -d "${TMPDIR:-/tmp}/ringleader-test.XXXXXX")"
BACKGROUND_LOG="$STATE/background.log"
START=$SECONDS
TIERS=()
FAILED=()

stamp() { printf '%d:%02d' $(( ($1) / 60 )) $(( ($1) % 60 )); }
say() { printf '>> test [%s] %s\n' "$(stamp $((SECONDS - START)))" "$*"; }

# tier NAME CMD...: run CMD in the foreground, timed; a failed tier is listed, the next ones still run.
tier() {
  local name="$1" t=$SECONDS rc; shift
  say "$name"
  "$@"; rc=$?
  TIERS+=("$name|$((SECONDS - t))|$rc")
  (( rc == 0 )) || FAILED+=("$name")
  say "$name: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $(stamp $((SECONDS - t)))"
  return $rc
}

# The background builds: each step leaves STEP.rc (its exit status) and STEP.s (its seconds) in $STATE.
step() {
  local name="$1" t=$SECONDS rc; shift
  "$@" >> "$BACKGROUND_LOG" 2>&1; rc=$?
  echo $((SECONDS - t)) > "$STATE/$name.s"; echo $rc > "$STATE/$name.rc"
  return $rc
}
# Two chains side by side: the Go builds wait on the CPU, the images on the network and the disk.
STEPS=(modules tools kubernetes kueue images image seed)
background() {
  { step modules cluster/download-modules.sh &&
    step tools cluster/build-tools.sh helm etcd crictl coredns &&
    step kubernetes cluster/build-kubernetes.sh &&
    step kueue cluster/build-kueue.sh; } &
  { step images cluster/build-images.sh pause debian-base &&
    step image "$MAKE" --no-print-directory e2e-image; } &
  wait
  # The nodes' content store, seeded with the image now rather than at the e2e tier's cluster-up.
  [[ "$(cat "$STATE/image.rc" "$STATE/tools.rc" 2>/dev/null)" == $'0\n0' ]] && step seed cluster/seed-store.sh
  # What never ran after a failed step is marked failed too, so nothing waits for it.
  local s; for s in "${STEPS[@]}"; do [[ -e "$STATE/$s.rc" ]] || echo 1 > "$STATE/$s.rc"; done
}
# await STEP...: until each background step has ended; fails (with the log's tail) if one failed.
await() {
  local s t=$SECONDS
  for s in "$@"; do
    until [[ -e "$STATE/$s.rc" ]]; do sleep 2; done
    if [[ "$(cat "$STATE/$s.rc")" != 0 ]]; then
      say "background build '$s' failed; the end of its log ($BACKGROUND_LOG):"; tail -40 "$BACKGROUND_LOG"; return 1
    fi
  done
  (( SECONDS - t < 5 )) || say "waited $(stamp $((SECONDS - t))) for the background build: $*"
}
# gated "STEP..." NAME CMD...: the tier, once the background steps it needs have ended; failed if one failed.
gated() {
  local steps="$1" name="$2"; shift 2
  # shellcheck disable=SC2086
  if await $steps; then tier "$name" "$@"; else TIERS+=("$name|0|1"); FAILED+=("$name"); fi
}
pytest_tier() { "$PY" -m pytest -n 2 --dist loadfile -q -p no:cacheprovider --durations=15 "$@"; }

summary() {
  local row name s rc total=$((SECONDS - START))
  echo
  echo ">> test: the tiers (foreground; the background builds ran beside them)"
  printf '   %-34s %8s  %s\n' tier time result
  for row in "${TIERS[@]}"; do
    IFS='|' read -r name s rc <<< "$row"
    printf '   %-34s %8s  %s\n' "$name" "$(stamp "$s")" "$( ((rc == 0)) && echo ok || echo "FAILED ($rc)")"
  done
  for s in "${STEPS[@]}"; do
    [[ -e "$STATE/$s.s" ]] && printf '   %-34s %8s  %s\n' "  background: $s" "$(stamp "$(cat "$STATE/$s.s")")" \
      "$( [[ "$(cat "$STATE/$s.rc")" == 0 ]] && echo ok || echo FAILED)"
  done
  printf '   %-34s %8s  of the %d-minute limit\n' total "$(stamp $total)" $LIMIT_MINUTES
  if (( total > WARN_MINUTES * 60 )); then
    echo ">> test: WARNING: $(stamp $total) is past $WARN_MINUTES minutes, two thirds of CI's $LIMIT_MINUTES: make a tier faster before adding one"
  fi
  (( ${#FAILED[@]} == 0 )) || echo ">> test: FAILED tiers: ${FAILED[*]}"
}

tier "environment (lock, .venv)" "$MAKE" --no-print-directory lock-check venv || { summary; exit 1; }
# apt holds one lock: the cluster's packages and Chromium in one step, before anything runs beside it.
tier "host packages (apt)" bash -c "cluster/install-deps.sh && $MAKE --no-print-directory browser-deps" || { summary; exit 1; }
# A process group of its own (job control on for this one command), so that an early exit stops its builds too.
set -m; background & BACKGROUND_PID=$!; set +m
trap 'kill -- -$BACKGROUND_PID 2>/dev/null' EXIT
tier "lint, CRD check" "$MAKE" --no-print-directory lint crds-check
tier "integration" pytest_tier tests/integration
gated tools "unit" pytest_tier tests/unit
gated "tools kubernetes kueue" "operator (real kube-apiserver)" pytest_tier tests/operator
gated "image seed" "e2e (three nodes)" "$MAKE" --no-print-directory e2e E2E_NODES=3
wait $BACKGROUND_PID 2>/dev/null
summary
(( ${#FAILED[@]} == 0 ))
