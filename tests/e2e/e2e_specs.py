"""The small experiments of the e2e tests: sized so that several fit a 2-core node at once."""

from __future__ import annotations

import copy
import os
import pathlib
from typing import Any

import yaml

from documents import merged
from e2e_kube import millicores

API_VERSION = "ringleader.dev/v1alpha1"
KIND = "DistributedTrainingExperiment"

# Per pod: requests == limits (the operator renders Guaranteed pods). 250m lets 7 pods run at once on
# 2 cores beside the operator, MLflow and CoreDNS; importing torch and mlflow under 250m takes ~20 s.
POD_CPU = os.environ.get("RINGLEADER_E2E_POD_CPU", "250m")
POD_MEMORY = os.environ.get("RINGLEADER_E2E_POD_MEMORY", "768Mi")
POD = {"cpu": POD_CPU, "memory": POD_MEMORY}
ITERATIONS = 24
# A bandwidth cap makes a run last (it sleeps, costing no CPU): the mlp below has ~117k parameters
# (~466 KB), so at 20 Mbit/s every transfer takes >= 0.19 s and an iteration ~0.2-0.4 s.
SLOW_NETWORK = {"bandwidth": "20Mbit"}
SLOW_ITERATIONS = 80


# A cap the network enforces (CNI bandwidth plugin), and a ring allreduce that can saturate it: 2 workers
# allreducing an mlp of 7.75M parameters (imageSize 100: 31 MB of gradients, each worker sending 31 MB an
# iteration), batch 4 so that compute is short. Uncapped, gloo moves that at ~250 MB/s between two 250m pods.
# containerd gives each pod's token bucket a 512 MiB burst (2^32 bits), sent at full speed before the cap
# holds: the warm-up (30 iterations, 930 MB per worker, the first ~20 of them spending the burst) drains it,
# so the measured iterations run at the cap.
NETWORK_CAP = "100Mbit"
NETWORK_CAP_BYTES_PER_SECOND = 100e6 / 8
NETWORK_TRIAL = {
    "architecture": "RingAllReduce",
    "model": {"name": "mlp", "batchSize": 4, "iterations": 38, "warmupIterations": 30},
    "data": {"synthetic": {"samples": 64, "imageSize": 100, "numClasses": 4}},
}


def experiment(name: str, namespace: str, **spec: Any) -> dict[str, Any]:
    """2 workers (and 1 parameter server for ParameterServer) training an mlp on 8x8 images; `spec` merged over."""
    base = {
        "architecture": "ParameterServer",
        "parameterServers": {"replicas": 1, "resources": dict(POD)},
        "workers": {"replicas": 2, "resources": dict(POD)},
        "model": {"name": "mlp", "batchSize": 16, "iterations": ITERATIONS, "warmupIterations": 2,
                  "optimizer": {"learningRate": 0.05}},
        "data": {"synthetic": {"samples": 256, "imageSize": 8, "numClasses": 4}},
        # A crash must not be retried for minutes: one restart is enough to show it works.
        "runPolicy": {"backoffLimit": 1, "activeDeadlineSeconds": 600},
    }
    return {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": name, "namespace": namespace},
            "spec": merged(copy.deepcopy(base), spec)}


SERVED = ("ParameterServer", "ParameterServerPodAggregation")
"""SERVED: the architectures with parameter-server pods beside the workers'."""


def trial_specs(manifest: dict) -> list[dict]:
    """The spec of each trial (sweep axes applied, enough for pod counts): architecture and workers."""
    spec = manifest["spec"]
    axes = (spec.get("sweep") or {}).get("matrix") or {}
    architectures = axes.get("architecture") or [spec.get("architecture", "ParameterServer")]
    workers = axes.get("workers") or [spec["workers"].get("replicas", 2)]
    servers = axes.get("parameterServers") or [spec.get("parameterServers", {}).get("replicas", 1)]
    return [{"architecture": a, "workers": w, "ps": s} for a in architectures for w in workers for s in servers]


