"""The per-experiment work queue: triggers coalesce, passes never overlap, due times are kept, retries follow kopf's
errors.

On a virtual clock (tests/virtual_clock.py): waits take no real time and due times are met exactly.
"""

import asyncio

import kopf
import pytest

from ringleader.controller import workqueue
from virtual_clock import run


def test_many_requests_for_one_key_coalesce_into_one_pass():
    async def scenario():
        calls = []

        async def work(key):
            calls.append(key)
            await asyncio.sleep(0.01)

        queue = workqueue.WorkQueue(work)
        for _ in range(20):
            queue.request("a")
        await asyncio.sleep(0.1)
        await queue.close()
        return calls

    assert run(scenario()) == ["a"]


def test_a_request_during_a_pass_gives_exactly_one_more_pass_and_passes_never_overlap():
    async def scenario():
        active, calls, overlaps = 0, 0, 0

        async def work(key):
            nonlocal active, calls, overlaps
            active += 1
            overlaps += active > 1
            calls += 1
            if calls == 1:
                for _ in range(5):
                    queue.request(key)
            await asyncio.sleep(0.02)
            active -= 1

        queue = workqueue.WorkQueue(work)
        queue.request("a")
        await asyncio.sleep(0.2)
        await queue.close()
        return calls, overlaps

    assert run(scenario()) == (2, 0)


def test_at_most_max_concurrent_passes_run_at_once_and_waiting_keys_are_served_in_the_order_they_fell_due():
    async def scenario():
        active, most, started = 0, 0, []

        async def work(key):
            nonlocal active, most
            active += 1
            most = max(most, active)
            started.append(key)
            await asyncio.sleep(1.0)
            active -= 1

        queue = workqueue.WorkQueue(work, max_concurrent=3)
        for i in range(10):
            queue.request(i, delay=i * 0.01)  # fall due in this order
        queue.request("late", delay=0.5)  # due while the first three run: after all the earlier ones
        await asyncio.sleep(0.9)
        running_first = list(started)
        await asyncio.sleep(10)
        await queue.close()
        return most, running_first, started

    most, running_first, started = run(scenario())
    assert most == 3
    assert running_first == [0, 1, 2]
    assert started == list(range(10)) + ["late"]


def test_a_key_forgotten_while_waiting_for_a_slot_is_not_reconciled():
    async def scenario():
        started = []

        async def work(key):
            started.append(key)
            await asyncio.sleep(1.0)

        queue = workqueue.WorkQueue(work, max_concurrent=1)
        queue.request("a")
        await asyncio.sleep(0)
        queue.request("b")
        await asyncio.sleep(0.1)
        queue.forget("b")
        await asyncio.sleep(3)
        await queue.close()
        return started

    assert run(scenario()) == ["a"]


def test_the_answer_of_a_pass_schedules_the_next_one_at_that_time():
    async def scenario():
        loop = asyncio.get_running_loop()
        times = []

        async def work(key):
            times.append(loop.time())
            return 0.2 if len(times) == 1 else None

        queue = workqueue.WorkQueue(work)
        queue.request("a")
        await asyncio.sleep(0.5)
        await queue.close()
        return times

    first, second = run(scenario())
    assert second - first == pytest.approx(0.2)


def test_an_earlier_request_wins_over_a_later_due_time():
    async def scenario():
        loop = asyncio.get_running_loop()
        times = []

        async def work(key):
            times.append(loop.time())
            return 60.0

        queue = workqueue.WorkQueue(work)
        queue.request("a")
        await asyncio.sleep(0.05)
        queue.request("a", delay=0.05)
        await asyncio.sleep(0.2)
        await queue.close()
        return times

    first, second = run(scenario())
    assert second - first == pytest.approx(0.1)  # 0.05 s after the request made 0.05 s after the first pass


def test_a_temporary_error_retries_after_its_delay_and_a_permanent_one_does_not():
    async def scenario(error):
        calls = 0

        async def work(key):
            nonlocal calls
            calls += 1
            if calls == 1:
                raise error

        queue = workqueue.WorkQueue(work)
        queue.request("a")
        await asyncio.sleep(0.2)
        await queue.close()
        return calls

    assert run(scenario(kopf.TemporaryError("pods still terminating", delay=0.05))) == 2
    assert run(scenario(kopf.PermanentError("cannot work"))) == 1


