"""The operator's MLflow credentials leave its environment at startup and go only to its own tracking server.

Two loopback listeners stand in for tracking servers: the operator's (credentials bound to its origin)
and one an experiment names. Real MLflow clients and artifact repositories call both; the listeners
record every request. This also pins the private MLflow API that `credentials.bind` relies on: if
MLflow moves it, `bind` raises and these tests fail.
"""

from __future__ import annotations

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

from ringleader.tracking import credentials

from loopback import Listener

SECRET = "s3cret-operator-token-7f1c"
SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2] / "operator"


@pytest.fixture
def listeners():
    found = [Listener(), Listener()]
    yield found
    for listener in found:
        listener.close()


@pytest.fixture
def restore_mlflow():
    """bind() changes MLflow for the whole process; other tests get it back as it was."""
    from mlflow.store.artifact import artifact_repository_registry as artifacts
    from mlflow.tracking._tracking_service import registry, utils

    tracking_before = dict(utils._tracking_store_registry._registry)
    artifacts_before = dict(artifacts._artifact_repository_registry._registry)
    yield
    utils._tracking_store_registry._registry.clear()
    utils._tracking_store_registry._registry.update(tracking_before)
    artifacts._artifact_repository_registry._registry.clear()
    artifacts._artifact_repository_registry._registry.update(artifacts_before)
    registry.TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
    utils._artifact_repos_cache.clear()
    credentials._bound = credentials.Credentials(None)


def call_like_the_operator(uri: str, tmp_path) -> None:
    """A tracking call and an artifact upload, as the operator makes them (the comparison table)."""
    import mlflow.tracking
    from mlflow.store.artifact import artifact_repository_registry

    assert mlflow.tracking.MlflowClient(tracking_uri=uri).get_experiment_by_name("study") is None
    table = tmp_path / "comparison.txt"
    table.write_text("trial | throughput\n")
    repository = artifact_repository_registry.get_artifact_repository("mlflow-artifacts:/1/run/artifacts",
                                                                      tracking_uri=uri)
    repository.log_artifact(str(table))


def test_only_the_operators_own_server_gets_its_credentials(listeners, restore_mlflow, tmp_path):
    own, other = listeners
    environ = {"MLFLOW_TRACKING_TOKEN": SECRET, "HOME": str(tmp_path)}
    credentials.bind(credentials.take(own.uri, environ, home=tmp_path))

    call_like_the_operator(own.uri, tmp_path)
    call_like_the_operator(other.uri, tmp_path)  # same host, another port: another server

    assert {m for m, _, _, _ in own.requests} >= {"GET", "PUT"}
    assert set(own.authorizations()) == {f"Bearer {SECRET}"}
    assert {m for m, _, _, _ in other.requests} >= {"GET", "PUT"}
    assert set(other.authorizations()) == {None}
    assert not other.saw(SECRET)


def test_username_and_password_are_bound_the_same_way(listeners, restore_mlflow, tmp_path):
    own, other = listeners
    environ = {"MLFLOW_TRACKING_USERNAME": "operator", "MLFLOW_TRACKING_PASSWORD": SECRET}
    credentials.bind(credentials.take(own.uri, environ, home=tmp_path))
    call_like_the_operator(own.uri, tmp_path)
    call_like_the_operator(other.uri.replace("127.0.0.1", "localhost"), tmp_path)
    assert all(a and a.startswith("Basic ") for a in own.authorizations())
    assert set(other.authorizations()) == {None}


def test_credentials_bound_before_mlflow_is_imported_are_routed_by_its_import(listeners, tmp_path):
    """A local command binds first and imports MLflow only once its file is valid (or never, when refused)."""
    own, other = listeners
    script = tmp_path / "bind_then_import.py"
    script.write_text(textwrap.dedent(f"""
        import sys
        from ringleader.tracking import credentials
        token = {{"MLFLOW_TRACKING_TOKEN": "{SECRET}"}}
        credentials.bind(credentials.Credentials(credentials.origin({own.uri!r}), token))
        assert "mlflow" not in sys.modules
        import mlflow.tracking
        for uri in ({own.uri!r}, {other.uri!r}):
            assert mlflow.tracking.MlflowClient(tracking_uri=uri).get_experiment_by_name("study") is None
    """))
    environ = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT), "HOME": str(tmp_path)}
    environ.pop("MLFLOW_TRACKING_TOKEN", None)
    done = subprocess.run([sys.executable, str(script)], env=environ, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-2000:]
    assert set(own.authorizations()) == {f"Bearer {SECRET}"}
    assert own.requests and other.requests and set(other.authorizations()) == {None}


def test_take_empties_the_environment_and_never_shows_the_values(tmp_path):
    environ = {"MLFLOW_TRACKING_TOKEN": SECRET, "MLFLOW_TRACKING_USERNAME": "", "PATH": "/bin"}
    taken = credentials.take("https://MLflow.example", environ, home=tmp_path)
    assert environ == {"PATH": "/bin"}
    assert taken.server == ("https", "mlflow.example", 443)
    assert SECRET not in repr(taken) and "MLFLOW_TRACKING_TOKEN" in repr(taken)
    assert taken.for_uri("https://mlflow.example:443/api") == {"MLFLOW_TRACKING_TOKEN": SECRET}
    assert taken.for_uri("https://mlflow.example.evil/") == {}
    assert taken.for_uri("http://mlflow.example") == {}  # another scheme is another origin


@pytest.mark.parametrize("server, environ, wrong", [
    ("http://op:pw@mlflow:5000", {}, "--tracking-uri http://***@mlflow:5000 carries credentials"),
    (None, {"MLFLOW_TRACKING_TOKEN": SECRET}, "no http(s) tracking server to send them to"),
    ("sqlite:////tmp/mlflow.db", {"MLFLOW_TRACKING_PASSWORD": SECRET}, "no http(s) tracking server"),
])
def test_credentials_that_could_only_leak_stop_the_operator_with_one_line(server, environ, wrong, tmp_path):
    with pytest.raises(credentials.CredentialsError) as caught:
        credentials.take(server, environ, home=tmp_path)
    message = str(caught.value)
    assert wrong in message and "\n" not in message and SECRET not in message and "pw" not in message


def test_a_credentials_file_that_mlflow_would_send_everywhere_is_refused(tmp_path):
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text(f"[mlflow]\nmlflow_tracking_password = {SECRET}\n")
    with pytest.raises(credentials.CredentialsError, match="remove it"):
        credentials.take("http://mlflow:5000", {}, home=tmp_path)


def test_the_users_credentials_file_is_bound_to_the_server_the_user_named_only(tmp_path, monkeypatch):
    (tmp_path / ".mlflow").mkdir()
    (tmp_path / ".mlflow" / "credentials").write_text("[mlflow]\nmlflow_tracking_username = me\n"
                                                       "mlflow_tracking_password = pw-from-file\n")
    monkeypatch.setenv("HOME", str(tmp_path))
    environ = {"MLFLOW_TRACKING_TOKEN": "tok", "OTHER": "kept"}

    taken = credentials.take_users("https://mine.example:8443/mlflow", environ)

    assert environ == {"OTHER": "kept"}
    assert taken.for_uri("https://mine.example:8443/api") == {
        "MLFLOW_TRACKING_TOKEN": "tok", "MLFLOW_TRACKING_USERNAME": "me", "MLFLOW_TRACKING_PASSWORD": "pw-from-file"}
    assert taken.for_uri("https://theirs.example:8443/api") == {}
    assert credentials.take_users(None, {"MLFLOW_TRACKING_TOKEN": "tok"}).for_uri("https://mine.example:8443") == {}
