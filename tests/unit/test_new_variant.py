"""A new variant is one entry per table, in the files docs/architecture.md names: proved on a copy of the package.

Each case copies operator/ringleader, adds a throwaway variant with one edit per table it needs (an architecture,
TreeAllReduce: a BSP collective on the ring's synchronizer, template and cost model; a paradigm, Throwaway: ASP's
gate; a compression method, Throwaway: sent as it is, ring only), and checks in a fresh interpreter that every table has
it (tests/unit/test_variants.py), that a spec of it validates and renders, and that the rules refuse what the
tables say it does not take. The files edited are counted, and docs/architecture.md's "Where to change what"
row names exactly them. With RINGLEADER_HEAVY_TESTS=1 the architecture also trains: `ringleader run` of 2 workers.
"""

from __future__ import annotations

import json
import os
import pathlib
import re
import shutil
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "operator" / "ringleader"

# (file under ringleader/, the line an entry follows, the entry): what a throwaway variant needs, and no more.
ARCHITECTURE = [
    ("api/variants.py", '    RING_ALL_REDUCE = "RingAllReduce"\n', '    TREE_ALL_REDUCE = "TreeAllReduce"\n'),
    ("api/variants.py", "ARCHITECTURES: dict[Architecture, ArchitectureTraits] = {\n",
     '    Architecture.TREE_ALL_REDUCE: ArchitectureTraits("tree", (constants.ROLE_WORKER,), (Paradigm.BSP,), GLOO, '
     '"DAG", paradigms_why="a tree allreduce is a collective"),\n'),
    ("runtime/main.py", "    Architecture.RING_ALL_REDUCE: ring.RingSynchronizer,\n",
     "    Architecture.TREE_ALL_REDUCE: ring.RingSynchronizer,\n"),
    ("topology/rendering.py", '    Architecture.RING_ALL_REDUCE: "ring_allreduce.yaml.j2",\n',
     '    Architecture.TREE_ALL_REDUCE: "ring_allreduce.yaml.j2",\n'),
    ("models/architectures.py", "ARCHITECTURE_MODELS: dict[Architecture, ArchitectureModel] = {\n",
     "    Architecture.TREE_ALL_REDUCE: ArchitectureModel(lambda workers, model_bytes, link, _, pods: "
     "cost_models.ring_comm_seconds(workers, model_bytes, link, pods), "
     "Model(_model_name(Architecture.TREE_ALL_REDUCE), "
     "lambda i, _: ring_comm(i), ring_compute, Paradigm.BSP), traffic.ring),\n"),
]
PARADIGM = [
    ("api/variants.py", '    DSSP = "DSSP"\n', '    THROWAWAY = "Throwaway"\n'),
    ("api/variants.py", "PARADIGMS: dict[Paradigm, ParadigmTraits] = {\n",
     "    Paradigm.THROWAWAY: ParadigmTraits((), Waits.OWN),\n"),
    ("runtime/paradigms.py", "GATES: dict[variants.Paradigm, Callable[[spec.SyncSpec, int, int], Gate]] = {\n",
     "    variants.Paradigm.THROWAWAY: lambda sync, workers, owner: ASP(workers),\n"),
]
CODEC = [
    ("api/variants.py", '    TOP_K = "TopK"\n', '    THROWAWAY = "Throwaway"\n'),
    ("api/variants.py", "CODECS: dict[CompressionMethod, CodecTraits] = {\n",
     '    CompressionMethod.THROWAWAY: CodecTraits((Architecture.RING_ALL_REDUCE,), sends="the whole gradient"),\n'),
    ("runtime/compression.py", "                                                         BucketCodec | None]] = {\n",
     "    variants.CompressionMethod.THROWAWAY: lambda compression, shapes, seed, world: None,\n"),
    ("models/collectives.py",
     "ROUNDS: dict[variants.CompressionMethod, Callable[[Profile, spec.Compression], "
     "tuple[RoundFractions, ...]]] = {\n",
     "    variants.CompressionMethod.THROWAWAY: lambda _, __: (RoundFractions(1.0),),\n"),
]

CHECK = r"""
import json, sys
from ringleader import api, topology
from ringleader.api import crd

value, spec, refused, refusal = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3]), sys.argv[4]
document = {"apiVersion": "ringleader.dev/v1alpha1", "kind": "DistributedTrainingExperiment",
            "metadata": {"name": "throwaway"}, "spec": {**spec, "workers": {"replicas": 2}}}
trial = api.expand(api.parse(document)).trials[0]
assert [o["kind"] for o in topology.render(trial, topology.RenderSettings(image="x"))][-2:] == ["Pod", "Pod"]
assert value in json.dumps(crd.crd())
try:
    api.parse({**document, "spec": {**document["spec"], **refused}})
except api.SpecError as error:
    assert any(refusal in str(p) for p in error.problems), error.problems
else:
    raise AssertionError(f"{refused} was taken")
print("ok")
"""


