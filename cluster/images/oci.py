#!/usr/bin/env python3
"""Pack a single-layer OCI image archive without a container engine (stdlib only).

    oci.py --out IMG.tar --name localhost/ringleader/x:tag \
        (--rootfs DIR | --file SRC:DEST[:MODE] ...) [--entrypoint JSON] [--cmd JSON] \
        [--env K=V ...] [--workdir DIR] [--label K=V ...]

The archive is an OCI image layout (oci-layout, index.json, blobs/sha256/*) whose index entry carries
`io.containerd.image.name`, so `ctr -n k8s.io images import IMG.tar` stores it under --name, and buildah /
skopeo can read it as `oci-archive:IMG.tar`. Layers are uncompressed, timestamps fixed: same input, same digest.
"""
import argparse
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile

MT_MANIFEST = "application/vnd.oci.image.manifest.v1+json"
MT_CONFIG = "application/vnd.oci.image.config.v1+json"
MT_LAYER = "application/vnd.oci.image.layer.v1.tar"


def _blob(blobs: str, data: bytes) -> tuple[str, int]:
    digest = hashlib.sha256(data).hexdigest()
    with open(os.path.join(blobs, digest), "wb") as f:
        f.write(data)
    return "sha256:" + digest, len(data)


def _blob_file(blobs: str, path: str) -> tuple[str, int]:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    digest = h.hexdigest()
    shutil.move(path, os.path.join(blobs, digest))
    return "sha256:" + digest, os.path.getsize(os.path.join(blobs, digest))


def _layer_from_rootfs(rootfs: str, dest: str) -> None:
    # GNU tar keeps devices, hard links, sockets-free rootfs and xattr-less files as they are; fixed mtime
    # and sorted names make the layer reproducible.
    subprocess.run(
        ["tar", "--numeric-owner", "--sort=name", "--mtime=@0", "--one-file-system",
         "-C", rootfs, "-cf", dest, "."],
        check=True,
    )


def _layer_from_files(specs: list[str], dest: str) -> None:
    with tarfile.open(dest, "w", format=tarfile.PAX_FORMAT) as tar:
        dirs_done: set[str] = set()
        for spec in specs:
            parts = spec.split(":")
            src, target = parts[0], parts[1].lstrip("/")
            mode = int(parts[2], 8) if len(parts) > 2 else 0o755
            d = os.path.dirname(target)
            while d and d not in dirs_done:  # parent dirs, outermost first
                chain = []
                while d and d not in dirs_done:
                    chain.append(d)
                    d = os.path.dirname(d)
                for p in reversed(chain):
                    ti = tarfile.TarInfo(p)
                    ti.type, ti.mode, ti.mtime = tarfile.DIRTYPE, 0o755, 0
                    tar.addfile(ti)
                    dirs_done.add(p)
            with open(src, "rb") as f:
                data = f.read()
            ti = tarfile.TarInfo(target)
            ti.size, ti.mode, ti.mtime = len(data), mode, 0
            tar.addfile(ti, io.BytesIO(data))


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--name", required=True)
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--rootfs")
    src.add_argument("--file", action="append")
    ap.add_argument("--entrypoint", type=json.loads)
    ap.add_argument("--cmd", type=json.loads)
    ap.add_argument("--env", action="append", default=[])
    ap.add_argument("--workdir")
    ap.add_argument("--label", action="append", default=[])
    a = ap.parse_args(argv)

    work = tempfile.mkdtemp(prefix="oci-", dir=os.path.dirname(os.path.abspath(a.out)))
    try:
        blobs = os.path.join(work, "blobs", "sha256")
        os.makedirs(blobs)
        layer = os.path.join(work, "layer.tar")
        if a.rootfs:
            _layer_from_rootfs(a.rootfs, layer)
        else:
            _layer_from_files(a.file, layer)
        layer_digest, layer_size = _blob_file(blobs, layer)
        cfg = {"Env": a.env or ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]}
        if a.entrypoint:
            cfg["Entrypoint"] = a.entrypoint
        if a.cmd:
            cfg["Cmd"] = a.cmd
        if a.workdir:
            cfg["WorkingDir"] = a.workdir
        if a.label:
            cfg["Labels"] = dict(kv.split("=", 1) for kv in a.label)
        config = {
            "created": "1970-01-01T00:00:00Z",
            "architecture": "amd64",
            "os": "linux",
            "config": cfg,
            "rootfs": {"type": "layers", "diff_ids": [layer_digest]},
            "history": [{"created": "1970-01-01T00:00:00Z", "created_by": "ringleader cluster/images/oci.py"}],
        }
        cfg_digest, cfg_size = _blob(blobs, json.dumps(config, sort_keys=True).encode())
        manifest = {
            "schemaVersion": 2,
            "mediaType": MT_MANIFEST,
            "config": {"mediaType": MT_CONFIG, "digest": cfg_digest, "size": cfg_size},
            "layers": [{"mediaType": MT_LAYER, "digest": layer_digest, "size": layer_size}],
        }
        man_digest, man_size = _blob(blobs, json.dumps(manifest, sort_keys=True).encode())
        index = {
            "schemaVersion": 2,
            "manifests": [{
                "mediaType": MT_MANIFEST, "digest": man_digest, "size": man_size,
                "platform": {"architecture": "amd64", "os": "linux"},
                "annotations": {
                    "io.containerd.image.name": a.name,
                    "org.opencontainers.image.ref.name": a.name.rsplit(":", 1)[-1],
                },
            }],
        }
        with open(os.path.join(work, "index.json"), "w") as f:
            json.dump(index, f)
        with open(os.path.join(work, "oci-layout"), "w") as f:
            json.dump({"imageLayoutVersion": "1.0.0"}, f)
        tmp_out = a.out + ".tmp"
        subprocess.run(["tar", "--sort=name", "--mtime=@0", "--owner=0", "--group=0", "-C", work,
                        "-cf", tmp_out, "oci-layout", "index.json", "blobs"], check=True)
        os.replace(tmp_out, a.out)
        print(f"{a.out}: {a.name} manifest {man_digest}", file=sys.stderr)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
