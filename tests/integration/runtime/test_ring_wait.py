"""Waiting is waiting everywhere: a fast worker's idle time behind a 3x straggler is time/wait on the ring, as on a
parameter server and among peers, and a balanced ring waits only for the imbalance it has (real ranks on loopback)."""

from __future__ import annotations

import statistics

import pytest

from ringleader.contract import keys

pytestmark = [pytest.mark.integration, pytest.mark.timing]

ARCHITECTURES = ["RingAllReduce", "ParameterServer", "PeerToPeer"]


def spec(architecture: str, slowdown_percent: int) -> dict:
    """Two BSP workers of an mlp on 8x8 images, the second `slowdown_percent`/100 times slower (100: balanced).

    Batches of 1024 make compute (about 14 ms, 40 ms for the straggler, more on a loaded machine) most of an
    iteration, so the gap between the two workers stands well above the exchange of ~0.2 MB and above the skew
    a loaded 2-core machine puts between two balanced workers."""
    return {
        "architecture": architecture,
        "parameterServers": {"replicas": 1},
        "workers": {"replicas": 2, "groups": [{"name": "fast", "replicas": 1},
                                              {"name": "slow", "replicas": 1, "slowdownPercent": slowdown_percent}]},
        "model": {"name": "mlp", "batchSize": 1024, "iterations": 24, "warmupIterations": 4},
    }


@pytest.fixture(scope="module")
def run(make_trial, module_run_trial):
    """`run(architecture, slowdown_percent)`: that trial's {"fast"/"slow": {"compute"/"comm"/"wait"/"iteration":
    median seconds per iteration after warm-up}}, run once per module. Medians: a load spike on a shared 2-core
    machine stretches some of a rank's iterations, which would move a mean."""
    medians = {}

    def worker_medians(architecture: str, slowdown_percent: int) -> dict:
        if (architecture, slowdown_percent) not in medians:
            trial = make_trial(spec(architecture, slowdown_percent), name=f"wait-{len(medians)}")
            result = module_run_trial(trial, timeout=120)
            assert result.ok, result.explain()
            medians[architecture, slowdown_percent] = {
                slot.group: median_phases([r for r in result.iterations(slot.rank) if not r["warmup"]])
                for slot in trial.worker_slots()}
        return medians[architecture, slowdown_percent]

    return worker_medians


def median_phases(records: list[dict]) -> dict[str, float]:
    return {"compute": statistics.median(sum(r[key] for key in keys.COMPUTE_PHASES) for r in records),
            "comm": statistics.median(r[keys.TIME_COMM] for r in records),
            "wait": statistics.median(r[keys.TIME_WAIT] for r in records),
            "iteration": statistics.median(r[keys.TIME_ITERATION] for r in records)}


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_the_fast_worker_records_its_idle_time_behind_a_straggler_as_wait(run, architecture):
    workers = run(architecture, 300)
    fast, slow = workers["fast"], workers["slow"]
    # Under BSP the fast worker idles each iteration for about the straggler's extra compute.
    gap = slow["compute"] - fast["compute"]
    assert gap > 0, workers  # the straggler is one
    assert fast["wait"] > 0.5 * gap, workers
    assert fast["wait"] > fast["comm"], workers
    # The straggler is the one everybody waits for: it hardly waits itself.
    assert slow["wait"] < 0.25 * fast["wait"], workers


def test_a_balanced_ring_waits_only_for_the_imbalance_it_has(run):
    workers = run("RingAllReduce", 100)
    # Equal workers wait little, but on a loaded 2-core machine one of them can be the slower one for a whole run
    # (twice as slow at a load average of 14): its peer then waits, as it should, for that much and no more.
    for worker, peer in ((workers["fast"], workers["slow"]), (workers["slow"], workers["fast"])):
        imbalance = max(0.0, peer["compute"] - worker["compute"])
        assert worker["wait"] <= imbalance + 0.25 * worker["iteration"], workers
