"""MLflow credentials held apart from the environment and sent only to the server they belong to.

MLflow reads MLFLOW_TRACKING_USERNAME, _PASSWORD and _TOKEN (and ~/.mlflow/credentials) from the
process for every HTTP call, whatever the host: a process that kept them in its environment would
hand them to any `spec.tracking.uri` an experiment names. So `take` (the operator, at startup in
controller.cli) and `take_users` (every local command, in ringleader.cli before MLflow is used) move
them out of the environment once, and `bind` makes every HTTP tracking store and artifact repository
MLflow builds in the process ask `host_creds`, which gives them to the origin (scheme, host and port)
of the one server they belong to and to nothing else: the operator's configured server, or the
server the user named (`--tracking-uri`, else MLFLOW_TRACKING_URI), never one an experiment file names.
"""

from __future__ import annotations

import dataclasses
import functools
import importlib.abc
import importlib.util
import os
import pathlib
import sys
import urllib.parse
from typing import MutableMapping

from ringleader.contract import redaction

VARIABLES = ("MLFLOW_TRACKING_USERNAME", "MLFLOW_TRACKING_PASSWORD", "MLFLOW_TRACKING_TOKEN",
             "MLFLOW_TRACKING_AUTH", "MLFLOW_TRACKING_AWS_SIGV4", "MLFLOW_TRACKING_CLIENT_CERT_PATH")
"""The variables MLflow turns into credentials of a request (MlflowHostCreds): the operator's, bound to its server."""
DEFAULT_PORTS = {"http": 80, "https": 443}

Origin = tuple[str, str, int]


class CredentialsError(ValueError):
    """The operator's credentials cannot be kept to its server; the message says what to change."""


def origin(uri: str | None) -> Origin | None:
    """(scheme, host, port) of an http(s) URI, lower-cased, default port filled in; None for any other URI."""
    if not uri:
        return None
    try:
        parts = urllib.parse.urlsplit(uri)
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in DEFAULT_PORTS or not parts.hostname:
        return None
    return scheme, parts.hostname.lower(), port or DEFAULT_PORTS[scheme]


@dataclasses.dataclass(frozen=True)
class Credentials:
    """MLflow credential variables, bound to the one server they belong to."""

    server: Origin | None
    values: dict[str, str] = dataclasses.field(default_factory=dict, repr=False)

    def __repr__(self) -> str:  # names, never values
        return f"Credentials(server={self.server!r}, variables={sorted(self.values)!r})"

    def for_uri(self, uri: str) -> dict[str, str]:
        """The variables that go with a request to `uri`: all of them for the bound server, none elsewhere."""
        bound = self.server is not None and origin(uri) == self.server
        return dict(self.values) if bound else {}


def take(server_uri: str | None, environ: MutableMapping[str, str] = os.environ,
         home: pathlib.Path | None = None) -> Credentials:
    """Remove MLflow's credential variables from `environ` and bind them to `server_uri`'s origin.

    Raises CredentialsError when they could only leak: credentials written into `server_uri` (they would
    reach every pod's environment), credentials without an http(s) server to go to, or a
    ~/.mlflow/credentials file (MLflow reads it for every host, and no variable can turn that off)."""
    if server_uri and redaction.carries_credentials(server_uri):
        raise CredentialsError(
            f"--tracking-uri {redaction.redact(server_uri)} carries credentials, which would reach every training pod: "
            "give the operator MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD (or MLFLOW_TRACKING_TOKEN) "
            "instead (chart: tracking.credentialsSecret)")
    values = {name: environ.pop(name) for name in VARIABLES if name in environ}
    values = {name: value for name, value in values.items() if value}
    server = origin(server_uri)
    if values and server is None:
        raise CredentialsError(
            f"{', '.join(sorted(values))} set, but the operator has no http(s) tracking server to send them to "
            "(--tracking-uri): unset them, or set --tracking-uri to the server they belong to")
    credentials_file = (home or pathlib.Path.home()) / ".mlflow" / "credentials"
    if credentials_file.exists():
        raise CredentialsError(
            f"{credentials_file} exists: MLflow would send it to every tracking server an experiment names; "
            "remove it and give the operator MLFLOW_TRACKING_USERNAME and MLFLOW_TRACKING_PASSWORD "
            "(or MLFLOW_TRACKING_TOKEN) instead")
    return Credentials(server, values)


def take_users(chosen_uri: str | None, environ: MutableMapping[str, str] = os.environ) -> Credentials:
    """The user's credentials (variables, and ~/.mlflow/credentials' username and password), removed from
    `environ` and bound to the server the user chose: `chosen_uri`, which is --tracking-uri or else
    MLFLOW_TRACKING_URI, never an experiment file's. Nothing chosen or not http(s): they go nowhere."""
    values = {name: environ.pop(name) for name in VARIABLES if name in environ}
    values = {name: value for name, value in values.items() if value}
    if not (pathlib.Path.home() / ".mlflow" / "credentials").exists():  # and MLflow stays unimported for now
        return Credentials(origin(chosen_uri), values)
    from mlflow.utils import credentials as mlflow_credentials  # the file, read as MLflow itself reads it

    from_file = mlflow_credentials.read_mlflow_creds()
    if from_file.username and from_file.password and "MLFLOW_TRACKING_USERNAME" not in values:
        values.update(MLFLOW_TRACKING_USERNAME=from_file.username, MLFLOW_TRACKING_PASSWORD=from_file.password)
    return Credentials(origin(chosen_uri), values)