def ranks(architecture: str, workers: int, ps: int) -> int:
    return workers + (ps if architecture in SERVED else 0)


def cpu_cost(manifest: dict) -> int:
    """Millicores the experiment holds at most: its biggest trial times sweep.maxParallel."""
    spec = manifest["spec"]
    cpu = millicores(spec["workers"]["resources"]["cpu"])
    ps_cpu = millicores(spec.get("parameterServers", {}).get("resources", {}).get("cpu", cpu))
    # A worker pod's CPU is shared by its ranks (`workers.ranksPerPod`, unset: one per GPU, else 1).
    per_pod = spec["workers"].get("ranksPerPod") or spec["workers"]["resources"].get("gpu") or 1
    biggest = max(t["workers"] // per_pod * cpu + (t["ps"] * ps_cpu if t["architecture"] in SERVED else 0)
                  for t in trial_specs(manifest))
    parallel = (spec.get("sweep") or {}).get("maxParallel", 1)
    return biggest * min(parallel, len(trial_specs(manifest)))


def fleet(namespace: str) -> list[dict[str, Any]]:
    """test_training.py's experiments, one per architecture x paradigm case, and a sweep.

    Each exercises a different cleanPodPolicy so that clean-up is checked too."""
    return [
        experiment("ps-bsp", namespace, architecture="ParameterServer", sync={"paradigm": "BSP"},
                   runPolicy={"cleanPodPolicy": "Running"}),
        experiment("p2p-ssp", namespace, architecture="PeerToPeer", sync={"paradigm": "SSP", "staleness": 2},
                   runPolicy={"cleanPodPolicy": "All"}),
        experiment("ring-bsp", namespace, architecture="RingAllReduce", sync={"paradigm": "BSP"},
                   runPolicy={"cleanPodPolicy": "None"}),
        experiment("ps-dssp-straggler", namespace, architecture="ParameterServer",
                   sync={"paradigm": "DSSP", "staleness": 2, "maxStaleness": 6},
                   workers={"replicas": 2, "groups": [{"name": "normal", "replicas": 1},
                                                      {"name": "straggler", "replicas": 1, "slowdownPercent": 300}]},
                   runPolicy={"cleanPodPolicy": "None"}),
        experiment("sweep", namespace, architecture="PeerToPeer",
                   sweep={"matrix": {"architecture": ["PeerToPeer", "RingAllReduce"]}, "maxParallel": 1},
                   runPolicy={"cleanPodPolicy": "All"}),
        # test_bandwidth.py: the same trial capped by the network, and uncapped.
        experiment("net-capped", namespace, **NETWORK_TRIAL,
                   network={"bandwidth": NETWORK_CAP, "enforcement": "Network"}),
        experiment("net-uncapped", namespace, **NETWORK_TRIAL),
    ]


# examples/kueue-queue.yaml, run as its header says: the queue objects written there, then the experiment.
KUEUE_EXAMPLE = pathlib.Path(__file__).resolve().parents[2] / "examples" / "kueue-queue.yaml"


def kueue_example(namespace: str) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """The ResourceFlavor, ClusterQueue and LocalQueue of the example's header (the LocalQueue moved to
    `namespace`), and the example's experiment in `namespace`."""
    text = KUEUE_EXAMPLE.read_text()
    header = [line[len("#   "):] for line in text.splitlines() if line.startswith("#   ")]
    start = header.index("apiVersion: kueue.x-k8s.io/v1beta1")
    end = next(i for i in range(start, len(header)) if header[i].startswith(("make ", "helm ", "kubectl ")))
    queue = [d for d in yaml.safe_load_all("\n".join(header[start:end])) if d]
    for document in queue:
        if document["kind"] == "LocalQueue":
            document["metadata"]["namespace"] = namespace
    manifest = next(d for d in yaml.safe_load_all(text) if d)
    manifest["metadata"]["namespace"] = namespace
    return queue, manifest
