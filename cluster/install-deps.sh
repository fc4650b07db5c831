#!/usr/bin/env bash
# Install the host packages the cluster needs from Debian (apt). Runs `apt-get update` at most once per
# call and only when something is missing. Go (>= 1.24) is NOT installed here: Debian bookworm's is too old.
. "$(dirname "$0")/lib.sh"

# command -> Debian package
declare -A NEED=(
  [containerd]=containerd [ctr]=containerd [runc]=runc [/usr/lib/cni/bridge]=containernetworking-plugins [/usr/lib/cni/bandwidth]=containernetworking-plugins [tc]=iproute2
  [iptables]=iptables [conntrack]=conntrack [ip]=iproute2 [openssl]=openssl [socat]=socat
  [buildah]=buildah [debootstrap]=debootstrap [nsenter]=util-linux [mount]=mount [sysctl]=procps
  [gcc]=gcc [curl]=curl [python3]=python3 [update-ca-certificates]=ca-certificates
)
missing=()
for cmd in "${!NEED[@]}"; do
  if [[ "$cmd" == /* ]]; then [[ -e "$cmd" ]] || missing+=("${NEED[$cmd]}")
  else command -v "$cmd" >/dev/null 2>&1 || missing+=("${NEED[$cmd]}"); fi
done
[[ -e /usr/lib/x86_64-linux-gnu/libc.a ]] || missing+=(libc6-dev)
if (( ${#missing[@]} )); then
  mapfile -t missing < <(printf '%s\n' "${missing[@]}" | sort -u)
  [[ $(id -u) -eq 0 ]] || die "need root to install: ${missing[*]}"
  log "apt: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  timeout 600 apt-get update -qq
  timeout 1200 apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
command -v go >/dev/null || die "Go toolchain (>= 1.24) not found on PATH"
goversion="$(go env GOVERSION)"; goversion="${goversion#go}"
[[ "$(printf '%s\n' 1.24 "$goversion" | sort -V | head -1)" == 1.24 ]] || die "Go $goversion too old (need >= 1.24)"
log "host packages ok (containerd $(containerd --version | awk '{print $3}'), runc $(runc --version | awk 'NR==1{print $3}'), go $goversion)"
