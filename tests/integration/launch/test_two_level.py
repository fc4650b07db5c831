"""`ringleader run` of the flat and two-level architectures on pods of two ranks (4 workers, `ranksPerPod: 2`).

Every trial finishes; every worker's bytes of an iteration by level (inside its pod, to the other pod of the one
node) are what models/cross_node.py's model of the architecture says for the model's bytes; the flat ring sends
more across pods than the hierarchical one by the model's ratio, (kP-1)/(k(P-1)) = 1.5; and each two-level variant
trains like its flat counterpart (the same mean gradient every step, summed in another order).
"""

from __future__ import annotations

import json
import statistics

import pytest

import launching
from ringleader.models import cross_node
from ringleader.api import trial as trial_
from ringleader.contract import keys, levels, records

pytestmark = pytest.mark.integration

ARCHITECTURES = ["RingAllReduce", "HierarchicalRingAllReduce", "ParameterServer", "ParameterServerPodAggregation"]
TOLERANCE = 0.005  # headers (88 bytes a message), the ring's arrival stamps (4 bytes a rank), uneven chunks:
# 0.02 % here


def test_flat_and_two_level_architectures_on_pods_of_two_send_what_their_models_say(workdir):
    path = launching.experiment_file(workdir, "levels", {
        "workers": {"replicas": 4, "ranksPerPod": 2}, "model": {"iterations": 8, "warmupIterations": 2},
        "network": {"bandwidth": "400Mbit"}, "sweep": {"matrix": {"architecture": ARCHITECTURES}}})

    finished = launching.run(workdir, str(path), timeout=240)

    assert finished.returncode == 0, finished.output
    [session] = (workdir / "ringleader-runs").glob("levels-*")
    across_pods, losses = {}, {}
    for index, architecture in enumerate(ARCHITECTURES):
        directory = session / f"levels-{index}"
        trial = trial_.Trial.model_validate_json((directory / "trial.json").read_text())
        assert trial.spec.architecture.value == architecture
        summary = json.loads((directory / records.SUMMARY_FILE).read_text())
        assert summary[keys.MEASURED_ITERATIONS] == 4 * 6, architecture  # every worker's iterations after warm-up
        workers = [slot.rank for slot in trial.worker_slots()]
        model_bytes = sum(p["bytes"] for p in json.loads((directory / f"rank-{workers[0]}" / records.LAYERS_FILE)
                                                          .read_text())["parameters"])
        nodes = {rank: json.loads((directory / f"rank-{rank}" / records.SUMMARY_FILE).read_text())[keys.NODE]
                 for rank in range(trial.world_size)}
        modelled = cross_node.modelled_bytes(trial, levels.Levels.of(trial, nodes), model_bytes)
        for rank in workers:
            counted = [r for r in records.read_iterations(directory / f"rank-{rank}" / records.ITERATIONS_FILE)
                       if not r[keys.WARMUP]]
            for level, key in levels.BYTES_KEYS.items():
                recorded = statistics.fmean(r[key] for r in counted)
                assert recorded == pytest.approx(modelled[rank][level], rel=TOLERANCE, abs=1.0), (
                    architecture, rank, key)
            assert all(r[keys.BYTES_SENT] == pytest.approx(sum(r[k] for k in levels.BYTES_KEYS.values()))
                       for r in counted), (architecture, rank)
            if keys.TIME_COMM_INTRA in counted[0]:  # a two-level architecture: time/comm in its two parts
                assert all(r[keys.TIME_COMM_INTRA] + r[keys.TIME_COMM_INTER] == pytest.approx(r[keys.TIME_COMM])
                           for r in counted), (architecture, rank)
        across_pods[architecture] = summary[keys.BYTES_INSIDE_NODE_PER_ITERATION]  # one node: the other pod is on it
        assert summary[keys.BYTES_ACROSS_NODES_PER_ITERATION] == 0.0
        losses[architecture] = summary[keys.LOSS_LAST]

    # The flat ring, ranks in pod order: one hop of each pod crosses, 2(N-1)/N M; the hierarchical: every rank
    # 2(P-1)/P M/k. N = 4, k = 2, P = 2: 1.5 times as much.
    assert across_pods["RingAllReduce"] / across_pods["HierarchicalRingAllReduce"] == pytest.approx(1.5, rel=TOLERANCE)
    # The pod's one push instead of two: half the bytes across pods, all of them the servers' exchange.
    assert across_pods["ParameterServer"] / across_pods["ParameterServerPodAggregation"] == pytest.approx(2.0,
                                                                                                       rel=TOLERANCE)
    assert losses["HierarchicalRingAllReduce"] == pytest.approx(losses["RingAllReduce"], rel=1e-4)
    assert losses["ParameterServerPodAggregation"] == pytest.approx(losses["ParameterServer"], rel=1e-4)
    table = finished.output[finished.output.index("MB/iter in pod"):]
    assert all(f"levels-{i}" in table for i in range(4)) and "FAILED" not in table
