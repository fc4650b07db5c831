"""Rendered objects of every architecture x CPU/GPU match their reviewed golden files; paradigms change only data.

A golden file holds the BSP rendering of an architecture on a device; every other paradigm must
render the same objects but for the trial's `sync` block in trial.json. A change to the templates
or the trial shows up here as a diff. When it is intended, regenerate and review the golden files:

    RINGLEADER_UPDATE_GOLDEN=1 PYTHONPATH=operator python -m pytest tests/unit/test_topology_golden.py
    git diff tests/unit/golden/
"""

from __future__ import annotations

import difflib
import json
import os
import pathlib

import pytest
import yaml

from ringleader import api, topology
from ringleader.api import rules, variants

GOLDEN = pathlib.Path(__file__).parent / "golden" / "topology"
UPDATE = os.environ.get("RINGLEADER_UPDATE_GOLDEN") == "1"
SETTINGS = topology.RenderSettings(image="ringleader:golden", default_tracking_uri="http://mlflow.ringleader:5000")
CASES = [
    (architecture, paradigm, device)
    for architecture in variants.Architecture
    for paradigm in variants.Paradigm
    for device in ("cpu", "gpu")
    if rules.combination_problem(architecture.value, paradigm.value) is None
]
GOLDEN_CASES = [(a, p, d) for a, p, d in CASES if p == variants.Paradigm.BSP]


def golden_spec(architecture: variants.Architecture, paradigm: variants.Paradigm, device: str) -> dict:
    sync = {"paradigm": paradigm.value}
    if paradigm in variants.STALE_PARADIGMS:
        sync["staleness"] = 3
    if paradigm == variants.Paradigm.DSSP:
        sync["maxStaleness"] = 12
    spec = {"architecture": architecture.value, "sync": sync, "workers": {"replicas": 2},
            "model": {"iterations": 20, "warmupIterations": 2}}
    if device == "gpu":
        spec["workers"]["resources"] = {"cpu": "4", "memory": "16Gi", "gpu": 1}
        spec["scheduling"] = {"gang": "Volcano", "nodeSelector": {"nvidia.com/gpu.present": "true"},
                              "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]}
    return spec


# Placement's own golden files: each shape of affinity the templates write (placement Any writes none, so the
# files above stay as they were before placement existed).
PLACEMENT_CASES = {
    "ParameterServer-spread": (variants.Architecture.PARAMETER_SERVER, {"ranks": "Spread"}),
    "ParameterServer-pack-servers-apart-preferred": (
        variants.Architecture.PARAMETER_SERVER, {"ranks": "Pack", "servers": "Apart", "mode": "Preferred"}),
    "RingAllReduce-pack-by-zone": (
        variants.Architecture.RING_ALL_REDUCE, {"ranks": "Pack", "topologyKey": "topology.kubernetes.io/zone"}),
}


# Pods of several ranks: one Pod per pod of the trial, its environment the agent's (the pod's first RANK and
# LOCAL_WORLD_SIZE, no LOCAL_RANK), the gang's minMember in pods. On GPUs ranksPerPod defaults to the pod's GPUs.
RANKS_PER_POD_CASES = {
    "RingAllReduce-gpu-2-ranks-per-pod": (
        variants.Architecture.RING_ALL_REDUCE, "gpu",
        {"replicas": 4, "resources": {"cpu": "8", "memory": "32Gi", "gpu": 2}}),
    "ParameterServer-cpu-2-ranks-per-pod": (
        variants.Architecture.PARAMETER_SERVER, "cpu", {"replicas": 4, "ranksPerPod": 2, "resources": {"cpu": "2"}}),
}


def rendered_text(architecture, paradigm, device, placement=None, workers=None) -> str:
    spec = golden_spec(architecture, paradigm, device)
    if placement is not None:
        spec["scheduling"] = {"placement": placement}
    if workers is not None:
        spec["workers"] = workers
    document = {"apiVersion": api.API_VERSION, "kind": api.KIND,
                "metadata": {"name": "golden", "namespace": "research"}, "spec": spec}
    [trial] = api.expand(api.parse(document)).trials
    objects = topology.render(trial, SETTINGS, run_id="0123456789abcdef")
    return yaml.safe_dump_all(objects, sort_keys=False, width=120)


@pytest.mark.parametrize("architecture, paradigm, device", GOLDEN_CASES,
                         ids=[f"{a.value}-{d}" for a, _, d in GOLDEN_CASES])
def test_rendering_matches_the_golden_file(architecture, paradigm, device):
    check_golden(GOLDEN / f"{architecture.value}-{device}.yaml", rendered_text(architecture, paradigm, device))


@pytest.mark.parametrize("case", PLACEMENT_CASES)
def test_a_placement_renders_as_its_golden_file(case):
    architecture, placement = PLACEMENT_CASES[case]
    check_golden(GOLDEN / f"{case}.yaml", rendered_text(architecture, variants.Paradigm.BSP, "cpu", placement))


@pytest.mark.parametrize("case", RANKS_PER_POD_CASES)
def test_pods_of_several_ranks_render_as_their_golden_file(case):
    architecture, device, workers = RANKS_PER_POD_CASES[case]
    check_golden(GOLDEN / f"{case}.yaml", rendered_text(architecture, variants.Paradigm.BSP, device, workers=workers))


def check_golden(golden: pathlib.Path, text: str) -> None:
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert golden.exists(), f"{golden} is missing: run with RINGLEADER_UPDATE_GOLDEN=1 and review it"
    expected = golden.read_text()
    if text != expected:
        diff = "".join(difflib.unified_diff(expected.splitlines(True), text.splitlines(True),
                                            str(golden), "rendered now"))
        pytest.fail(f"rendering drifted from {golden.name}; if intended, regenerate with "
                    f"RINGLEADER_UPDATE_GOLDEN=1 and review the diff:\n{diff}")


def trial_sync(objects: list[dict]) -> tuple[list[dict], dict]:
    """The objects with the sync block of their trial.json blanked out, and that sync block."""
    [config_map] = [o for o in objects if o["kind"] == "ConfigMap"]
    trial = json.loads(config_map["data"]["trial.json"])
    sync = trial["spec"].pop("sync")
    config_map["data"]["trial.json"] = json.dumps(trial)
    return objects, sync


@pytest.mark.parametrize("architecture, paradigm, device", [c for c in CASES if c not in GOLDEN_CASES],
                         ids=[f"{a.value}-{p.value}-{d}" for a, p, d in CASES if (a, p, d) not in GOLDEN_CASES])
def test_a_paradigm_changes_only_the_trials_sync_block(architecture, paradigm, device):
    objects, sync = trial_sync(list(yaml.safe_load_all(rendered_text(architecture, paradigm, device))))
    golden_objects, _ = trial_sync(list(yaml.safe_load_all(
        (GOLDEN / f"{architecture.value}-{device}.yaml").read_text())))
    assert objects == golden_objects
    asked = golden_spec(architecture, paradigm, device)["sync"]
    assert sync == {"paradigm": paradigm.value, "staleness": asked.get("staleness"),
                    "maxStaleness": asked.get("maxStaleness")}


def test_every_golden_file_belongs_to_a_case():
    expected = ({f"{a.value}-{d}.yaml" for a, _, d in GOLDEN_CASES} | {f"{case}.yaml" for case in PLACEMENT_CASES}
                | {f"{case}.yaml" for case in RANKS_PER_POD_CASES})
    assert {path.name for path in GOLDEN.glob("*.yaml")} == expected
    assert len(CASES) == 22  # 5 architectures x 4 paradigms x 2 devices, less the three BSP-only ones with the others
