"""Every millisecond of an iteration is in a phase, for every architecture and paradigm, with evaluation and the
stop at a target included; and stopping at a target makes no worker wait for the others under ASP, SSP or DSSP.

Real `ringleader run`s on the digits that ship with scikit-learn, three workers of which one computes three times
slower (a straggler group), the first worker evaluating every 5 iterations toward a target with onReached Stop."""

from __future__ import annotations

import json
import statistics

import pytest

import launching

pytestmark = [pytest.mark.integration, pytest.mark.timing]

PHASES = ("time/data", "time/forward", "time/backward", "time/comm", "time/wait", "time/update", "time/eval",
          "time/other")
EVERY = 5
ITERATIONS = 400  # a bound: the target stops every trial well before it


def straggler_experiment(workdir, name: str, matrix: dict):
    return launching.experiment_file(workdir, name, {
        "workers": {"replicas": 3, "groups": [{"name": "normal", "replicas": 2},
                                              {"name": "straggler", "replicas": 1, "slowdownPercent": 300}]},
        "sync": {"staleness": 2, "maxStaleness": 6},
        # batches large enough that compute, not the loopback, makes most of an iteration: the straggler shows
        "model": {"name": "mlp", "batchSize": 512, "iterations": ITERATIONS, "warmupIterations": 2,
                  "optimizer": {"name": "SGD", "learningRate": 0.02},
                  "evaluation": {"everyIterations": EVERY, "maxSamples": 128},
                  "target": {"accuracyPercent": 85, "onReached": "Stop"}},
        "data": {"format": "Digits", "heldOutPercent": 20, "synthetic": {"seed": 1}},
        "sweep": {"matrix": matrix},
    })


def worker_records(trial_dir) -> dict[int, list[dict]]:
    ranks = {}
    for directory in trial_dir.glob("rank-*"):
        records = [json.loads(line) for line in (directory / "iterations.jsonl").read_text().splitlines()]
        if records and records[0]["role"] == "worker":
            ranks[int(directory.name.split("-")[1])] = records
    return ranks


def coverage(record: dict) -> float:
    return sum(record[phase] for phase in PHASES) / record["time/iteration"]


def trials_of(workdir) -> dict[str, tuple[dict, dict[int, list[dict]]]]:
    """(summary, worker records by rank) by "<architecture> <paradigm>"."""
    [session] = [d for d in (workdir / "ringleader-runs").iterdir() if d.is_dir()]
    trials = {}
    for directory in session.iterdir():
        if (directory / "summary.json").is_file():
            spec = json.loads((directory / "trial.json").read_text())["spec"]
            trials[f"{spec['architecture']} {spec['sync']['paradigm']}"] = (
                json.loads((directory / "summary.json").read_text()), worker_records(directory))
    return trials


def assert_every_millisecond_is_in_a_phase(trial: str, ranks: dict[int, list[dict]]) -> None:
    for rank, records in ranks.items():
        assert all(set(PHASES) <= set(r) for r in records), f"{trial} rank {rank}: a phase is missing from a record"
        measured = [r for r in records if not r["warmup"]]  # the iterations every summary counts
        short = [r for r in measured if coverage(r) < 0.95]
        # Time no phase timed shows in most iterations when it is the loop's (an untimed evaluation, 1 iteration in
        # 5, leaves 20 % short); a rank descheduled between two phases leaves one iteration short now and then. On
        # two busy cores that came to 5 of 48 iterations (10 %), and once to 228 ms of a 996 ms iteration in a rank
        # that had measured only 5 before an ASP trial's target stopped it (18 % of its time): one is always allowed.
        allowed = max(1, int(0.15 * len(measured)))
        assert len(short) <= allowed, (
            f"{trial} rank {rank}: phases cover under 95 % of {len(short)} of {len(measured)} iterations, more than "
            f"{allowed}: " + ", ".join(f"step {r['step']} {coverage(r):.0%} of {r['time/iteration'] * 1e3:.0f} ms"
                                       for r in short))
        assert max(map(coverage, measured)) < 1.02, f"{trial} rank {rank}: phases add up to more than the iteration"


