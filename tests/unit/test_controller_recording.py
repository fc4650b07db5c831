"""The operator's MLflow calls: only to servers its settings allow, and failures quoted in one short, redacted line."""

import asyncio

import pytest

from ringleader.controller import recording
from ringleader.controller import settings as settings_

OWN = "http://mlflow:5000"


def recorder(**overrides) -> recording.MlflowCalls:
    return recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=120, **overrides))


def test_an_experiment_naming_another_server_is_refused_with_the_fix():
    found = recorder()
    assert found.refusal(None) is None and found.refusal(OWN) is None
    message = found.refusal("http://127.0.0.1:9999")
    assert message.startswith("`tracking.uri` http://127.0.0.1:9999 is not a tracking server this operator may call")
    assert "tracking.allowedUris" in message and f"remove it to record into the operator's server {OWN}" in message
    assert recorder(allowed_uris=("http://127.0.0.1:9999",)).refusal("http://127.0.0.1:9999/") is None


def test_a_server_that_is_not_allowed_is_never_called():
    found = recorder()
    called = []
    with pytest.raises(recording.Unavailable, match="not a tracking server this operator may call"):
        asyncio.run(found._call("http://169.254.169.254", "create experiment", called.append))
    found.close()
    assert called == []


def test_a_failure_is_quoted_in_its_first_line_redacted_and_short():
    def fail(_runs):
        raise RuntimeError(f"reply from http://u:pw@mlflow:5000/x?token=t0k: {'x' * 500}\nsecond line: pw t0k")

    found = recorder(allowed_uris=("http://other:5000",))
    with pytest.raises(recording.Unavailable) as caught:
        asyncio.run(found._call("http://other:5000", "create experiment", fail))
    found.close()
    message = str(caught.value)
    assert "\n" not in message and "pw" not in message and "t0k" not in message
    assert "http://***@mlflow:5000/x?token=***" in message
    assert len(message) < 300


def test_loading_the_mlflow_client_is_not_counted_against_a_calls_timeout():
    """On a cold, busy node importing mlflow can take longer than a call may; the first experiments must
    still get their runs (else their pods start with no run to log into)."""
    import time
    import types

    # Sleeping guarantees the load outlasts the timeout; the call itself is instant, with a second to spare on
    # a busy machine.
    def slow_load():
        time.sleep(1.2)
        return types.SimpleNamespace(answer=lambda: "run-1")

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=1.0), load_runs=slow_load)
    try:
        assert asyncio.run(found._call(OWN, "create run", lambda runs: runs.answer())) == "run-1"
        assert found.retry_in(OWN) is None
    finally:
        found.close()


def test_a_call_that_outlives_its_timeout_leaves_the_server_alone_until_the_retry():
    import time

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=0.2, retry_seconds=30),
                               load_runs=lambda: None)
    try:
        with pytest.raises(recording.Unavailable, match=r"create run failed: no answer within 0.2s"):
            asyncio.run(found._call(OWN, "create run", lambda _runs: time.sleep(0.5)))
        assert found.retry_in(OWN) > 25
    finally:
        found.close()


def test_a_client_that_cannot_be_loaded_leaves_experiments_running_without_mlflow():
    def broken():
        raise ImportError("No module named 'mlflow'")

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN), load_runs=broken)
    try:
        with pytest.raises(recording.Unavailable, match="the MLflow client cannot be loaded: No module named 'mlflow'"):
            asyncio.run(found._call(OWN, "create experiment", lambda runs: runs))
    finally:
        found.close()


def test_a_call_waiting_for_a_thread_is_timed_from_when_it_runs_not_from_when_it_was_asked():
    """Three 0.6 s calls on two threads, 1 s each allowed: the third waits 0.6 s for a thread and still
    answers in time. Counting the wait (1.2 s and more: sleeps never end early) would mark MLflow down and
    start pods without their runs; a call is 0.4 s under its timeout, room for a busy machine."""
    import time

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=1.0),
                                  load_runs=lambda: None)

    async def three():
        return await asyncio.gather(*(found._call(OWN, f"call {i}", lambda _runs, i=i: time.sleep(0.6) or i)
                                      for i in range(3)))
    try:
        assert asyncio.run(three()) == [0, 1, 2]
        assert found.retry_in(OWN) is None
    finally:
        found.close()


def test_slow_work_has_its_own_thread_so_runs_are_created_meanwhile():
    import threading

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=1), load_runs=lambda: None)
    release = threading.Event()

    async def both():
        reports = [asyncio.ensure_future(found._call(OWN, "attach the report", lambda _runs: release.wait(5),
                                                     timeout=10, slow=True)) for _ in range(2)]
        created = await asyncio.gather(*(found._call(OWN, f"create run {i}", lambda _runs, i=i: i) for i in range(3)))
        release.set()
        await asyncio.gather(*reports)
        return created
    try:
        assert asyncio.run(both()) == [0, 1, 2]
    finally:
        found.close()


def test_slow_work_that_fails_leaves_the_server_to_the_quick_calls():
    """A scan for deleted experiments' runs that times out on a fresh server must not make the runs of the
    trials starting now skip MLflow; the scan retries on its own schedule."""
    import time

    found = recording.MlflowCalls(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=0.2, retry_seconds=30),
                               load_runs=lambda: None)
    try:
        with pytest.raises(recording.Unavailable, match="find open sweep runs failed: no answer within 0.2s"):
            asyncio.run(found._call(OWN, "find open sweep runs", lambda _runs: time.sleep(0.5), slow=True))
        assert found.retry_in(OWN) is None
        assert asyncio.run(found._call(OWN, "create run", lambda _runs: "run-1")) == "run-1"
    finally:
        found.close()


def test_status_links_the_ui_url_when_one_is_set_else_the_tracking_server():
    # A laptop reaches the in-cluster server through `kubectl port-forward` on localhost: tracking.uiUrl says so.
    forwarded = recorder(ui_url="http://localhost:5000")
    assert forwarded.ui_url(OWN, "4") == "http://localhost:5000/#/experiments/4?workflowType=machine_learning"
    assert forwarded.report_url(OWN, "4", "abc").startswith("http://localhost:5000/#/experiments/4/runs/abc")
    assert recorder().ui_url(OWN, "4") == f"{OWN}/#/experiments/4?workflowType=machine_learning"
    assert recorder().ui_url("sqlite:///m.db", "4") is None


def test_the_store_under_a_call_tries_once_and_gives_up_within_the_calls_timeout():
    """One retry owner: the reconciler retries after retry_seconds, so no call's thread outlives its timeout
    retrying on its own."""
    settings = recording.call_settings(10.0)
    assert (settings.attempts, settings.http_timeout_seconds) == (1, 10)
    assert recording.call_settings(0.3).http_timeout_seconds == 1  # MLflow takes whole seconds
