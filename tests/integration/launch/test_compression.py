"""Compression, measured: a 2-worker ring on an emulated 100 Mbit/s link swept over compression None, FP16 and
PowerSGD by a real `ringleader run`. FP16 sends half the bytes of None, PowerSGD less than FP16, and each
compressed trial spends less time communicating; the summaries and MLflow say which method and what ratio."""

from __future__ import annotations

import json

import mlflow.tracking
import pytest

import launching
from ringleader.contract import keys, records

pytestmark = [pytest.mark.integration, pytest.mark.timing]


def test_a_ring_swept_over_compression_sends_fewer_bytes_and_communicates_for_less_time(workdir):
    # the 8x8 mlp's 0.46 MB of gradients take ~37 ms per iteration at 100 Mbit/s: communication dominates
    path = launching.experiment_file(workdir, "squeeze", {
        "architecture": "RingAllReduce", "network": {"bandwidth": "100Mbit"},
        "model": {"iterations": 12, "warmupIterations": 2},
        "sweep": {"matrix": {"compression": ["None", "FP16", "PowerSGD"]}}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    summaries = {}
    for trial_dir in (workdir / "ringleader-runs").glob("*/squeeze-*"):
        summary = json.loads((trial_dir / records.SUMMARY_FILE).read_text())
        summaries[summary[keys.COMPRESSION]] = summary
        for rank in (0, 1):
            lines = records.read_iterations(trial_dir / f"rank-{rank}" / records.ITERATIONS_FILE)
            assert all(line[keys.BYTES_UNCOMPRESSED] == lines[0][keys.BYTES_UNCOMPRESSED] > 0 for line in lines)
            assert all((line[keys.TIME_CODEC] > 0) == (summary[keys.COMPRESSION] != "None") for line in lines)
    none, fp16, power = summaries["None"], summaries["FP16"], summaries["PowerSGD"]
    # bytes are deterministic: each rank sends what its collectives carry, every iteration alike
    assert 0.45 <= fp16[keys.BYTES_PER_ITERATION] / none[keys.BYTES_PER_ITERATION] <= 0.55
    assert power[keys.BYTES_PER_ITERATION] < fp16[keys.BYTES_PER_ITERATION]
    assert none[keys.COMPRESSION_RATIO] == 1.0 and fp16[keys.COMPRESSION_RATIO] == pytest.approx(0.5, abs=1e-4)
    assert power[keys.COMPRESSION_RATIO] == pytest.approx(
        power[keys.BYTES_PER_ITERATION] / none[keys.BYTES_PER_ITERATION])
    assert fp16[keys.COMM_SECONDS] < none[keys.COMM_SECONDS] and power[keys.COMM_SECONDS] < none[keys.COMM_SECONDS]
    assert none[keys.CODEC_SECONDS] == 0 < fp16[keys.CODEC_SECONDS]
    # each trial's own prediction prices the compression it measured (models/prediction.py), and says so
    ring = power[keys.PREDICTION][keys.ARCHITECTURES]["ring"]
    assert "priced at the trial's PowerSGD" in ring[keys.BAND_NOTE]
    assert "PowerSGD needs RingAllReduce" in power[keys.PREDICTION][keys.ARCHITECTURES]["p2p"][keys.BAND_NOTE]
    plain = none[keys.PREDICTION][keys.ARCHITECTURES]["ring"][keys.BAND_NOTE]
    assert plain == "" or plain.startswith("no band: the machine's load was"), plain  # nothing said of compression

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/squeeze")
    trial_runs = [run for run in client.search_runs([experiment.experiment_id], max_results=100)
                  if run.data.tags.get("ringleader.kind") == "trial"]
    by_method = {run.data.params["trial.parameters.compression"]: run for run in trial_runs}
    assert by_method["PowerSGD"].data.params["compression.method"] == "PowerSGD"
    assert by_method["PowerSGD"].data.params["compression.rank"] == "2"
    assert by_method["FP16"].data.metrics["network_compression_ratio"] == pytest.approx(0.5, abs=1e-4)
    assert by_method["FP16"].data.metrics["share_codec_pct"] > 0
    assert "compression FP16" in by_method["FP16"].data.tags["mlflow.runName"]
