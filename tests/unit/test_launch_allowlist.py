"""The environment a local rank may see of the launcher's: an allow-list plus the names the user passes."""

import pytest

from ringleader.launch import allowlist

SHELL = {"PATH": "/usr/bin", "HOME": "/home/me", "LC_CTYPE": "C.UTF-8", "TZ": "UTC",
         "RINGLEADER_TIMEOUT_SECONDS": "30", "HF_HOME": "/cache/hf",
         "MLFLOW_TRACKING_PASSWORD": "pw", "AWS_SECRET_ACCESS_KEY": "key", "GITHUB_TOKEN": "token",
         "MLFLOW_TRACKING_URI": "http://shared:5000", "RANK": "7"}


def test_only_the_allow_list_passes_by_default():
    assert allowlist.selected(SHELL) == {"PATH": "/usr/bin", "HOME": "/home/me", "LC_CTYPE": "C.UTF-8", "TZ": "UTC",
                                           "RINGLEADER_TIMEOUT_SECONDS": "30"}


def test_named_variables_pass_but_never_the_pod_contract():
    selected = allowlist.selected(SHELL, passed=("HF_HOME", "GITHUB_TOKEN", "MLFLOW_TRACKING_URI", "RANK"))
    assert selected["HF_HOME"] == "/cache/hf" and selected["GITHUB_TOKEN"] == "token"
    assert "MLFLOW_TRACKING_URI" not in selected and "RANK" not in selected


@pytest.mark.parametrize("name, refusal", [
    ("HF_HOME", None),
    ("_PRIVATE2", None),
    ("RANK", "--env RANK: the launcher sets the pod contract's variables for each rank"),
    ("RINGLEADER_MLFLOW_RUN_ID", "--env RINGLEADER_MLFLOW_RUN_ID: the launcher sets the pod contract's"),
    ("TOKEN=abc", "--env 'TOKEN=abc' is not a variable name: export NAME=VALUE in the shell, then pass --env NAME"),
    ("2FAST", "--env '2FAST' is not a variable name"),
])
def test_refusals_are_one_line_saying_what_to_do(name, refusal):
    found = allowlist.refusal(name)
    if refusal is None:
        assert found is None
    else:
        assert found.startswith(refusal) and "\n" not in found
