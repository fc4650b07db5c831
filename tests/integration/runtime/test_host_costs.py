"""What a byte costs the host, measured while training, and the probe that measures the link as training uses it:
a real 1PS trial of 2 workers on loopback (gloo), its records and summary read back."""

from __future__ import annotations

import pytest

from ringleader.contract import keys
from ringleader.runtime import usage

pytestmark = pytest.mark.integration


def test_every_worker_iteration_records_its_cpu_while_communicating_and_the_summary_its_median(make_trial,
                                                                                              run_trial):
    trial = make_trial({"architecture": "ParameterServer", "parameterServers": {"replicas": 1}})
    run = run_trial(trial, timeout=120)
    assert run.ok, run.explain()
    workers = [slot.rank for slot in trial.worker_slots()]
    throttling = usage.Throttling.find()  # this machine's cgroup: recorded where readable, never a failure
    for rank in workers:
        measured = [r for r in run.iterations(rank) if not r["warmup"]]
        assert measured and all(r[keys.CPU_COMM] > 0 for r in measured)  # gloo's copies and the wait's polling
        assert all((keys.CPU_THROTTLED in r) == (throttling is not None) for r in measured)
    summary = run.summary()
    assert summary[keys.COMM_CPU_SECONDS] > 0
    assert all(used[keys.MACHINE_CPUS] >= used[keys.CPUS] for used in summary[keys.USAGE].values())
    # The probe: trains, the largest sustained over at least two CFS periods, 5 sizes each way.
    probe = summary[keys.LINK_PROBE]
    for series in (probe[keys.PROBE_POINT_TO_POINT], probe[keys.PROBE_COLLECTIVE]):
        assert len(series[keys.PROBE_SAMPLES]) == 5 and series[keys.PROBE_SUSTAINED_SECONDS] >= 0.2
    assert "median of trains" in summary[keys.PREDICTION][keys.FIT]
    # The host term is priced from those records: predict shows it beside the wire for every architecture.
    assert summary[keys.PREDICTION][keys.HOST_NOTE] is None
    assert all(estimate[keys.HOST_SECONDS] is not None and estimate[keys.WIRE_SECONDS] is not None
               for estimate in summary[keys.PREDICTION][keys.ARCHITECTURES].values())
