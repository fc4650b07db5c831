"""The sync paradigms' server decisions, on scripted push sequences and on simulated heterogeneous workers."""

import heapq
import random

import pytest

from ringleader.api import spec as spec_
from ringleader.runtime import paradigms


# ---------------------------------------------------------------------------------------------
# A tiny discrete-event simulation of workers that compute, push, and wait for their OK.


def simulate(gate: paradigms.Gate, compute_seconds: list[float], iterations: int, seed: int = 0):
    """Run every worker for `iterations` pushes; returns (oks, releases, grants).

    oks: (worker, t[worker] - clock at its OK) for every OK; releases: the list each push released."""
    rng = random.Random(seed)
    events = []  # (time, sequence, worker): the worker pushes at time
    sequence = 0
    for worker, seconds in enumerate(compute_seconds):
        gate.begin(worker, 0.0)
        heapq.heappush(events, (seconds * rng.uniform(0.9, 1.1), sequence, worker))
        sequence += 1
    pushes = [0] * gate.workers
    oks, releases, grants = [], [], []
    while events:
        now, _, worker = heapq.heappop(events)
        pushes[worker] += 1
        released = gate.on_push(worker, now)
        releases.append(released)
        if gate.last_grant is not None:
            grants.append(gate.last_grant)
        for w in released:
            oks.append((w, gate.t[w] - gate.clock))
            if pushes[w] < iterations:
                heapq.heappush(events, (now + compute_seconds[w] * rng.uniform(0.9, 1.1), sequence, w))
                sequence += 1
    assert pushes == [iterations] * gate.workers, "every worker must finish: no worker left held"
    assert gate.blocked == []
    return oks, releases, grants


STRAGGLER = [1.0, 1.0, 3.0]  # two fast workers and one three times slower


# ---------------------------------------------------------------------------------------------
# BSP


def test_bsp_holds_every_ok_until_the_last_worker_of_the_round_pushes():
    gate = paradigms.BSP(3)
    assert gate.on_push(0, 1.0) == []
    assert gate.on_push(2, 1.5) == []
    assert gate.blocked == [0, 2]
    assert gate.on_push(1, 2.0) == [0, 1, 2]
    assert gate.blocked == [] and gate.clock == 1


def test_bsp_releases_everyone_together_and_with_zero_staleness():
    oks, releases, _ = simulate(paradigms.BSP(3), STRAGGLER, iterations=20)
    assert all(r in ([], [0, 1, 2]) for r in releases)
    assert sum(1 for r in releases if r) == 20
    assert {staleness for _, staleness in oks} == {0}


def test_bsp_averages_rounds_and_the_others_apply_every_push():
    assert paradigms.BSP.averages_rounds
    assert not paradigms.ASP.averages_rounds
    assert not paradigms.SSP.averages_rounds
    assert not paradigms.DSSP.averages_rounds


def test_a_worker_pushing_while_held_is_a_protocol_error():
    gate = paradigms.BSP(2)
    gate.on_push(0, 1.0)
    with pytest.raises(paradigms.ProtocolError, match="worker 0 pushed again"):
        gate.on_push(0, 2.0)


# ---------------------------------------------------------------------------------------------
# ASP


def test_asp_oks_every_push_at_once():
    gate = paradigms.ASP(2)
    assert [gate.on_push(0, float(i)) for i in range(5)] == [[0]] * 5
    assert gate.t == [5, 0] and gate.clock == 0


def test_asp_never_blocks_and_lets_a_fast_worker_run_far_ahead():
    oks, releases, _ = simulate(paradigms.ASP(3), STRAGGLER, iterations=30)
    assert all(len(r) == 1 for r in releases)
    assert max(staleness for _, staleness in oks) > 10


# ---------------------------------------------------------------------------------------------
# SSP


