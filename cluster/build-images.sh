#!/usr/bin/env bash
# Build the cluster's images as OCI archives, without a registry or a container engine:
#   pause       static C binary (images/pause.c)            -> localhost/ringleader/pause:$PAUSE_VERSION
#   coredns     the CoreDNS binary built by build-tools.sh  -> localhost/ringleader/coredns:$COREDNS_VERSION
#   debian-base debootstrap bookworm minbase + python3/pip/venv -> localhost/ringleader/debian-base:<key>
# Output: $CACHE/images/<name>-<key>/image.tar (+ ref). Usage: build-images.sh [pause|coredns|debian-base ...]
#                                                         or: build-images.sh --dir NAME
. "$(dirname "$0")/lib.sh"

IMAGES="$CACHE/images"
DEBIAN_PACKAGES="python3,python3-pip,python3-venv,ca-certificates"
DEBIAN_MIRROR="${RINGLEADER_DEBIAN_MIRROR:-http://deb.debian.org/debian}"
base_key() { # changes when the recipe changes
  printf '%s\n' "$DEBIAN_SUITE" "$DEBIAN_PACKAGES" "$(sed -n '/^build_debian_base()/,/^}/p' "$0")" | sha256sum | cut -c1-12
}
image_ref() { # NAME -> reference the image is stored under
  case "$1" in
    pause) echo "localhost/ringleader/pause:$PAUSE_VERSION" ;;
    coredns) echo "localhost/ringleader/coredns:$COREDNS_VERSION" ;;
    debian-base) echo "localhost/ringleader/debian-base:$DEBIAN_SUITE-$(base_key)" ;;
  esac
}
image_dir() { local ref; ref="$(image_ref "$1")"; echo "$IMAGES/$1-${ref##*:}"; }

build_pause() {
  local d; d="$(image_dir pause)"
  gcc -static -Os -s -o "$d/pause" "$CLUSTER_DIR/images/pause.c"
  python3 "$CLUSTER_DIR/images/oci.py" --out "$d/image.tar" --name "$(image_ref pause)" \
    --file "$d/pause:/pause:0755" --entrypoint '["/pause"]'
}

build_coredns() {
  local d bin="$CACHE/coredns-$COREDNS_VERSION/bin/coredns"; d="$(image_dir coredns)"
  [[ -x "$bin" ]] || "$CLUSTER_DIR/build-tools.sh" coredns
  python3 "$CLUSTER_DIR/images/oci.py" --out "$d/image.tar" --name "$(image_ref coredns)" \
    --file "$bin:/coredns:0755" --entrypoint '["/coredns"]'
}

build_debian_base() {
  local d rootfs; d="$(image_dir debian-base)"; rootfs="$d/rootfs"
  command -v debootstrap >/dev/null || die "debootstrap missing (run cluster/install-deps.sh)"
  rm -rf "$rootfs"; mkdir -p "$rootfs"
  log "debootstrap $DEBIAN_SUITE minbase + $DEBIAN_PACKAGES (a few minutes)"
  timeout 1800 "${NICE[@]}" debootstrap --variant=minbase --include="$DEBIAN_PACKAGES" \
    "$DEBIAN_SUITE" "$rootfs" "$DEBIAN_MIRROR" > "$d/debootstrap.log" 2>&1 \
    || { tail -20 "$d/debootstrap.log" >&2; die "debootstrap failed (log: $d/debootstrap.log)"; }
  # Like the python:* images: let `pip install` in a Dockerfile RUN work without --break-system-packages.
  rm -f "$rootfs"/usr/lib/python3*/EXTERNALLY-MANAGED
  rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* "$rootfs"/var/log/*.log \
    "$rootfs"/debootstrap "$rootfs"/tmp/* "$rootfs"/root/.cache
  : > "$rootfs/etc/resolv.conf"; : > "$rootfs/etc/hostname"
  python3 "$CLUSTER_DIR/images/oci.py" --out "$d/image.tar" --name "$(image_ref debian-base)" \
    --rootfs "$rootfs" --cmd '["python3"]' \
    --env PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin --env LANG=C.UTF-8 \
    --env PYTHONUNBUFFERED=1
  rm -rf "$rootfs"
}

# build-images.sh --dir NAME: print the cache directory of image NAME (its image.tar and ref live there).
if [[ "${1:-}" == --dir ]]; then image_dir "$2"; exit 0; fi
want=("$@"); (( ${#want[@]} )) || want=(pause coredns debian-base)
for name in "${want[@]}"; do
  d="$(image_dir "$name")"
  if [[ -s "$d/image.tar" && -s "$d/ref" ]]; then log "image $(cat "$d/ref"): cached"; continue; fi
  mkdir -p "$d"; start=$SECONDS
  log "building image $(image_ref "$name")"
  case "$name" in
    pause) build_pause ;; coredns) build_coredns ;; debian-base) build_debian_base ;;
    *) die "unknown image $name" ;;
  esac
  image_ref "$name" > "$d/ref"
  log "image $(cat "$d/ref") built in $((SECONDS - start))s ($(du -sh "$d/image.tar" | cut -f1))"
done
