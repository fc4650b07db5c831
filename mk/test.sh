#!/usr/bin/env bash
# `make test` (what .ci/run calls): every tier, each timed, the total against CI's 90-minute limit.
#
# The slow builds are mostly waiting (module downloads, Debian packages, a 7.7 GB image written and copied) or
# run beside tests that wait on processes: they start in the background at once, in the order the tiers need
# them, and each foreground tier waits only for the parts it uses:
#
#   background  from the start: Go modules -> tools (helm, etcd, CoreDNS) -> one build of Kubernetes, Kueue and
#               crictl (they share the Kubernetes libraries)
#               after the host packages: base images (pause, Debian) -> the project image -> the nodes' store
#   foreground  environment beside host packages, lint -> integration, timed (the tests marked `timing`) ->
#               unit, timed (likewise) -> operator (Kubernetes, etcd, Kueue) -> e2e on one three-node cluster
#               (crictl, CoreDNS, the image, seeded). The operator tier stays in the foreground: beside the e2e
#               tier, on CI's machine, both tiers' pods waited their bounds out and the e2e tier took twice as long.
#   beside      after the timed tests: the rest of the integration tier, then the rest of unit (helm), beside the
#               operator and e2e tiers
#
# The tests that time processes against each other, or bound how long one takes to stop, are marked `timing` and
# run with the machine as quiet as the builds allow; the rest assert what was recorded or computed, not how fast,
# and fill the cores the later tiers leave idle (the operator and e2e tiers
# mostly wait on their clusters). Who yields to whom is set by CPU weights (cgroup v1's cpu.shares; a task of the
# foreground weighs 1024), by phase: while the timed tests run, the builds weigh 256 (about what nice 10 gave
# them); from then on the builds 2048, since the operator and e2e tiers wait for them when cold, and the tiers
# beside 1024, a weight no foreground tier can starve (a rank starved for its peer timeout fails its test).
# Without a writable cgroup v1 cpu hierarchy (not root, cgroup v2) the untimed tiers run in the foreground after
# the timed ones instead.
# Each pytest tier runs on both cores (pytest-xdist). The table at the end lists each tier's time, the CPU time its
# own processes used and how busy the machine was meanwhile; then the machine's CPU time over the whole run, which
# over its cores is a floor no order of the tiers gets under. Above WARN_MINUTES it says so, so that the suite
# cannot outgrow the limit silently.
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
CORES=$(nproc)
TICKS=$(getconf CLK_TCK)
# counted FILE CMD...: run CMD, then write to FILE the user + system seconds it used, its children's and theirs
# (times(2)); not the cluster's daemons and pods, which nothing waits for. In a subshell of its own: there
# the counts start at zero, and no background chain that ends meanwhile is reaped into them. FILE says 0 until
# then, so a CMD that takes the subshell down leaves no earlier tier's count behind.
counted() {
  local file="$1" rc; shift
  echo 0 > "$file"
  (
    "$@"; rc=$?
    times > "$file.times"
    awk 'NR == 2 { split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%d\n", u[1] * 60 + u[2] + s[1] * 60 + s[2] }' \
      "$file.times" > "$file"
    exit $rc
  )
}
# busy_ticks: the machine's CPU time so far, every process's (user, nice, system, irq, softirq), in clock ticks.
busy_ticks() { awk '/^cpu / { print $2 + $3 + $4 + $7 + $8 }' /proc/stat; }
BUSY_AT_START=$(busy_ticks)
say() { printf '>> test [%s] %s\n' "$(stamp $((SECONDS - START)))" "$*"; }

# row NAME SECONDS RC CPU BUSY: the tier's line of the table (a failed tier listed too). The tiers beside (below)
# run in a subshell of their own: theirs wait in a file until beside_end.
IN_BESIDE=0
row() {
  if (( IN_BESIDE )); then echo "$1|$2|$3|$4|$5" >> "$STATE/beside.rows"; return; fi
  TIERS+=("$1|$2|$3|$4|$5"); (( $3 == 0 )) || FAILED+=("$1")
}
# tier NAME CMD...: run CMD, timed; a failed tier is listed, the next ones still run.
tier() {
  local name="$1" t=$SECONDS busy rc cpu="$STATE/tier.$BASHPID.cpu"; shift
  (( ! IN_BESIDE )) || name+=" (beside)"
  busy=$(busy_ticks)
  say "$name"
  counted "$cpu" "$@"; rc=$?
  row "$name" $((SECONDS - t)) $rc "$(cat "$cpu")" $(( ($(busy_ticks) - busy) / TICKS ))
  say "$name: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)") in $(stamp $((SECONDS - t)))"
  return $rc
}

