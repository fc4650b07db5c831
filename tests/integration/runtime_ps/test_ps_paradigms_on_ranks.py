"""BSP, ASP, SSP and DSSP on real ranks (parameter servers, and peers), with one worker three times slower.

Every combination trains the same two workers (ps_trials.straggler_spec) once per session; the
tests below read its records. ParameterServer with two servers is the heavy variant: set
RINGLEADER_HEAVY_TESTS=1 to run it too.
"""

from __future__ import annotations

import os
import statistics

import pytest

import ps_trials

pytestmark = [pytest.mark.integration, pytest.mark.timing]

heavy = pytest.mark.skipif(not os.environ.get("RINGLEADER_HEAVY_TESTS"),
                           reason="heavy: set RINGLEADER_HEAVY_TESTS=1 (two parameter servers)")

ONE_SERVER = pytest.param("ParameterServer", 1, id="ps")
TWO_SERVERS = pytest.param("ParameterServer", 2, id="ps2", marks=heavy)
PEERS = pytest.param("PeerToPeer", 1, id="p2p")
ARCHITECTURES = [ONE_SERVER, TWO_SERVERS, PEERS]
PARADIGMS = ["BSP", "ASP", "SSP", "DSSP"]


def rank_of(run, group: str) -> int:
    return next(s.rank for s in run.trial.worker_slots() if s.group == group)


def worker_records(run) -> dict[int, list[dict]]:
    return {s.rank: run.iterations(s.rank) for s in run.trial.worker_slots()}


def gate_records(run) -> list[dict]:
    """Records of the rank holding the gate: ps-0, or peer 0 (rank 0 in both)."""
    return run.iterations(0)


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
@pytest.mark.parametrize("paradigm", PARADIGMS)
def test_every_worker_trains_all_iterations_and_its_loss_falls(straggler_run, architecture, servers, paradigm):
    run = straggler_run(architecture, paradigm, servers)
    for rank, records in worker_records(run).items():
        assert [r["step"] for r in records] == list(range(run.trial.spec.model.iterations))
        losses = [r["loss"] for r in records]
        first, last = sum(losses[:3]) / 3, sum(losses[-3:]) / 3
        assert last < 0.8 * first, f"rank {rank} ({paradigm}): loss {first:.3f} -> {last:.3f}"
        assert all(r["bytes/sent"] > 0 and r["bytes/received"] > 0 for r in records)


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
def test_bsp_gives_every_worker_the_same_fresh_weights_and_the_fast_one_waits(straggler_run, architecture, servers):
    run = straggler_run(architecture, "BSP", servers)
    records = worker_records(run)
    assert {r["staleness"] for rs in records.values() for r in rs} == {0.0}
    digests = {run.read_json(rank, "summary.json")["parameterDigest"] for rank in records}
    assert len(digests) == 1, "after the last round every worker must hold bit-identical weights"
    fast, slow = records[rank_of(run, "fast")], records[rank_of(run, "slow")]
    assert sum(r["time/wait"] for r in fast) > sum(r["time/wait"] for r in slow)


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
def test_ssp_observed_staleness_never_exceeds_s(straggler_run, architecture, servers):
    run = straggler_run(architecture, "SSP", servers)
    staleness = {rank: [r["staleness"] for r in rs] for rank, rs in worker_records(run).items()}
    assert max(max(values) for values in staleness.values()) <= ps_trials.SSP_STALENESS, staleness
    assert max(staleness[rank_of(run, "fast")]) >= 1, "the fast worker should have run ahead of the straggler"


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
def test_dssp_granted_thresholds_stay_within_its_bounds(straggler_run, architecture, servers):
    run = straggler_run(architecture, "DSSP", servers)
    thresholds = [r["server/threshold"] for r in gate_records(run) if r.get("server/threshold") is not None]
    lower, upper = ps_trials.DSSP_BOUNDS
    assert thresholds, "the fast worker should have got past s_L and reached the controller"
    assert all(lower <= t <= upper for t in thresholds), thresholds


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
def test_asp_never_holds_a_worker(straggler_run, architecture, servers):
    run = straggler_run(architecture, "ASP", servers)
    fast = worker_records(run)[rank_of(run, "fast")]
    assert max(r["staleness"] for r in fast) > ps_trials.SSP_STALENESS
    bsp_fast = worker_records(straggler_run(architecture, "BSP", servers))[rank_of(run, "fast")]
    assert sum(r["time/wait"] for r in fast) < 0.2 * sum(r["time/wait"] for r in bsp_fast)


def finished_at(run, rank: int) -> float:
    """Wall-clock second at which `rank` ended its last iteration (from its Chrome trace; ranks share a clock here)."""
    last = f"iteration {run.trial.spec.model.iterations - 1}"
    events = [e for e in run.read_json(rank, "trace.json")["traceEvents"] if e.get("name") == last]
    assert events, f"rank {rank}'s trace has no {last!r}: the traced window must include the last iteration"
    return (events[0]["ts"] + events[0]["dur"]) / 1e6


def lead(run) -> float:
    """Seconds by which the fast worker finished all its iterations before the straggler, in one trial.

    Measured against the straggler of the same trial, so the machine's load, which moves whole trials,
    cancels out; under BSP the two finish together."""
    return finished_at(run, rank_of(run, "slow")) - finished_at(run, rank_of(run, "fast"))


@pytest.mark.parametrize("architecture, servers", ARCHITECTURES)
@pytest.mark.parametrize("paradigm", ["ASP", "SSP", "DSSP"])
def test_stale_paradigms_let_the_fast_worker_finish_the_same_iterations_sooner_than_bsp(
        straggler_run, architecture, servers, paradigm):
    bsp, stale = straggler_run(architecture, "BSP", servers), straggler_run(architecture, paradigm, servers)
    straggler_iteration = statistics.median(r["time/iteration"] for r in worker_records(bsp)[rank_of(bsp, "slow")])
    # BSP: the two end together. SSP(2): the fast worker ends up to two straggler iterations early (it is
    # never more than two ahead); ASP and DSSP let it run further ahead, so it ends earlier still.
    assert abs(lead(bsp)) < straggler_iteration
    assert lead(stale) > lead(bsp), (lead(stale), lead(bsp), straggler_iteration)


@pytest.mark.parametrize("paradigm, per_iteration", [("BSP", 1), ("ASP", 2)])
def test_parameter_servers_record_each_aggregation(straggler_run, paradigm, per_iteration):
    run = straggler_run("ParameterServer", paradigm)
    records = run.iterations(0)
    assert len(records) == per_iteration * ps_trials.ITERATIONS  # BSP: one per round; ASP: one per push
    assert all(r["role"] == "ps" and r["server/aggregation"] > 0 for r in records)
    assert all(r["server/queue_depth"] in (0.0, 1.0) for r in records)
