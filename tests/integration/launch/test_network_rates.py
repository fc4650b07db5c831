"""`ringleader run` measures the network: loopback rates per iteration in the records and in MLflow, the
trial's mean and p95, and the utilization of the emulated link."""

from __future__ import annotations

import json

import mlflow.tracking
import pytest

import launching
from ringleader.contract import keys, records

pytestmark = pytest.mark.integration


def test_a_local_trial_records_loopback_rates_and_utilization_in_files_and_mlflow(workdir):
    path = launching.experiment_file(workdir, "net", {"architecture": "RingAllReduce",
                                                         "network": {"bandwidth": "1Gbit"}})

    finished = launching.run(workdir, str(path))

    assert finished.returncode == 0, finished.output
    [trial_dir] = [d for d in (workdir / "ringleader-runs").glob("*/net-0") if d.is_dir()]
    summary = json.loads((trial_dir / records.SUMMARY_FILE).read_text())
    assert summary[keys.LINK_INTERFACE].startswith("lo ") and "shared" in summary[keys.LINK_INTERFACE]
    assert summary[keys.LINK_BITS_PER_SECOND] == 2 * 1e9  # the cap, for each of the 2 ranks on the loopback
    for rank in (0, 1):
        lines = records.read_iterations(trial_dir / f"rank-{rank}" / records.ITERATIONS_FILE)
        measured = [line for line in lines if not line["warmup"]]
        assert len(measured) == 18 and not any(keys.LINK_TX in line for line in lines if line["warmup"])
        for line in measured:
            assert line[keys.LINK_TX] > 0 and line[keys.LINK_RX] > 0
            assert line[keys.LINK_UTILIZATION] == pytest.approx(8 * line[keys.LINK_TX] / 2e9)
        # The loopback carries at least what this rank sent (both ranks' traffic goes through it).
        sent_per_second = sum(line[keys.BYTES_SENT] for line in measured) / sum(
            line[keys.TIME_ITERATION] for line in measured)
        assert sum(line[keys.LINK_TX] for line in measured) / len(measured) >= sent_per_second > 0
        trace = json.loads((trial_dir / f"rank-{rank}" / records.TRACE_FILE).read_text())
        assert [e for e in trace["traceEvents"] if e["ph"] == "C" and e["name"] == "lo bytes/s"]

    client = mlflow.tracking.MlflowClient(f"sqlite:///{workdir / 'mlflow.db'}")
    experiment = client.get_experiment_by_name("default/net")
    runs = client.search_runs([experiment.experiment_id], max_results=100)
    [trial_run] = [run for run in runs if run.data.tags.get("ringleader.kind") == "trial"]
    metrics = trial_run.data.metrics
    assert metrics["network_link_tx_mean_bytes_per_s"] == round(summary[keys.LINK_TX_MEAN])
    assert summary[keys.LINK_TX_MEAN] > 0
    assert metrics["network_link_tx_p95_bytes_per_s"] > 0
    assert metrics["network_link_utilization_mean_pct"] == round(100 * summary[keys.LINK_UTILIZATION_MEAN], 1)
    assert summary[keys.LINK_UTILIZATION_MEAN] > 0
    assert metrics["network_link_utilization_p95_pct"] > 0
    for rank_run in (run for run in runs if run.data.tags.get("ringleader.kind") == "rank"):
        history = client.get_metric_history(rank_run.info.run_id, "traffic/link_tx_bytes_per_s")
        assert sorted(m.step for m in history) == list(range(2, 20)) and all(m.value > 0 for m in history)
