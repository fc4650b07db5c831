"""Ring allreduce with real ranks on loopback: it learns, stays in lockstep, overlaps, records, and fails cleanly."""

import signal
import time

import pytest

from ringleader.contract import failures, keys, records

pytestmark = [pytest.mark.integration, pytest.mark.timing]

ITERATIONS = 30
WARMUP = 3
SMALL_BUCKETS = {"RINGLEADER_BUCKET_BYTES": str(64 * 1024)}  # several buckets, so overlap can show


@pytest.fixture(scope="module")
def ring_run(make_trial, module_run_trial):
    """One 2-worker ring trial of the tiny mlp, shared by the tests below (process start-up dominates).

    Worker 1 is an emulated straggler (400%) and the link is capped at 100 Mbit/s: neither may break
    BSP's lockstep, and both must show in the records."""
    trial = make_trial({
        "workers": {"replicas": 2, "groups": [{"name": "fast", "replicas": 1},
                                              {"name": "slow", "replicas": 1, "slowdownPercent": 400}]},
        "model": {"iterations": ITERATIONS, "warmupIterations": WARMUP},
        "network": {"bandwidth": "100Mbit"},
    }, name="ring-0")
    result = module_run_trial(trial, timeout=90, extra_env=SMALL_BUCKETS)
    assert result.ok, result.explain()
    return result


def test_the_loss_falls_on_every_worker(ring_run):
    for rank in (0, 1):
        losses = [line["loss"] for line in ring_run.iterations(rank)]
        assert len(losses) == ITERATIONS
        assert sum(losses[-5:]) / 5 < 0.5 * sum(losses[:5]) / 5, losses


def test_all_workers_end_with_bit_identical_weights(ring_run):
    digests = {ring_run.read_json(rank, records.SUMMARY_FILE)["parameterDigest"] for rank in (0, 1)}
    assert len(digests) == 1


def test_each_rank_moves_the_ring_traffic_of_the_model(ring_run):
    parameters = (3 * 8 * 8 + 1) * 256 + (256 + 1) * 256 + (256 + 1) * 4
    expected = 2 * (2 - 1) / 2 * 4 * (parameters + 2)  # 2(N-1)/N * M bytes: the gradients and a stamp per rank
    for rank in (0, 1):
        for line in ring_run.iterations(rank):
            assert line[keys.BYTES_SENT] == expected == line[keys.BYTES_RECEIVED]
            assert line[keys.TIME_COMM] > 0


def test_records_and_the_trial_summary_are_written(ring_run):
    for rank in (0, 1):
        lines = ring_run.iterations(rank)
        assert [line["warmup"] for line in lines] == [True] * WARMUP + [False] * (ITERATIONS - WARMUP)
        assert ring_run.read_json(rank, records.SUMMARY_FILE)["measuredIterations"] == ITERATIONS - WARMUP
        assert ring_run.read_json(rank, records.LAYERS_FILE)["iterations"]
        assert "progress: iteration 30/30" in ring_run.stdout(rank)
    summary = ring_run.summary()
    assert summary["workers"] == 2 and summary["measuredIterations"] == 2 * (ITERATIONS - WARMUP)
    assert summary["throughput"] > 0 and summary["stragglerRank"] in (0, 1)
    assert 0 < summary["commFraction"] < 1 and 0 < summary["computeFraction"] < 1
    assert summary["iterationTimeP50Seconds"] <= summary["iterationTimeP95Seconds"]
    # Only the lowest worker logs the configuration and the summary.
    assert ring_run.stdout(0).count("config: ") == 1 and "config: " not in ring_run.stdout(1)
    assert "summary: " in ring_run.stdout(0) and "summary: " not in ring_run.stdout(1)


def test_communication_starts_before_backward_ends(ring_run):
    trace = ring_run.read_json(0, records.TRACE_FILE)
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    steps = sorted({e["args"]["step"] for e in events})
    assert steps and steps[0] == WARMUP
    overlapped = 0
    for step in steps:
        backward = next(e for e in events if e["args"]["step"] == step and e["name"] == "backward")
        buckets = [e for e in events if e["args"]["step"] == step and e["name"].startswith("allreduce bucket")]
        assert len(buckets) >= 2
        if min(b["ts"] for b in buckets) < backward["ts"] + backward["dur"]:
            overlapped += 1
    # The first bucket (last layers) is launched from a gradient hook, while backward still runs.
    assert overlapped == len(steps)