def throwaway_package(tmp_path: pathlib.Path, edits) -> pathlib.Path:
    """A copy of the package with `edits` applied; the directory to put on PYTHONPATH."""
    root = tmp_path / "operator"
    shutil.copytree(PACKAGE, root / "ringleader", ignore=shutil.ignore_patterns("__pycache__"))
    for name, anchor, entry in edits:
        path = root / "ringleader" / name
        text = path.read_text()
        assert text.count(anchor) == 1, f"{name}: the anchor {anchor!r} is not one line of it any more"
        path.write_text(text.replace(anchor, anchor + entry))
    return root


def in_copy(root: pathlib.Path, *command: str, timeout: float = 300) -> subprocess.CompletedProcess:
    # The copy first; the checkout's operator/ after it, so tests/unit/conftest.py does not put it in front.
    environment = {**os.environ, "PYTHONPATH": f"{root}{os.pathsep}{ROOT / 'operator'}",
                   "MLFLOW_DISABLE_TELEMETRY": "true"}
    return subprocess.run(command, cwd=root.parent, env=environment, capture_output=True, text=True, timeout=timeout)


def documented(row: str) -> set[str]:
    """The source files docs/architecture.md's "Where to change what" row for `row` names in its change column."""
    text = (ROOT / "docs" / "architecture.md").read_text()
    line = next(line for line in text.splitlines() if line.startswith(f"| {row} |"))
    change = line.split("|")[2]
    return set(re.findall(r"`([a-z_]+/[a-z_]+\.py)`", change))


@pytest.mark.parametrize("row, edits, value, spec, refused, refusal", [
    ("an architecture", ARCHITECTURE, "TreeAllReduce", {"architecture": "TreeAllReduce"},
     {"sync": {"paradigm": "SSP", "staleness": 1}},
     "`sync.paradigm` must be BSP when `architecture` is TreeAllReduce: a tree allreduce is a collective"),
    ("a sync paradigm", PARADIGM, "Throwaway", {"sync": {"paradigm": "Throwaway"}}, {"architecture": "RingAllReduce"},
     "use ParameterServer or PeerToPeer for ASP, SSP, DSSP or Throwaway"),
    ("a compression method", CODEC, "Throwaway",
     {"architecture": "RingAllReduce", "compression": {"method": "Throwaway"}},
     {"architecture": "PeerToPeer"},
     "`compression.method` Throwaway, PowerSGD or TopK needs `architecture` RingAllReduce"),
], ids=["architecture", "paradigm", "codec"])
def test_a_throwaway_variant_needs_the_files_the_docs_name(tmp_path, row, edits, value, spec, refused, refusal):
    root = throwaway_package(tmp_path, edits)
    edited = {name for name, _, _ in edits}
    assert edited == documented(row)
    print(f"{row}: {len(edited)} source files: {sorted(edited)}")

    tables = in_copy(root, sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider",
                     str(ROOT / "tests" / "unit" / "test_variants.py"), "-k", "not today")
    assert tables.returncode == 0, tables.stdout + tables.stderr
    checked = in_copy(root, sys.executable, "-c", CHECK, value, json.dumps(spec), json.dumps(refused), refusal)
    assert checked.stdout.strip() == "ok", checked.stdout + checked.stderr


@pytest.mark.skipif(not os.environ.get("RINGLEADER_HEAVY_TESTS"),
                    reason="heavy: set RINGLEADER_HEAVY_TESTS=1 (two ranks train the throwaway architecture)")
def test_the_throwaway_architecture_trains(tmp_path):
    root = throwaway_package(tmp_path, ARCHITECTURE)
    experiment = tmp_path / "tree.yaml"
    experiment.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\n"
                          "metadata: {name: tree}\nspec:\n  architecture: TreeAllReduce\n  workers: {replicas: 2}\n"
                          "  model: {iterations: 6, warmupIterations: 1}\n")
    ran = in_copy(root, sys.executable, "-c", "import sys; from ringleader import cli; sys.exit(cli.main())", "run",
                  str(experiment), "--output-dir",
                  str(tmp_path / "runs"), "--tracking-uri", f"sqlite:///{tmp_path / 'mlflow.db'}")
    assert ran.returncode == 0, ran.stdout[-3000:] + ran.stderr[-3000:]
    assert re.search(r"tree-0\s+TreeAllReduce\s+BSP\s+2\s.*FINISHED", ran.stdout), ran.stdout[-3000:]