def test_ssp_holds_only_the_worker_more_than_s_ahead_and_frees_it_when_the_slowest_moves():
    gate = paradigms.SSP(2, staleness=2)
    assert gate.on_push(0, 1.0) == [0]  # 1 ahead
    assert gate.on_push(0, 2.0) == [0]  # 2 ahead: still allowed
    assert gate.on_push(0, 3.0) == []  # 3 ahead: waits
    assert gate.blocked == [0]
    assert gate.on_push(1, 3.5) == [0, 1]  # the slowest moved: 3 - 1 = 2 <= s


def test_ssp_with_zero_staleness_releases_like_bsp():
    gate = paradigms.SSP(3, staleness=0)
    assert gate.on_push(1, 1.0) == []
    assert gate.on_push(0, 1.0) == []
    assert gate.on_push(2, 1.0) == [0, 1, 2]


@pytest.mark.parametrize("staleness", [0, 1, 2, 5])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ssp_never_lets_a_worker_get_more_than_s_ahead(staleness, seed):
    oks, _, _ = simulate(paradigms.SSP(3, staleness), STRAGGLER, iterations=25, seed=seed)
    assert max(ahead for _, ahead in oks) == staleness  # reached, never exceeded


# ---------------------------------------------------------------------------------------------
# DSSP: the controller on hand-computed intervals


def dssp_with_push_times(lower, upper, p_times, slow_times):
    """A 2-worker DSSP gate whose A[0] (p) and A[1] (slow) are (latest, previous) as given."""
    gate = paradigms.DSSP(2, lower, upper)
    gate.pushed_at = [p_times, slow_times]
    return gate


def test_dssp_controller_picks_the_r_whose_predicted_push_meets_the_slow_workers_next_push():
    # I_p = 1: sim_p = 10, 11, 12, 13; I_s = 3: sim_s = 12, 15, 18, 21. |12 - 12| = 0 at r = 2.
    gate = dssp_with_push_times(1, 4, (10.0, 9.0), (9.0, 6.0))
    assert gate.controller(0, 1) == 2


def test_dssp_controller_can_grant_the_whole_range():
    # I_p = 0.5: sim_p = 100 .. 102; I_s = 4: sim_s = 103, 107, ...; the gap shrinks up to r_max = 4.
    gate = dssp_with_push_times(2, 6, (100.0, 99.5), (99.0, 95.0))
    assert gate.controller(0, 1) == 4


def test_dssp_controller_takes_the_lowest_r_among_equal_gaps():
    # Equal intervals, offset by 1: every r is 1 away from some sim_s, so r = 0 (wait now).
    gate = dssp_with_push_times(1, 4, (10.0, 8.0), (9.0, 7.0))
    assert gate.controller(0, 1) == 0


def test_dssp_controller_says_wait_when_the_slow_worker_has_no_interval_yet():
    gate = dssp_with_push_times(1, 4, (5.0, 4.0), (0.0, 0.0))
    assert gate.controller(0, 1) == 0


def test_dssp_follows_the_pseudocode_push_by_push():
    """Worker 0 pushes every ~1 s, worker 1 every 3 s; s_L = 1, s_U = 4 (r_max = 3)."""
    gate = paradigms.DSSP(2, lower=1, upper=4)
    gate.begin(0, 0.0)
    gate.begin(1, 0.0)
    # t = [1, 0]: 1 - 0 <= s_L, OK.
    assert gate.on_push(0, 1.0) == [0] and gate.last_grant is None
    # t = [2, 0]: past s_L and fastest -> controller. sim_s is all 0 (worker 1 has no interval yet),
    # so r = 0 and worker 0 waits.
    assert gate.on_push(0, 2.0) == []
    assert gate.last_grant == paradigms.Grant(worker=0, extra=0, threshold=1)
    assert gate.blocked == [0]
    # t = [2, 1]: worker 1 is within s_L; its push also brings worker 0 back to 2 - 1 <= s_L.
    assert gate.on_push(1, 3.0) == [0, 1]
    # t = [3, 1], A[0] = (4, 2): sim_p = 4, 6, 8, 10; A[1] = (3, 0): sim_s = 6, 9, 12, 15 -> r = 1.
    assert gate.on_push(0, 4.0) == [0]
    assert gate.last_grant == paradigms.Grant(worker=0, extra=1, threshold=2)
    # t = [4, 1]: the grant is spent on this push without a check (r: 1 -> 0).
    assert gate.on_push(0, 5.0) == [0]
    assert gate.r == [0, 0] and gate.last_grant is None
    # t = [5, 1], A[0] = (6, 5): sim_p = 6, 7, 8, 9 against sim_s = 6, 9, 12, 15 -> r = 0: wait.
    assert gate.on_push(0, 6.0) == []
    assert gate.last_grant.extra == 0
    # t = [5, 2]: worker 1 OK; worker 0 is still 3 ahead of it, more than s_L.
    assert gate.on_push(1, 6.5) == [1]
    assert gate.blocked == [0]


