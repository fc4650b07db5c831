"""The operator's settings: flags first, then RINGLEADER_* variables, then documented defaults; read once."""

import argparse

import pytest

from ringleader.controller import settings


def parse(argv, environ=None):
    parser = argparse.ArgumentParser()
    settings.add_arguments(parser, environ or {})
    return settings.from_args(parser.parse_args(argv))


def test_without_flags_or_variables_the_defaults_apply_and_the_operator_is_cluster_wide():
    found = parse([])
    assert found == settings.Settings()
    assert found.scope.namespaces == ()


def test_variables_are_read_when_no_flag_is_given_and_flags_win():
    environ = {"RINGLEADER_NAMESPACES": "a,b", "RINGLEADER_TRACKING_URI": "http://mlflow:5000",
               "RINGLEADER_PROGRESS_POLL_INTERVAL": "3", "RINGLEADER_POD_GROUPS": "true"}
    from_env = parse([], environ)
    assert (from_env.scope.namespaces, from_env.tracking.default_uri) == (("a", "b"), "http://mlflow:5000")
    assert (from_env.timing.progress_poll_seconds, from_env.pods.pod_groups) == (3.0, True)
    assert parse(["-n", "c", "--no-pod-groups"], environ).scope.namespaces == ("c",)
    assert parse(["--no-pod-groups"], environ).pods.pod_groups is False


def test_gpu_tolerations_are_a_json_list():
    found = parse(["--gpu-tolerations", '[{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}]'])
    assert found.pods.render.gpu_tolerations == ({"key": "nvidia.com/gpu", "operator": "Exists",
                                                  "effect": "NoSchedule"},)
    with pytest.raises(SystemExit):
        parse(["--gpu-tolerations", '{"key": 1}'])


def test_liveness_can_be_turned_off_and_intervals_must_be_positive():
    assert parse(["--liveness", "none"]).liveness_endpoint is None
    with pytest.raises(SystemExit):
        parse(["--progress-poll-interval", "0"])


def test_api_concurrency_is_a_whole_number_of_calls_from_a_flag_or_variable(capsys):
    assert parse([]).api.concurrency == 32
    assert parse([], {"RINGLEADER_API_CONCURRENCY": "8"}).api.concurrency == 8
    assert parse(["--api-concurrency", "64"], {"RINGLEADER_API_CONCURRENCY": "8"}).api.concurrency == 64
    for wrong, says in (("0", "must be greater than or equal to 1, got 0"), ("2.5", "must be a whole number, got 2.5")):
        with pytest.raises(SystemExit):
            parse(["--api-concurrency", wrong])
        assert says in capsys.readouterr().err


def test_concurrent_reconciles_are_a_whole_number_of_experiments_from_a_flag_or_variable(capsys):
    assert parse([]).api.reconciles == 48
    assert parse([], {"RINGLEADER_MAX_CONCURRENT_RECONCILES": "4"}).api.reconciles == 4
    assert (parse(["--max-concurrent-reconciles", "64"], {"RINGLEADER_MAX_CONCURRENT_RECONCILES": "4"}).api.reconciles
            == 64)
    with pytest.raises(SystemExit):
        parse(["--max-concurrent-reconciles", "0"])
    assert "must be greater than or equal to 1, got 0" in capsys.readouterr().err


def test_the_operator_calls_only_its_own_tracking_server_unless_more_are_allowed():
    own = parse(["--tracking-uri", "http://mlflow:5000"]).tracking
    assert own.allowed_uris == ()
    assert own.allows("http://mlflow:5000") and own.allows("http://mlflow:5000/")
    assert not own.allows("http://127.0.0.1:8080")
    assert not own.allows("http://mlflow:50001")  # a prefix ends at a boundary
    assert not own.allows("sqlite:////var/run/operator.db")
    assert not parse([]).tracking.allows("http://mlflow:5000")  # no server configured: none at all

    environ = {"RINGLEADER_TRACKING_ALLOWED_URIS": "https://mlflow.team-a.example,http://10.0.0.7:5000/"}
    more = parse(["--tracking-uri", "http://mlflow:5000"], environ).tracking
    assert more.allowed_uris == ("https://mlflow.team-a.example", "http://10.0.0.7:5000/")
    assert more.allows("https://mlflow.team-a.example/mlflow") and more.allows("http://10.0.0.7:5000/x")
    assert not more.allows("https://mlflow.team-a.example.evil.net")
    flags = parse(["--tracking-allowed-uri", "http://b:5000", "--tracking-allowed-uri", "http://c:5000"], environ)
    assert flags.tracking.allowed_uris == ("http://b:5000", "http://c:5000")


def test_an_allowed_uri_with_credentials_is_refused_in_one_line():
    with pytest.raises(ValueError) as caught:
        parse(["--tracking-allowed-uri", "http://u:pw@b:5000"])
    assert str(caught.value).startswith("--tracking-allowed-uri http://***@b:5000 carries credentials")
    assert "pw" not in str(caught.value)


def test_the_pod_event_delay_is_a_second_by_default_may_be_zero_and_never_negative(capsys):
    assert parse([]).timing.pod_event_delay_seconds == 1.0
    assert parse([], {"RINGLEADER_POD_EVENT_DELAY": "0.25"}).timing.pod_event_delay_seconds == 0.25
    assert parse(["--pod-event-delay", "0"]).timing.pod_event_delay_seconds == 0.0
    with pytest.raises(SystemExit):
        parse(["--pod-event-delay", "-1"])
    assert "must be greater than or equal to 0, got -1" in capsys.readouterr().err