def withheld_from(uri: str) -> list[str]:
    """The names of the bound credentials that a request to `uri` goes without (an http(s) server not theirs)."""
    if origin(uri) is None or _bound.for_uri(uri):
        return []
    return sorted(_bound.values)


_bound = Credentials(None)


def host_creds(uri: str):
    """The MlflowHostCreds of a request to `uri`: the bound credentials at their server, none elsewhere.

    TLS settings (MLFLOW_TRACKING_INSECURE_TLS, _SERVER_CERT_PATH) are not secrets and apply to every host."""
    from mlflow import environment_variables as variables
    from mlflow.utils import rest_utils

    values = _bound.for_uri(uri)
    return rest_utils.MlflowHostCreds(
        host=uri,
        username=values.get("MLFLOW_TRACKING_USERNAME"),
        password=values.get("MLFLOW_TRACKING_PASSWORD"),
        token=values.get("MLFLOW_TRACKING_TOKEN"),
        auth=values.get("MLFLOW_TRACKING_AUTH"),
        aws_sigv4=values.get("MLFLOW_TRACKING_AWS_SIGV4", "").lower() in ("true", "1"),
        client_cert_path=values.get("MLFLOW_TRACKING_CLIENT_CERT_PATH"),
        ignore_tls_verification=variables.MLFLOW_TRACKING_INSECURE_TLS.get(),
        server_cert_path=variables.MLFLOW_TRACKING_SERVER_CERT_PATH.get(),
    )


def bind(credentials: Credentials) -> None:
    """From now on, MLflow's HTTP calls in this process carry `credentials` to their server only.

    Where MLflow is not imported yet, its import does the routing, whoever imports it: a local command that
    refuses its file does so without the seconds MLflow's import costs. Until then the credentials are out of
    the environment, so nothing MLflow builds can carry them anywhere."""
    global _bound
    _bound = credentials
    if "mlflow" in sys.modules:
        _route_mlflow_credentials_through(host_creds)
    elif not any(isinstance(finder, _RouteOnImport) for finder in sys.meta_path):
        sys.meta_path.insert(0, _RouteOnImport())


class _RouteOnImport(importlib.abc.MetaPathFinder):
    """Finds `mlflow` as the other finders do, and routes its credentials once its package has run."""

    def find_spec(self, name, path=None, target=None):
        if name != "mlflow":
            return None
        sys.meta_path.remove(self)
        import ringleader.tracking  # noqa: F401 - its telemetry opt-out must precede MLflow's import
        spec = importlib.util.find_spec(name)
        if spec is not None and spec.loader is not None:
            run_package = spec.loader.exec_module

            def exec_module(module) -> None:
                run_package(module)
                _route_mlflow_credentials_through(host_creds)

            spec.loader.exec_module = exec_module
        return spec


def _route_mlflow_credentials_through(get_host_creds) -> None:
    """Make MLflow's HTTP tracking stores and artifact repositories take their credentials from `get_host_creds(uri)`.

    The one use of MLflow's private API in ringleader (MLflow 3.x): the scheme registries that its own
    plugins use, and the two credential properties of its HTTP artifact repositories. MLflow offers no
    public way to give a client explicit credentials; tests/unit/test_mlflow_credentials.py fails if
    any of these moves."""
    import ringleader.tracking  # noqa: F401 - first: its telemetry opt-out must precede MLflow's import
    from mlflow.store.artifact import artifact_repository_registry as artifact_registry
    from mlflow.store.artifact import http_artifact_repo, mlflow_artifacts_repo
    from mlflow.store.tracking import rest_store
    from mlflow.tracking._tracking_service import registry as tracking_registry
    from mlflow.tracking._tracking_service import utils as tracking_utils

    class HttpArtifacts(http_artifact_repo.HttpArtifactRepository):
        @property
        def _host_creds(self):
            return get_host_creds(self.artifact_uri)

    class MlflowArtifacts(mlflow_artifacts_repo.MlflowArtifactsRepository):
        @property
        def _host_creds(self):
            return get_host_creds(self.artifact_uri)

        @property
        def _artifact_server_host_creds(self):
            # As MLflow's own: the server's root, without the artifact service's path.
            return get_host_creds(
                self.artifact_uri.partition(mlflow_artifacts_repo._ARTIFACTS_SERVICE_ROOT)[0].rstrip("/"))

    def build_rest_store(store_uri, **_):
        return rest_store.RestStore(functools.partial(get_host_creds, store_uri))

    for scheme in ("http", "https"):
        tracking_utils._tracking_store_registry.register(scheme, build_rest_store)
        artifact_registry._artifact_repository_registry.register(scheme, HttpArtifacts)
    artifact_registry._artifact_repository_registry.register("mlflow-artifacts", MlflowArtifacts)
    # Stores and repositories built before this point took their credentials from the environment.
    tracking_registry.TrackingStoreRegistry._get_store_with_resolved_uri.cache_clear()
    tracking_utils._artifact_repos_cache.clear()
