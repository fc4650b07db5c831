"""Credentials inside URIs: found the same way by Python and by the CRD's CEL, masked wherever a URI is shown."""

import re

import pytest

from ringleader.contract import redaction

WITH_CREDENTIALS = {
    "http://alice:s3cret@mlflow:5000": "http://***@mlflow:5000",
    "https://TOKEN123@mlflow.example/": "https://***@mlflow.example/",
    "postgresql://mlflow:pw@db:5432/mlflow": "postgresql://***@db:5432/mlflow",
    "http://a:p@ss@host:5000/x": "http://***@host:5000/x",  # the last '@' of the authority ends the userinfo
    "https://mlflow.example/?token=abc&x=1": "https://mlflow.example/?token=***&x=1",
    "https://mlflow.example/path?x=1&Password=abc#top": "https://mlflow.example/path?x=1&Password=***#top",
    "https://h/?access_token=a&api_key=b&sig=c": "https://h/?access_token=***&api_key=***&sig=***",
}
WITHOUT = ["http://mlflow.ringleader:5000", "sqlite:////tmp/mlflow.db", "sqlite:///mlflow.db?mode=ro",
           "https://mlflow.example/ui/#/experiments/1", "file:///tmp/mlruns", "http://[::1]:5000/api",
           "http://host/a@b"]  # an '@' in the path is no userinfo


@pytest.mark.parametrize("uri, shown", WITH_CREDENTIALS.items())
def test_credentials_in_a_uri_are_masked_and_found(uri, shown):
    assert redaction.redact(uri) == shown
    assert redaction.carries_credentials(uri)
    assert redaction.is_redacted(shown)


@pytest.mark.parametrize("uri", WITHOUT)
def test_a_uri_without_credentials_is_left_as_it_is(uri):
    assert redaction.redact(uri) == uri
    assert not redaction.carries_credentials(uri)
    assert not redaction.is_redacted(uri)


def test_every_uri_in_a_message_is_masked():
    text = "MLflow at http://u:pw@a:5000 failed (retry https://b/?token=t2 later): 503"
    assert redaction.redact(text) == "MLflow at http://***@a:5000 failed (retry https://b/?token=*** later): 503"


def test_redaction_is_idempotent():
    for uri in WITH_CREDENTIALS:
        once = redaction.redact(uri)
        assert redaction.redact(once) == once


def test_the_pattern_is_one_re2_also_reads():
    # CEL's matches() is RE2: no look-around, no backreferences; (?i:...) groups are common ground.
    assert not re.search(r"\(\?[=!<]|\\[1-9]", redaction.CREDENTIALS_PATTERN)