def test_a_repeated_temporary_error_backs_off_doubling_up_to_the_cap_and_every_failure_is_told():
    async def scenario():
        loop = asyncio.get_running_loop()
        times, told, succeeded = [], [], []

        async def work(key):
            times.append(loop.time())
            if len(times) <= 6:
                raise kopf.TemporaryError("forbidden", delay=1.0)

        async def on_failure(key, failure):
            told.append((failure.attempt, failure.retry_in))

        async def on_success(key):
            succeeded.append(key)

        queue = workqueue.WorkQueue(work, max_backoff=10.0, on_failure=on_failure, on_success=on_success)
        queue.request("a")
        await asyncio.sleep(60)
        await queue.close()
        return times, told, succeeded

    times, told, succeeded = run(scenario())
    gaps = [round(b - a, 6) for a, b in zip(times, times[1:])]
    assert gaps == [1.0, 2.0, 4.0, 8.0, 10.0, 10.0]
    assert told == [(1, 1.0), (2, 2.0), (3, 4.0), (4, 8.0), (5, 10.0), (6, 10.0)]
    assert succeeded == ["a"]


def test_a_permanent_error_is_told_with_no_retry():
    async def scenario():
        told = []

        async def work(key):
            raise kopf.PermanentError("cannot work")

        async def on_failure(key, failure):
            told.append((key, str(failure.error), failure.attempt, failure.retry_in))

        queue = workqueue.WorkQueue(work, on_failure=on_failure)
        queue.request("a")
        await asyncio.sleep(1.0)
        await queue.close()
        return told

    assert run(scenario()) == [("a", "cannot work", 1, None)]


def test_unexpected_errors_back_off_and_give_up_after_the_limit_until_the_next_request():
    async def scenario():
        calls, told = 0, []

        async def work(key):
            nonlocal calls
            calls += 1
            raise RuntimeError("bug")

        async def on_failure(key, failure):
            told.append((failure.attempt, failure.retry_in))

        queue = workqueue.WorkQueue(work, error_backoff=0.01, max_errors=3, on_failure=on_failure)
        queue.request("a")
        await asyncio.sleep(0.5)
        stopped_at = calls
        queue.request("a")
        await asyncio.sleep(0.02)
        await queue.close()
        return stopped_at, told, calls

    stopped_at, told, calls = run(scenario())
    assert stopped_at == 4  # the first try, then 3 retries
    assert told[:4] == [(1, 0.01), (2, 0.02), (3, 0.04), (4, None)]  # the last one gives up
    assert calls > stopped_at


def test_a_failing_hook_never_stops_the_queue():
    async def scenario():
        calls = 0

        async def work(key):
            nonlocal calls
            calls += 1
            if calls == 1:
                raise kopf.TemporaryError("blip", delay=0.05)

        async def on_failure(key, failure):
            raise RuntimeError("the API server refused the Event too")

        queue = workqueue.WorkQueue(work, on_failure=on_failure)
        queue.request("a")
        await asyncio.sleep(0.5)
        await queue.close()
        return calls

    assert run(scenario()) == 2


def test_a_forgotten_key_is_not_served_any_more():
    async def scenario():
        calls = []

        async def work(key):
            calls.append(key)
            return 0.05

        queue = workqueue.WorkQueue(work)
        queue.request("a")
        await asyncio.sleep(0.02)
        queue.forget("a")
        await asyncio.sleep(0.2)
        await queue.close()
        return calls

    assert run(scenario()) == ["a"]


@pytest.mark.parametrize("keys", [["a", "b", "c"]])
def test_different_keys_are_served_independently(keys):
    async def scenario():
        started = []

        async def work(key):
            started.append(key)
            await asyncio.sleep(0.1)

        queue = workqueue.WorkQueue(work)
        for key in keys:
            queue.request(key)
        await asyncio.sleep(0.05)
        await queue.close()
        return sorted(started)

    assert run(scenario()) == keys