def test_dssp_records_every_push_time_as_latest_and_previous():
    gate = paradigms.DSSP(2, lower=0, upper=3)
    gate.begin(0, 1.0)
    gate.on_push(0, 2.5)
    assert gate.pushed_at[0] == (2.5, 1.0)
    gate.on_push(1, 3.0)
    gate.on_push(0, 4.0)
    assert gate.pushed_at[0] == (4.0, 2.5)


def test_dssp_a_worker_tied_for_fastest_behind_a_lower_index_is_not_the_fast_one():
    # t = [3, 3, 0] after worker 1's push: argmax is worker 0, so worker 1 is held without a grant.
    gate = paradigms.DSSP(3, lower=1, upper=4)
    gate.t = [3, 2, 0]
    assert gate.on_push(1, 1.0) == []
    assert gate.last_grant is None and gate.blocked == [1]


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dssp_granted_thresholds_stay_within_its_bounds(seed):
    lower, upper = 2, 6
    oks, _, grants = simulate(paradigms.DSSP(3, lower, upper), [1.0, 1.3, 4.0], iterations=40, seed=seed)
    assert grants, "a worker four times faster than the slowest must reach the controller"
    assert all(lower <= g.threshold <= upper and g.threshold == lower + g.extra for g in grants)
    assert any(g.extra > 0 for g in grants), "the controller must grant extra iterations sometimes"


def test_dssp_as_stated_keeps_granting_so_a_persistent_straggler_does_not_bound_the_lead_by_s_u():
    """Pinned on purpose: DSSP's published pseudocode never re-checks s_U, so grants add up. Changing this is a
    decision about the algorithm, not a bug fix."""
    oks, _, grants = simulate(paradigms.DSSP(2, lower=2, upper=6), [1.0, 3.0], iterations=40)
    assert sum(1 for g in grants if g.extra > 0) > 3
    assert max(ahead for _, ahead in oks) > 6


def test_dssp_lets_the_fast_worker_further_ahead_than_ssp_with_the_same_lower_bound():
    ssp_oks, _, _ = simulate(paradigms.SSP(2, 1), [1.0, 3.0], iterations=30)
    dssp_oks, _, _ = simulate(paradigms.DSSP(2, 1, 6), [1.0, 3.0], iterations=30)
    assert max(a for _, a in ssp_oks) == 1
    assert max(a for _, a in dssp_oks) > 1


# ---------------------------------------------------------------------------------------------
# From the spec


# ---------------------------------------------------------------------------------------------
# A worker that is done (stopped at the target, or finished) no longer counts


@pytest.mark.parametrize("gate", [paradigms.BSP(3), paradigms.SSP(3, staleness=1),
                                  paradigms.DSSP(3, lower=1, upper=3), paradigms.DSSPFollower(3, lower=1, upper=3)],
                         ids=lambda gate: type(gate).__name__)