# The background builds: each step leaves STEP.rc (its exit status), STEP.s (its seconds) and STEP.cpu (its CPU
# seconds) in $STATE.
step() {
  local name="$1" t=$SECONDS rc; shift
  counted "$STATE/$name.cpu" "$@" >> "$BACKGROUND_LOG" 2>&1; rc=$?
  echo $((SECONDS - t)) > "$STATE/$name.s"; echo $rc > "$STATE/$name.rc"
  return $rc
}
# Two chains side by side: the Go builds wait on the CPU, the images on the network and the disk.
GO_STEPS=(modules tools kubernetes)
IMAGE_STEPS=(images image seed)
STEPS=("${GO_STEPS[@]}" "${IMAGE_STEPS[@]}")
# What never ran after a failed step is marked failed too, so nothing waits for it.
unfinished_failed() { local s; for s in "$@"; do [[ -e "$STATE/$s.rc" ]] || echo 1 > "$STATE/$s.rc"; done; }
go_builds() {  # needs only Go: starts at once
  step modules cluster/download-modules.sh &&
  # The small tools first (helm, etcd, CoreDNS: the store is seeded with CoreDNS as soon as the image is built),
  # then the one build of everything made of the Kubernetes libraries (Kubernetes, Kueue, crictl).
  step tools cluster/build-tools.sh helm etcd coredns &&
  step kubernetes cluster/build-kubernetes.sh
  unfinished_failed "${GO_STEPS[@]}"
}
image_builds() {  # needs the host packages (debootstrap, buildah, containerd)
  step images cluster/build-images.sh pause debian-base &&
  step image "$MAKE" --no-print-directory e2e-image &&
  # The nodes' content store seeded with the image now, not at the e2e tier's cluster-up (CoreDNS's binary too).
  { until [[ -e "$STATE/tools.rc" ]]; do sleep 2; done; [[ "$(cat "$STATE/tools.rc")" == 0 ]]; } &&
  step seed cluster/seed-store.sh
  unfinished_failed "${IMAGE_STEPS[@]}"
}
# The dependency environment (PyPI) and the host packages (apt) both wait on the network: side by side.
setup() {
  local rc=0 venv apt
  "$MAKE" --no-print-directory lock-check venv & venv=$!
  # apt holds one lock: the cluster's packages and Chromium one after the other.
  bash -c "cluster/install-deps.sh && $MAKE --no-print-directory browser-deps" & apt=$!
  wait $venv || rc=1; wait $apt || rc=1
  return $rc
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
  if await $steps; then tier "$name" "$@"; else row "$name" 0 1 0 0; fi
}
PYTEST=("$PY" -m pytest -n 2 --dist loadfile -q -p no:cacheprovider --durations=15)
pytest_tier() { "${PYTEST[@]}" "$@"; }
# The tiers that assert what was recorded, not how fast: beside the operator and e2e tiers, which mostly wait.
untimed() {
  tier "integration, untimed" pytest_tier -m "not timing" tests/integration
  gated tools "unit" pytest_tier -m "not timing" tests/unit
}

# CPU groups, each a top-level cgroup of the cpu controller (nested ones would share their parent's one weight).
GROUP_PREFIX=/sys/fs/cgroup/cpu/ringleader-test
CPU_GROUPS=("$GROUP_PREFIX-builds" "$GROUP_PREFIX-beside")
CPU_GROUPS_ON=0
if mkdir "${CPU_GROUPS[@]/%/.$$}" 2>/dev/null; then CPU_GROUPS_ON=1; fi
weigh() { (( CPU_GROUPS_ON )) && echo "$2" > "$GROUP_PREFIX-$1.$$/cpu.shares"; }
# join GROUP: the calling (sub)shell and what it starts from then on run in GROUP.
join() { (( ! CPU_GROUPS_ON )) || echo "$BASHPID" > "$GROUP_PREFIX-$1.$$/cgroup.procs"; }
remove_groups() {  # after their processes are killed; bounded: a process that lingers leaves its group behind
  local g i
  (( CPU_GROUPS_ON )) || return 0
  for g in "${CPU_GROUPS[@]}"; do
    for i in 1 2 3 4 5 6 7 8 9 10; do rmdir "$g.$$" 2>/dev/null && break; sleep 1; done
  done
}