@pytest.fixture(scope="module")
def parameter_server_and_peers(tmp_path_factory, migrated_db):
    workdir = tmp_path_factory.mktemp("phases")
    (workdir / "mlflow.db").write_bytes(migrated_db.read_bytes())
    path = straggler_experiment(workdir, "phases", {"architecture": ["ParameterServer", "PeerToPeer"],
                                                    "paradigm": ["BSP", "ASP", "SSP", "DSSP"]})
    finished = launching.run(workdir, str(path), "--data-dir", str(workdir), timeout=600)
    assert finished.returncode == 0, finished.output
    return trials_of(workdir)


def test_every_iteration_of_every_worker_is_in_its_phases_for_every_architecture_and_paradigm(
        parameter_server_and_peers):
    assert len(parameter_server_and_peers) == 8
    for trial, (_summary, ranks) in parameter_server_and_peers.items():
        assert len(ranks) == 3
        assert_every_millisecond_is_in_a_phase(trial, ranks)
        evaluator = ranks[min(ranks)]
        assert any(r["time/eval"] > 0 for r in evaluator) and not any(
            r["time/eval"] > 0 for rank, records in ranks.items() if rank != min(ranks) for r in records)


def test_the_target_stops_every_worker_and_only_bsp_keeps_them_in_step(parameter_server_and_peers):
    for trial, (summary, ranks) in parameter_server_and_peers.items():
        reached = summary["targetIterations"]
        assert reached < ITERATIONS and reached % EVERY == 0, trial
        counts = {rank: len(records) for rank, records in ranks.items()}
        assert counts[min(ranks)] == reached, f"{trial}: the evaluator stops at the iteration that reached the target"
        # The others hear it in their next answer: at most a few iterations later, never the whole run.
        assert all(count < ITERATIONS for count in counts.values()), f"{trial}: {counts}"


def test_under_asp_the_stop_at_a_target_never_holds_a_fast_worker_back(parameter_server_and_peers):
    asp = {trial: records for trial, records in parameter_server_and_peers.items() if trial.endswith(" ASP")}
    assert len(asp) == 2
    for trial, (_summary, ranks) in asp.items():
        measured = {rank: [r for r in records if not r["warmup"]] for rank, records in ranks.items()}
        means = {rank: statistics.fmean(r["time/iteration"] for r in records) for rank, records in measured.items()}
        slow = max(ranks)  # the straggler group comes last in rank order
        fast = [rank for rank in ranks if rank != slow]
        # No answer held a fast worker: what it waited for is what a gate holds (BSP's, at every iteration).
        for rank in fast:
            waited = sum(r["time/wait"] for r in measured[rank])
            spent = sum(r["time/iteration"] for r in measured[rank])
            assert waited <= 0.01 * spent, f"{trial} rank {rank} waited {waited:.3f} s of {spent:.3f}"
        # Held back, every fast worker would iterate at the straggler's pace (a ratio near 1); free, they measured
        # 0.16-0.7 of it. Not each one: on two busy cores a fast worker was once descheduled for a second of a
        # 1.5 s trial (a mean of 250 ms an iteration against the straggler's 72, 7 iterations to its 23).
        best = min(fast, key=means.__getitem__)
        assert means[best] <= 0.85 * means[slow], f"{trial}: mean iteration seconds by rank {means}"
        assert len(ranks[slow]) < len(ranks[best]), trial


def test_a_ring_books_the_stop_decision_as_waiting_and_stops_every_worker_together(workdir):
    path = straggler_experiment(workdir, "ring", {"architecture": ["RingAllReduce"]})

    finished = launching.run(workdir, str(path), "--data-dir", str(workdir), timeout=300)

    assert finished.returncode == 0, finished.output
    [(trial, (summary, ranks))] = trials_of(workdir).items()
    assert_every_millisecond_is_in_a_phase(trial, ranks)
    assert {len(records) for records in ranks.values()} == {summary["targetIterations"]}
    evaluations = [r["step"] for r in ranks[min(ranks)] if r["time/eval"] > 0]
    waited = [r for rank in ranks if rank != min(ranks) for r in ranks[rank] if r["step"] in evaluations]
    assert all(r["time/wait"] > 0 for r in waited)  # the others wait for the evaluator's verdict