def test_a_retired_worker_never_holds_the_others(gate):
    for w in range(3):
        gate.begin(w, 0.0)
    for w in range(3):
        gate.on_push(w, 1.0)  # one iteration each; then worker 2 stops at the target
    assert gate.blocked == [] and gate.retire(2) == []
    for count in range(2, 9):  # workers 0 and 1 go on far past it, in lockstep
        released = gate.on_push(0, count + 0.1) + gate.on_push(1, count + 0.2)
        assert sorted(released) == [0, 1], f"push {count}: {released} released, {gate.blocked} held"
    assert gate.clock == 8 and gate.slowest() == 0


def test_retiring_the_slowest_frees_those_it_held():
    gate = paradigms.SSP(2, staleness=0)
    gate.on_push(0, 1.0)
    gate.on_push(1, 1.0)
    assert gate.on_push(0, 2.0) == []  # one ahead of worker 1
    assert gate.retire(1) == [0]
    assert gate.clock == 2


def test_retiring_completes_a_bsp_round_the_others_pushed():
    gate = paradigms.BSP(3)
    for w in (0, 1):
        gate.on_push(w, 1.0)
    assert gate.blocked == [0, 1]
    assert gate.retire(2) == [0, 1]


def test_a_worker_cannot_retire_while_its_ok_is_held():
    gate = paradigms.BSP(2)
    gate.on_push(0, 1.0)
    with pytest.raises(paradigms.ProtocolError, match="done while its OK was held"):
        gate.retire(0)


def test_once_every_worker_is_done_the_clock_is_their_final_count():
    gate = paradigms.ASP(2)
    gate.on_push(0, 1.0)
    gate.retire(0)
    gate.retire(1)
    assert gate.clock == 0 and gate.active == [0, 1]


def test_make_gate_builds_the_spec_paradigm_with_its_bounds():
    assert isinstance(paradigms.make_gate(spec_.SyncSpec(), 2), paradigms.BSP)
    assert isinstance(paradigms.make_gate(spec_.SyncSpec(paradigm="ASP"), 2), paradigms.ASP)
    ssp = paradigms.make_gate(spec_.SyncSpec(paradigm="SSP", staleness=3), 4)
    assert isinstance(ssp, paradigms.SSP) and ssp.staleness == 3 and ssp.workers == 4
    dssp = paradigms.make_gate(spec_.SyncSpec(paradigm="DSSP", staleness=3, maxStaleness=12), 2)
    assert isinstance(dssp, paradigms.DSSP) and (dssp.lower, dssp.upper, dssp.r_max) == (3, 12, 9)
    follower = paradigms.make_gate(spec_.SyncSpec(paradigm="DSSP", staleness=3, maxStaleness=12), 2, owner=1)
    assert isinstance(follower, paradigms.DSSPFollower) and follower.lower == 3
    assert isinstance(paradigms.make_gate(spec_.SyncSpec(paradigm="SSP", staleness=3), 4, owner=2), paradigms.SSP)


def test_a_gate_without_the_bound_its_paradigm_needs_is_refused_by_name():
    # The experiment's rules require the bounds; a SyncSpec built alone is not checked by them.
    with pytest.raises(ValueError, match="SSP needs sync.staleness"):
        paradigms.make_gate(spec_.SyncSpec(paradigm="SSP"), 2)
    with pytest.raises(ValueError, match="DSSP needs sync.maxStaleness"):
        paradigms.make_gate(spec_.SyncSpec(paradigm="DSSP", staleness=3), 2)


# ---------------------------------------------------------------------------------------------
# Several owners, each with its own gate, and messages that take random times (FIFO per pair)


