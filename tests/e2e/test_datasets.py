"""A real dataset on a PersistentVolumeClaim, read by a trial's pods (docs/api.md, `data.volume`).

The test writes a small ImageFolder (PNG files, one directory per class) on the node, exposes it as a
hostPath PersistentVolume bound to a claim in the test namespace, and runs a ring trial that trains on
it and evaluates on its held-out split: the pods mount the claim read-only at /data, run as non-root,
and the trial's summary carries the evaluation and the time to a target accuracy.
"""

from __future__ import annotations

import os
import pathlib
import secrets
import shutil
import subprocess
import tempfile

import numpy
import pytest
from PIL import Image

import e2e_specs
from e2e_kube import status, trials, wait_for, wait_terminal, describe_dte

ADMIT_TIMEOUT = 900
RUN_TIMEOUT = 600
CLASSES = {"blue": (20, 40, 220), "green": (30, 200, 40), "red": (220, 30, 30)}
IMAGES_PER_CLASS = 24


def write_image_folder(root: pathlib.Path) -> None:
    """8x8 PNGs whose class is their colour, with noise: learnable in a few iterations, yet not constant."""
    rng = numpy.random.default_rng(7)
    for name, colour in CLASSES.items():
        (root / name).mkdir(parents=True)
        for index in range(IMAGES_PER_CLASS):
            pixels = numpy.clip(numpy.array(colour) + rng.normal(0, 25, (8, 8, 3)), 0, 255).astype(numpy.uint8)
            Image.fromarray(pixels, "RGB").save(root / name / f"{index:03d}.png")


@pytest.fixture
def dataset_claim(kube, namespace):
    """A claim in the test namespace bound to a hostPath volume holding the ImageFolder under `shapes/`."""
    if os.environ.get("RINGLEADER_E2E_CLUSTER", "harness") != "harness":
        pytest.fail("the dataset test writes its files on the node: it runs on the harness cluster, whose node "
                    "is this machine (RINGLEADER_E2E_CLUSTER=harness)")
    host = pathlib.Path(tempfile.mkdtemp(prefix="ringleader-e2e-data-"))
    write_image_folder(host / "shapes")
    for path in [host, *host.rglob("*")]:  # the pods run as a non-root user: readable by all, writable by none
        path.chmod(0o555 if path.is_dir() else 0o444)
    volume, claim = f"e2e-data-{secrets.token_hex(3)}", "shapes"
    kube.apply({"apiVersion": "v1", "kind": "PersistentVolume", "metadata": {"name": volume}, "spec": {
        "capacity": {"storage": "16Mi"}, "accessModes": ["ReadOnlyMany"], "storageClassName": "",
        "persistentVolumeReclaimPolicy": "Retain", "hostPath": {"path": str(host), "type": "Directory"},
        "claimRef": {"namespace": namespace, "name": claim}}})
    kube.apply({"apiVersion": "v1", "kind": "PersistentVolumeClaim",
                "metadata": {"name": claim, "namespace": namespace},
                "spec": {"accessModes": ["ReadOnlyMany"], "storageClassName": "", "volumeName": volume,
                         "resources": {"requests": {"storage": "16Mi"}}}})
    wait_for(f"claim {claim} to be Bound", lambda: (kube.get("pvc", namespace, claim) or {}).get(
        "status", {}).get("phase") == "Bound", 60, interval=1)
    yield claim
    kube.kubectl("delete", "pvc", "-n", namespace, claim, "--ignore-not-found", "--wait=false", check=False)
    kube.kubectl("delete", "pv", volume, "--ignore-not-found", "--wait=false", check=False)
    subprocess.run(["chmod", "-R", "u+w", str(host)], check=False, timeout=30)
    shutil.rmtree(host, ignore_errors=True)


def test_a_trial_trains_on_an_image_folder_read_from_a_claim_mounted_read_only(
        kube, namespace, launcher, mlflow, report_on_failure, dataset_claim):
    name = "image-folder"
    report_on_failure(name)
    manifest = e2e_specs.experiment(
        name, namespace, architecture="RingAllReduce",
        model={"iterations": 30, "batchSize": 8, "optimizer": {"learningRate": 0.1},
               "evaluation": {"everyIterations": 5}, "target": {"accuracyPercent": 60}},
        data={"format": "ImageFolder", "path": "shapes", "volume": {"claimName": dataset_claim},
              "heldOutPercent": 25},
        runPolicy={"cleanPodPolicy": "None"})
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest), priority=10)
    launcher.wait_admitted(name, ADMIT_TIMEOUT)
    dte = wait_terminal(kube, namespace, name, RUN_TIMEOUT)
    launcher.release(name)
    assert status(dte).get("phase") == "Succeeded", describe_dte(kube, namespace, name)

    pods = kube.experiment_pods(namespace, name)
    assert len(pods) == 2, [p["metadata"]["name"] for p in pods]
    for pod in pods:
        volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
        mounts = {m["mountPath"]: m for m in pod["spec"]["containers"][0]["volumeMounts"]}
        assert mounts["/data"].get("readOnly") is True, mounts
        claimed = volumes[mounts["/data"]["name"]]["persistentVolumeClaim"]
        assert claimed == {"claimName": dataset_claim, "readOnly": True}, claimed

    (trial,) = trials(dte)
    # Reached from what the pods read: 3 colours are told apart long before 30 iterations.
    assert trial["summary"].get("targetIterations", 0) >= 5, trial["summary"]
    wait_for(f"the MLflow run of {trial['name']} to end", lambda: mlflow.status(trial["runId"]) == "FINISHED", 60,
             describe=lambda: mlflow.status(trial["runId"]))
    run = mlflow.run(trial["runId"])
    assert run.data.metrics.get("eval_accuracy_best_pct", 0) >= 60, sorted(run.data.metrics)
    (evaluating,) = [r for r in mlflow.children(run.info.experiment_id, trial["runId"])
                     if r.data.tags.get("ringleader.rank") == "0"]
    evaluations = mlflow.history(evaluating.info.run_id, "eval/accuracy_pct")
    assert len(evaluations) >= 6, f"evaluations every 5 of 30 iterations, found {len(evaluations)}"
