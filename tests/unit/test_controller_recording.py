"""The operator's MLflow calls: only to servers its settings allow, and failures quoted in one short, redacted line."""

import asyncio

import pytest

from ringleader.controller import recording
from ringleader.controller import settings as settings_

OWN = "http://mlflow:5000"


def recorder(**overrides) -> recording.Recorder:
    return recording.Recorder(settings_.MlflowSettings(default_uri=OWN, timeout_seconds=120, **overrides))


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