# beside TIERS: the shell function TIERS, whose tiers run one after the other in the background, in the group
# `beside`, their output kept in its own log until beside_end, so that the foreground tiers' output stays readable.
# Without CPU groups, in the foreground.
beside() {
  if (( ! CPU_GROUPS_ON )); then "$1"; return; fi
  say "the tiers of '$1': started beside the next tiers (their output follows the e2e tier's)"
  set -m
  ( join beside; IN_BESIDE=1; "$1" > "$STATE/beside.log" 2>&1; touch "$STATE/beside.done" ) & BESIDE_PID=$!
  BACKGROUND+=($!)
  set +m
}
# beside_end: waits for the tiers beside, prints their output and adds their rows to the table.
beside_end() {
  local t=$SECONDS line rc
  (( CPU_GROUPS_ON )) || return 0
  while [[ ! -e "$STATE/beside.done" ]] && kill -0 "$BESIDE_PID" 2>/dev/null; do sleep 2; done
  (( SECONDS - t < 5 )) || say "waited $(stamp $((SECONDS - t))) for the tiers beside"
  [[ -e "$STATE/beside.done" ]] || echo "tiers beside: died|0|1|0|0" >> "$STATE/beside.rows"
  say "the tiers beside: their output:"
  cat "$STATE/beside.log"
  while IFS= read -r line; do
    IFS='|' read -r _ _ rc _ _ <<< "$line"
    say "${line%%|*}: $( ((rc == 0)) && echo ok || echo "FAILED (exit $rc)")"
    TIERS+=("$line"); (( rc == 0 )) || FAILED+=("${line%%|*}")
  done < <(cat "$STATE/beside.rows" 2>/dev/null)
}

summary() {
  local row name s rc cpu busy total=$((SECONDS - START)) all
  all=$(( ($(busy_ticks) - BUSY_AT_START) / TICKS ))
  echo
  echo ">> test: the tiers (foreground; the background builds ran beside them); CPU: minutes of one core its own"
  echo "   processes used (not the cluster's daemons and pods); busy: the machine's CPU time meanwhile, of its $CORES cores"
  printf '   %-58s %8s %8s %5s  %s\n' tier time CPU busy result
  for row in "${TIERS[@]}"; do
    IFS='|' read -r name s rc cpu busy <<< "$row"
    printf '   %-58s %8s %8s %4s%%  %s\n' "$name" "$(stamp "$s")" "$(stamp "$cpu")" \
      "$(( s > 0 ? 100 * busy / (s * CORES) : 0 ))" "$( ((rc == 0)) && echo ok || echo "FAILED ($rc)")"
  done
  for s in "${STEPS[@]}"; do
    [[ -e "$STATE/$s.s" ]] || continue
    cpu=$(cat "$STATE/$s.cpu")
    printf '   %-58s %8s %8s %5s  %s\n' "  background: $s" "$(stamp "$(cat "$STATE/$s.s")")" "$(stamp "$cpu")" "" \
      "$( [[ "$(cat "$STATE/$s.rc")" == 0 ]] && echo ok || echo FAILED)"
  done
  printf '   %-58s %8s  of the %d-minute limit\n' total "$(stamp $total)" $LIMIT_MINUTES
  printf '   %-58s %8s  the machine busy %d%%: on %d cores no order of the tiers ends before %s\n' \
    "CPU, every process of the machine" "$(stamp $all)" "$(( total > 0 ? 100 * all / (total * CORES) : 0 ))" \
    "$CORES" "$(stamp $((all / CORES)))"
  if (( total > WARN_MINUTES * 60 )); then
    echo ">> test: WARNING: $(stamp $total) is past $WARN_MINUTES minutes, two thirds of CI's $LIMIT_MINUTES: make a tier faster before adding one"
  fi
  (( ${#FAILED[@]} == 0 )) || echo ">> test: FAILED tiers: ${FAILED[*]}"
}

# Process groups of their own (job control on for these commands), so that an early exit stops their builds too.
BACKGROUND=()
trap 'for g in "${BACKGROUND[@]}"; do kill -- -$g 2>/dev/null; done; remove_groups' EXIT
weigh builds 256
set -m; { join builds; go_builds; } & BACKGROUND+=($!); set +m
tier "environment (.venv) and host packages (apt), side by side" setup || { summary; exit 1; }
set -m; { join builds; image_builds; } & BACKGROUND+=($!); set +m
tier "lint, CRD check" "$MAKE" --no-print-directory lint crds-check
tier "integration, timed" pytest_tier -m timing tests/integration
tier "unit, timed" pytest_tier -m timing tests/unit  # apart: the two directories share test file names
weigh builds 2048; weigh beside 1024
beside untimed
gated "tools kubernetes" "operator (real kube-apiserver)" pytest_tier tests/operator
gated "kubernetes image seed" "e2e (three nodes)" "$MAKE" --no-print-directory e2e E2E_NODES=3
beside_end
wait "${BACKGROUND[@]}" 2>/dev/null
summary
(( ${#FAILED[@]} == 0 ))
