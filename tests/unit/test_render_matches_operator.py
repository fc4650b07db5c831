"""`ringleader render` with the operator's pod flags prints exactly the objects the operator creates."""

from __future__ import annotations

import argparse
import json

import yaml

from ringleader import api, cli
from ringleader.controller import rendering
from ringleader.controller import settings as settings_

GPU_TAINT = {"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}
POD_FLAGS = ["--default-image", "registry.example/ringleader:7", "--image-pull-policy", "Always",
             "--gpu-resource-name", "amd.com/gpu", "--gpu-tolerations", json.dumps([GPU_TAINT]),
             "--pod-scratch-limit", "3Gi", "--pod-shm-limit", "2Gi", "--pod-service-account", "trainer",
             "--pod-run-as-user", "2000", "--volcano-scheduler-name", "volcano-ml"]
EXPERIMENT = {
    "apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "gpus", "namespace": "research"},
    "spec": {"architecture": "RingAllReduce", "workers": {"replicas": 2, "resources": {"gpu": 1}},
             "scheduling": {"gang": "Volcano", "tolerations": [{"key": "dedicated", "operator": "Exists"}]}},
}


def operator_settings(flags: list[str]) -> settings_.Settings:
    parser = argparse.ArgumentParser()
    settings_.add_arguments(parser, environ={})
    return settings_.from_args(parser.parse_args(flags))


def test_render_with_the_operators_flags_prints_what_the_operator_creates(tmp_path, capsys):
    path = tmp_path / "gpus.yaml"
    path.write_text(yaml.safe_dump(EXPERIMENT))
    settings = operator_settings([*POD_FLAGS, "--tracking-uri", "http://mlflow.ringleader:5000", "--pod-groups"])
    [trial] = api.expand(api.parse(EXPERIMENT)).trials
    owner = {"apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "gpus", "uid": "u-1"}}
    created = rendering.objects(trial, owner, settings, run_id="r-1")

    assert cli.main(["render", str(path), *POD_FLAGS, "--tracking-uri", "http://mlflow.ringleader:5000",
                     "--run-id", "r-1"]) == 0
    printed = list(yaml.safe_load_all(capsys.readouterr().out))
    for obj in created:
        del obj["metadata"]["ownerReferences"]
    assert printed == created

    pods = [o for o in created if o["kind"] == "Pod"]
    assert all(p["spec"]["tolerations"] == [{"key": "dedicated", "operator": "Exists"}, GPU_TAINT] for p in pods)
    assert {p["spec"]["schedulerName"] for p in pods} == {"volcano-ml"}
    assert {p["spec"]["securityContext"]["runAsUser"] for p in pods} == {2000}


def test_gpu_tolerations_go_only_to_pods_that_request_gpus(tmp_path):
    settings = operator_settings(["--gpu-tolerations", json.dumps([GPU_TAINT])])
    cpu = {**EXPERIMENT, "spec": {"architecture": "RingAllReduce"}}
    [trial] = api.expand(api.parse(cpu)).trials
    pods = [o
            for o in rendering.objects(trial, {"apiVersion": "v1", "kind": "X", "metadata": {"name": "x", "uid": "u"}},
                                         settings, run_id=None) if o["kind"] == "Pod"]
    assert pods and all("tolerations" not in p["spec"] for p in pods)