def simulate_owners(make, compute_seconds: list[float], owners: int, iterations: int, seed: int = 0):
    """Workers push to every owner's gate and go on once every owner has answered, as exchange/client.py does;
    owner 0's DSSP grants are relayed to the others. Returns (staleness of every step, grant releases)."""
    rng = random.Random(seed)
    gates = [make(j) for j in range(owners)]
    workers = len(compute_seconds)
    arrived = {}  # (sender, receiver) -> the last arrival on that pair: messages between two parties stay in order
    events, sequence = [], 0

    def deliver(now, sender, receiver, what, *args):
        nonlocal sequence
        at = max(now + rng.uniform(0.01, 0.5), arrived.get((sender, receiver), 0.0))
        arrived[(sender, receiver)] = at
        heapq.heappush(events, (at, sequence, receiver, what, args))
        sequence += 1

    def answer(now, j, released):
        for w in released:
            deliver(now, ("owner", j), ("worker", w), "reply", j, gates[j].clock, gates[j].allowance(w))

    pushes, waiting, clocks, relayed = ([0] * workers, [set() for _ in range(workers)], [[] for _ in range(workers)],
                                        [0] * workers)
    staleness, grant_releases, weights_clock = [], 0, [0] * workers
    for w in range(workers):
        for j in range(owners):
            gates[j].begin(w, 0.0)
        heapq.heappush(events, (compute_seconds[w], sequence, ("worker", w), "compute", ()))
        sequence += 1
    while events:
        now, _, (role, who), what, args = heapq.heappop(events)
        if what == "compute":  # the worker pushes its gradient to every owner
            staleness.append(pushes[who] - weights_clock[who])
            pushes[who] += 1
            waiting[who] = set(range(owners))
            for j in range(owners):
                deliver(now, ("worker", who), ("owner", j), "push", who)
        elif what == "push":
            answer(now, who, gates[who].on_push(args[0], now))
        elif what == "reply":
            j, clock, grant = args
            waiting[who].discard(j)
            clocks[who].append(clock)
            if j == 0 and grant > relayed[who]:
                relayed[who] = grant
                for other in range(1, owners):
                    deliver(now, ("worker", who), ("owner", other), "grant", who, grant)
            if not waiting[who]:
                weights_clock[who] = min(clocks[who])
                clocks[who] = []
                if pushes[who] < iterations:
                    at = now + compute_seconds[who] * rng.uniform(0.9, 1.1)
                    heapq.heappush(events, (at, sequence, ("worker", who), "compute", ()))
                    sequence += 1
        elif what == "grant":
            released = gates[who].on_grant(*args)
            grant_releases += len(released)
            answer(now, who, released)
    assert pushes == [iterations] * workers, "every worker must finish: no worker left held by any owner"
    assert all(gate.blocked == [] for gate in gates)
    return staleness, grant_releases


@pytest.mark.parametrize("seed", [0, 1, 2, 3])
def test_bsp_owners_are_each_their_own_barrier_and_every_step_sees_fresh_weights(seed):
    staleness, _ = simulate_owners(lambda j: paradigms.BSP(3), STRAGGLER, owners=4, iterations=15, seed=seed)
    assert set(staleness) == {0}


@pytest.mark.parametrize("staleness_bound", [0, 1, 3])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_ssp_owners_deciding_alone_never_let_a_worker_past_s(staleness_bound, seed):
    staleness, _ = simulate_owners(lambda j: paradigms.SSP(3, staleness_bound), STRAGGLER, owners=3, iterations=25,
                                   seed=seed)
    assert max(staleness) <= staleness_bound
    assert max(staleness) == staleness_bound or staleness_bound == 0


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_dssp_grants_decided_by_owner_0_reach_the_other_owners_with_the_worker(seed):
    lower, upper = 1, 5
    staleness, grant_releases = simulate_owners(
        lambda j: paradigms.DSSP(2, lower, upper) if j == 0 else paradigms.DSSPFollower(2, lower, upper),
        [1.0, 4.0], owners=3, iterations=30, seed=seed)
    assert grant_releases > 0, "some OK of a follower must have come from owner 0's relayed grant"
    assert max(staleness) > lower, "the grants let the fast worker past s_L"
