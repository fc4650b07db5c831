#!/usr/bin/env bash
# Build a Dockerfile on the cluster's Debian base image WITHOUT a Docker engine (buildah, chroot isolation,
# overlay storage, or vfs where overlay mounts are not allowed) and import the result into containerd's k8s.io namespace (when the cluster is up; cluster-up
# re-imports every image built here). Use the image with imagePullPolicy: IfNotPresent or Never.
#
#   cluster/build-image.sh DOCKERFILE CONTEXT TAG [--build-arg K=V ...]
#
# The Dockerfile gets --build-arg BASE_IMAGE=<debian base ref> (FROM ${BASE_IMAGE}); RUN steps have the host's
# network (pip install from PyPI works). Cached by content hash (Dockerfile, build args, context files not in
# .dockerignore, base image): an unchanged build is a no-op. Output: $CACHE/built-images/<tag>/image.tar.
. "$(dirname "$0")/lib.sh"
(( $# >= 3 )) || die "usage: $0 DOCKERFILE CONTEXT TAG [--build-arg K=V ...]"
DOCKERFILE="$(realpath "$1")"; CONTEXT="$(realpath "$2")"; TAG="$3"; shift 3
[[ -f "$DOCKERFILE" ]] || die "no Dockerfile $DOCKERFILE"; [[ -d "$CONTEXT" ]] || die "no context dir $CONTEXT"
[[ "$TAG" == */* ]] || TAG="localhost/$TAG"   # keep it off docker.io: nothing is ever pulled
[[ "$TAG" == *:* ]] || TAG="$TAG:latest"
BUILD_ARGS=()
while (( $# )); do
  case "$1" in
    --build-arg) BUILD_ARGS+=("$2"); shift 2 ;;
    --build-arg=*) BUILD_ARGS+=("${1#*=}"); shift ;;
    *) die "unknown option $1" ;;
  esac
done

"$CLUSTER_DIR/build-images.sh" debian-base
BASE_DIR="$("$CLUSTER_DIR/build-images.sh" --dir debian-base)"
BASE_REF="$(cat "$BASE_DIR/ref")"
have_base_arg=0; for a in "${BUILD_ARGS[@]}"; do [[ "$a" == BASE_IMAGE=* ]] && have_base_arg=1; done
(( have_base_arg )) || BUILD_ARGS=("BASE_IMAGE=$BASE_REF" "${BUILD_ARGS[@]}")

OUT="$CACHE/built-images/$(echo "$TAG" | tr '/:' '__')"
mkdir -p "$OUT"
KEY="$(python3 "$CLUSTER_DIR/ctxhash.py" "$DOCKERFILE" "$CONTEXT" "$TAG" "$BASE_REF" "${BUILD_ARGS[@]}")"
# The running cluster's containerds: the single node's, or every node's of the multi-node cluster (nodes.sh).
SOCKETS=("$RUN_DIR/containerd/containerd.sock")
if [[ -s "$RUN_DIR/nodes.list" ]]; then
  SOCKETS=(); while read -r n; do SOCKETS+=("$RUN_DIR/nodes/$n/containerd/containerd.sock"); done < "$RUN_DIR/nodes.list"
fi
ctr_at() { ctr --address "$1" --namespace k8s.io --timeout 900s "${@:2}"; }  # a torch image (7.7 GB) takes minutes to import
cluster_running() { local s; for s in "${SOCKETS[@]}"; do [[ -S "$s" ]] && ctr_at "$s" version >/dev/null 2>&1 || return 1; done; }
missing_somewhere() { local s; for s in "${SOCKETS[@]}"; do [[ -n "$(ctr_at "$s" images ls -q "name==$TAG")" ]] || return 0; done; return 1; }
# containerd keeps an image it imported under its ID as well as its tag: when the tag moves to a new build,
# the old build's ID reference (and its 8 GB) would stay. Drop every reference to the digest the tag left.
import_into() {
  local s="$1" before after
  before="$(ctr_at "$s" images ls "name==$TAG" | awk 'NR > 1 {print $3}')"
  ctr_at "$s" images import "$OUT/image.tar" >/dev/null || return 1
  after="$(ctr_at "$s" images ls "name==$TAG" | awk 'NR > 1 {print $3}')"
  if [[ -n "$before" && "$before" != "$after" ]]; then
    ctr_at "$s" images ls | awk -v d="$before" 'NR > 1 && $3 == d {print $1}' | xargs -r ctr --address "$s" --namespace k8s.io images rm >/dev/null
  fi
}
import_image() {
  if cluster_running; then
    local s pids=() rc=0 p
    for s in "${SOCKETS[@]}"; do import_into "$s" & pids+=($!); done
    for p in "${pids[@]}"; do wait "$p" || rc=1; done
    (( rc == 0 )) || die "importing $TAG into the cluster's containerd failed"
    # The stamp says the cached content store holds this build: true of the single node's store only (the
    # multi-node cluster's nodes hold clones, gone at cluster-down; the next cluster-up imports it there).
    if (( ${#SOCKETS[@]} == 1 )) && [[ ! -s "$RUN_DIR/nodes.list" ]]; then
      local stamp_dir; stamp_dir="$CACHE/containerd-$(containerd --version | awk '{print $3}')/imported"
      mkdir -p "$stamp_dir" && cp "$OUT/key" "$stamp_dir/$(basename "$OUT").key"
    fi
    log "imported $TAG into containerd (k8s.io) of ${#SOCKETS[@]} node(s)"
  else
    log "cluster not running: $TAG will be imported by the next cluster-up"
  fi
}

if [[ -s "$OUT/image.tar" && "$(cat "$OUT/key" 2>/dev/null)" == "$KEY" ]]; then
  log "$TAG: up to date (content hash ${KEY:0:12})"
  if cluster_running && missing_somewhere; then import_image; fi
  echo "$TAG"; exit 0
fi

command -v buildah >/dev/null || "$CLUSTER_DIR/install-deps.sh"
# Storage driver: overlay where the kernel allows it (layers are diffs: a big `pip install` layer is stored
# once), else vfs (every layer and working container is a full copy of the image).
# RINGLEADER_BUILDAH_DRIVER=overlay|vfs forces one. Each driver has its own storage root.
overlay_works() {
  local t; t="$(mktemp -d "$CACHE/.ovl-probe.XXXXXX")" || return 1
  mkdir -p "$t"/{l,u,w,m}
  local ok=1
  if mount -t overlay overlay -o "lowerdir=$t/l,upperdir=$t/u,workdir=$t/w" "$t/m" 2>/dev/null; then
    umount "$t/m"; ok=0
  fi
  rm -rf "$t"; return $ok
}
DRIVER="${RINGLEADER_BUILDAH_DRIVER:-}"
if [[ -z "$DRIVER" ]]; then if overlay_works; then DRIVER=overlay; else DRIVER=vfs; fi; fi
if [[ "$DRIVER" == vfs ]]; then BH_ROOT="$CACHE/buildah"; else BH_ROOT="$CACHE/buildah-$DRIVER"; fi
mkdir -p "$BH_ROOT"/{root,runroot,tmp}
export TMPDIR="$BH_ROOT/tmp" BUILDAH_ISOLATION=chroot
BH=(buildah --root "$BH_ROOT/root" --runroot "$BH_ROOT/runroot" --storage-driver "$DRIVER")
log "buildah storage: $DRIVER ($BH_ROOT)"
if ! "${BH[@]}" inspect --type image "$BASE_REF" >/dev/null 2>&1; then
  log "loading base image $BASE_REF into buildah storage"
  id="$("${BH[@]}" pull -q "oci-archive:$BASE_DIR/image.tar")"
  "${BH[@]}" tag "$id" "$BASE_REF"
fi
ba=(); for a in "${BUILD_ARGS[@]}"; do ba+=(--build-arg "$a"); done
# RUN steps trust what the host trusts (e.g. a TLS-inspecting egress proxy in front of PyPI): the host CA
# bundle and a pip.conf pointing at it are bind-mounted for the build only, not copied into the image.
if [[ -s /etc/ssl/certs/ca-certificates.crt ]]; then
  printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' > "$BH_ROOT/pip.conf"
  ba+=(--volume /etc/ssl/certs/ca-certificates.crt:/etc/ssl/certs/ca-certificates.crt:ro
       --volume "$BH_ROOT/pip.conf:/etc/pip.conf:ro")
fi
log "building $TAG from $DOCKERFILE (context $CONTEXT)"
start=$SECONDS
previous="$("${BH[@]}" images -q "$TAG" 2>/dev/null || true)"
# A bound, not an estimate: cold (every layer, 7.7 GB of torch and its CUDA libraries) it took 27 min on an idle
# 2-core machine and over 30 beside the tests and the Go builds; warm, only the project's layers (about 1.5 min).
timeout "${RINGLEADER_IMAGE_BUILD_TIMEOUT:-3600}" "${NICE[@]}" "${BH[@]}" bud --isolation chroot --network host \
  --pull=never --layers --format oci -f "$DOCKERFILE" -t "$TAG" "${ba[@]}" "$CONTEXT"
rm -f "$OUT/image.tar.tmp"
"${BH[@]}" push -q "$TAG" "docker-archive:$OUT/image.tar.tmp:$TAG"
mv "$OUT/image.tar.tmp" "$OUT/image.tar"
# The build this one replaces: its layers shared with the new one stay, and the intermediate images the next
# build's layer cache reads are not touched; only what it alone held (GBs when the dependencies changed) goes.
if [[ -n "$previous" && "$previous" != "$("${BH[@]}" images -q "$TAG")" ]]; then
  "${BH[@]}" rmi "$previous" >/dev/null 2>&1 || log "kept the previous build $previous (still in use)"
fi
echo "$KEY" > "$OUT/key"; echo "$TAG" > "$OUT/ref"
log "built $TAG in $((SECONDS - start))s ($(du -sh "$OUT/image.tar" | cut -f1))"
import_image
echo "$TAG"