def test_a_killed_worker_makes_the_others_fail_fast_and_leaves_no_process(make_trial, start_trial):
    trial = make_trial({"workers": {"replicas": 3}, "model": {"iterations": 100000}}, name="killed-0")
    running = start_trial(trial, peer_timeout=15)
    running.wait_until(lambda: running.iterations_written(1) >= 5, timeout=60, what="five iterations on rank 1")
    killed_at = time.monotonic()
    running.kill(1, signal.SIGKILL)
    result = running.wait(timeout=30)
    assert not result.timed_out, result.explain()
    assert time.monotonic() - killed_at < 15
    assert result.returncodes[1] == -signal.SIGKILL
    named = []
    for rank in (0, 2):
        assert result.returncodes[rank] == 1, result.explain()
        last_line = result.stderr(rank).strip().splitlines()[-1]
        assert last_line.startswith(f"ringleader: rank {rank} (worker) failed: lost contact with "), last_line
        named.append(failures.lost_rank(failures.reason_of([last_line])))
    # Each survivor names the rank that stopped beating; one that noticed only after the other survivor had
    # exited too sees two silent peers and says "a peer rank" rather than guess. Never a wrong rank.
    assert 1 in named and set(named) <= {1, None}, named
    assert running.leftovers() == []
    # What was recorded before the failure stays readable.
    assert len(result.iterations(0)) >= 5


def test_the_straggler_is_found_and_the_fast_worker_waits_for_it(ring_run):
    summary = ring_run.summary()
    assert summary["stragglerRank"] == 1
    per_rank = summary["perRank"]

    def mean_forward(rank):
        lines = [line for line in ring_run.iterations(rank) if not line["warmup"]]
        return sum(line[keys.TIME_FORWARD] for line in lines) / len(lines)

    # Forward overlaps nothing, so it shows the 4x stretch best; 2x leaves room for a loaded machine.
    assert mean_forward(1) > 2 * mean_forward(0)
    assert per_rank["1"]["computeSeconds"] > per_rank["0"]["computeSeconds"]
    # The fast worker waits for the slow one's backward to end, as time/wait (test_ring_wait.py: how much).
    assert per_rank["0"]["waitSeconds"] > per_rank["1"]["waitSeconds"]


def test_the_link_is_shaped_to_the_bandwidth(ring_run):
    summary = ring_run.summary()
    # 2(N-1)/N * M bytes over 100 Mbit/s is the least an iteration's communication can take.
    link_seconds = 8 * ring_run.iterations(0)[0][keys.BYTES_SENT] / 100e6
    for rank in ("0", "1"):
        assert summary["perRank"][rank]["iterationSeconds"] >= link_seconds
    assert 0 < summary["sentOverBandwidth"] <= 1.05


def test_each_recorded_bucket_transfer_lasts_at_least_its_bytes_on_the_shaped_link(ring_run):
    # What the report's overlap figure draws: on loopback gloo finishes at once, the emulated link does not.
    for rank in (0, 1):
        iterations = ring_run.read_json(rank, records.LAYERS_FILE)["iterations"]
        collectives = [c for iteration in iterations for c in iteration["collectives"]]
        assert len(collectives) > len(iterations)  # several buckets per iteration (SMALL_BUCKETS)
        for collective in collectives:
            assert collective["end"] - collective["start"] >= 0.999 * 8 * collective["bytes"] / 100e6, collective


def test_a_hung_worker_makes_the_others_give_up_after_the_peer_timeout(make_trial, start_trial):
    trial = make_trial({"model": {"iterations": 100000}}, name="hung-0")
    running = start_trial(trial, peer_timeout=4)
    running.wait_until(lambda: running.iterations_written(1) >= 5, timeout=60, what="five iterations on rank 1")
    running.kill(1, signal.SIGSTOP)  # alive, sockets open, silent: only the timeout can tell
    stopped_at = time.monotonic()
    running.processes[0].wait(timeout=30)
    assert 4 <= time.monotonic() - stopped_at < 20
    assert running.processes[0].returncode == 1
    reason = (running.logs_dir / "rank-0.err").read_text().strip().splitlines()[-1]
    # The stopped rank's heartbeat went quiet with it, so the survivor names it.
    assert reason.startswith("ringleader: rank 0 (worker) failed: lost contact with rank 1 ") and "Timed out" in reason
