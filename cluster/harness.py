"""Python entry points to the test cluster (stdlib only), for e2e fixtures.

    import sys; sys.path.insert(0, "<repo>/cluster")
    import harness
    harness.up()                     # idempotent; builds what is missing (cold: ~30 min, warm: ~1 min)
    os.environ["KUBECONFIG"] = harness.kubeconfig_path()
    ...
    harness.down()                   # removes every process, mount, interface, rule it created

RINGLEADER_CLUSTER_NODES=K (K > 1) at up() brings up K nodes, each in its own network namespace
(RINGLEADER_NODE_NIC_RATE caps their NICs); stop_node/start_node take one away and bring it back.
Everything shells out to the scripts in this directory (the same ones `make cluster-up` runs).
Cache root: $RINGLEADER_CACHE (default ~/.cache/ringleader); see docs/cluster.md.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections import deque
from pathlib import Path
from typing import IO

CLUSTER_DIR = Path(__file__).resolve().parent
_VERSIONS = CLUSTER_DIR / "versions.env"


def _versions() -> dict[str, str]:
    out = {}
    for line in _VERSIONS.read_text().splitlines():
        line = line.strip()
        if line and not line.startswith("#") and "=" in line:
            k, v = line.split("=", 1)
            out[k] = v
    return out


def cache_dir() -> Path:
    """$RINGLEADER_CACHE/cluster (default ~/.cache/ringleader/cluster)."""
    root = os.environ.get("RINGLEADER_CACHE") or os.path.join(os.path.expanduser("~"), ".cache", "ringleader")
    return Path(root) / "cluster"


def run_dir() -> Path:
    return Path(os.environ.get("RINGLEADER_CLUSTER_RUN") or cache_dir() / "run")


def kubeconfig_path() -> str:
    """Admin kubeconfig of the running cluster (exists only while it is up)."""
    return str(run_dir() / "kubeconfig")


def bin_dir() -> Path:
    """Directory holding kubectl (and the other Kubernetes binaries) built for the cluster."""
    return cache_dir() / f"kubernetes-{_versions()['K8S_VERSION']}" / "bin"


def kubectl_path() -> str:
    return str(bin_dir() / "kubectl")


def helm_path() -> str:
    return str(cache_dir() / f"helm-{_versions()['HELM_VERSION']}" / "bin" / "helm")


def env(base: dict[str, str] | None = None) -> dict[str, str]:
    """A copy of the environment with KUBECONFIG set and kubectl/helm first on PATH."""
    e = dict(os.environ if base is None else base)
    e["KUBECONFIG"] = kubeconfig_path()
    e["PATH"] = os.pathsep.join([str(bin_dir()), str(Path(helm_path()).parent), e.get("PATH", "")])
    return e


def _run(script: str, *args: str, timeout: float) -> None:
    """Run a cluster script, its output passed on to stderr as it comes; a failure's error ends on the script's last
    lines, so the reason shows where the error is reported, not only in a log above it."""
    cmd = [str(CLUSTER_DIR / script), *args]
    last: deque[str] = deque(maxlen=20)
    with subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, errors="replace") as proc:
        pump = threading.Thread(target=_pass_on, args=(proc.stdout, last), daemon=True)
        pump.start()
        try:
            rc = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
        pump.join(10)  # bounded: a daemon the script left running may still hold the pipe
    if rc is None:
        raise RuntimeError(f"{script} did not finish in {timeout:.0f}s; its last lines:\n{''.join(last)}")
    if rc:
        raise RuntimeError(f"{script} failed with exit code {rc} (logs: {run_dir() / 'logs'}); its last lines:\n"
                           f"{''.join(last)}")


def _pass_on(stream: IO[str], last: deque[str]) -> None:
    for line in stream:
        sys.stderr.write(line)
        last.append(line)


def up(timeout: float = 3600) -> str:
    """Start the cluster if it is not up (building what is missing); return the kubeconfig path."""
    _run("up.sh", timeout=timeout)
    return kubeconfig_path()


def kueue_up(timeout: float = 1800) -> None:
    """Run Kueue against the running cluster if it is not running (building it when missing: ~5-20 min cold);
    down() stops it."""
    _run("kueue-up.sh", timeout=timeout)


def down(timeout: float = 600) -> None:
    """Stop the cluster and remove everything it created on the host."""
    _run("down.sh", timeout=timeout)


def nodes() -> list[str]:
    """The running multi-node cluster's node names (empty for the single-node cluster)."""
    listing = run_dir() / "nodes.list"
    return listing.read_text().split() if listing.exists() else []


def containerd_socket(node: str) -> str:
    """The socket of the containerd that runs NODE's containers (the single node's: any name)."""
    if node in nodes():
        return str(run_dir() / "nodes" / node / "containerd" / "containerd.sock")
    return str(run_dir() / "containerd" / "containerd.sock")


def stop_node(name: str, timeout: float = 120) -> None:
    """Take node NAME away as a power cut would (cluster/node.sh stop)."""
    _run("node.sh", "stop", name, timeout=timeout)


def start_node(name: str, timeout: float = 300) -> None:
    """Bring node NAME back and wait until it is Ready (cluster/node.sh start)."""
    _run("node.sh", "start", name, timeout=timeout)


def check_clean(timeout: float = 120) -> bool:
    """True when no trace of the cluster is left on the host (see check-clean.sh)."""
    return subprocess.run([str(CLUSTER_DIR / "check-clean.sh")], timeout=timeout,
                          stdout=subprocess.DEVNULL, stderr=sys.stderr).returncode == 0


def is_up() -> bool:
    """True when the API server answers and a node is Ready."""
    if not Path(kubeconfig_path()).exists():
        return False
    try:
        out = subprocess.run(
            [kubectl_path(), "--kubeconfig", kubeconfig_path(), "--request-timeout=5s", "get", "nodes",
             "-o", "jsonpath={.items[*].status.conditions[?(@.type=='Ready')].status}"],
            capture_output=True, text=True, timeout=15)
    except (OSError, subprocess.TimeoutExpired):
        return False
    return out.returncode == 0 and "True" in out.stdout


def build_image(dockerfile: str, context: str, tag: str, build_args: dict[str, str] | None = None,
                timeout: float = 1800) -> str:
    """Build DOCKERFILE (FROM ${BASE_IMAGE}) without a Docker engine and import it; return the image ref."""
    args = [dockerfile, context, tag]
    for k, v in (build_args or {}).items():
        args += ["--build-arg", f"{k}={v}"]
    out = subprocess.run([str(CLUSTER_DIR / "build-image.sh"), *args], check=True, timeout=timeout,
                         stdout=subprocess.PIPE, stderr=sys.stderr, text=True)
    return out.stdout.strip().splitlines()[-1]


if __name__ == "__main__":
    cmds = {"up": lambda: print(up()), "down": down, "kubeconfig": lambda: print(kubeconfig_path()),
            "is-up": lambda: sys.exit(0 if is_up() else 1)}
    if len(sys.argv) != 2 or sys.argv[1] not in cmds:
        sys.exit(f"usage: {sys.argv[0]} {'|'.join(cmds)}")
    cmds[sys.argv[1]]()
