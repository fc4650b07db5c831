"""The operator's settings: one grouped object read once at startup from flags and RINGLEADER_* variables; used by every
handler.

Each field says its unit and why its default was chosen. `add_arguments` declares the flags (the Helm
chart passes them as container args); `from_args` builds the frozen Settings once, in `cli.run`.
Nothing else in the controller reads the environment.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
from typing import Any, Mapping

from ringleader.contract import redaction
from ringleader.controller import trials
from ringleader.topology import settings as render_settings


@dataclasses.dataclass(frozen=True)
class ScopeSettings:
    namespaces: tuple[str, ...] = ()
    """Namespaces the operator watches. Empty (default): the whole cluster, which needs a ClusterRole;
    one or more: only those, with a Role in each (the chart's single-namespace mode)."""


@dataclasses.dataclass(frozen=True)
class PodSettings:
    render: render_settings.RenderSettings = render_settings.RenderSettings()
    """How training pods are rendered where an experiment says nothing (image, pull policy, GPU resource and
    tolerations, disk, user, templates, scheduler names): the same settings, and flags, as `ringleader render`."""
    pod_groups: bool = False
    """Whether PodGroups may be created (`scheduling.gang` Volcano or SchedulerPlugins). Off by default: it
    needs a gang scheduler (Volcano or scheduler-plugins) and RBAC on podgroups, which the chart grants only
    when enabled."""
    kueue: bool = False
    """Whether experiments may name a Kueue LocalQueue (`scheduling.queueName`), each trial then waiting for
    Kueue to admit its Workload. Off by default: it needs Kueue installed and RBAC on its workloads, which the
    chart grants only when enabled."""
    admit_by_capacity: bool = True
    """Whether the operator creates a trial's pods only once they fit the nodes' free capacity together, where no
    gang scheduler or Kueue admits them (`admitter.py`). On by default: pods scheduled one by one let a burst
    half-start trials, a pod holding a node while its peer waits. Takes effect in cluster-wide mode only, which
    the chart grants list on nodes; in namespace mode pods are created as before."""


@dataclasses.dataclass(frozen=True)
class MlflowSettings:
    default_uri: str | None = None
    """MLflow tracking URI of experiments that set no `spec.tracking.uri`. None (default): such
    experiments are not recorded; the chart sets it to its in-cluster MLflow when that is enabled."""
    ui_url: str | None = None
    """Base URL people open for the MLflow UI (status.mlflow.url). Default: the tracking URI when it is
    http(s), which is right for port-forwarding; set it when an Ingress serves the UI."""
    timeout_seconds: float = 10.0
    """Longest wait for one tracking call, in seconds. 10 s: a healthy server answers in milliseconds,
    and an operator waiting longer delays other experiments' transitions."""
    retry_seconds: float = 30.0
    """After a failed tracking call, seconds before the server is tried again. 30 s: an outage is not
    hammered, and a restarted server is picked up within a minute."""
    allowed_uris: tuple[str, ...] = ()
    """URI prefixes of tracking servers, besides `default_uri`, that experiments may name in
    `spec.tracking.uri` and the operator will call. None (default): an experiment is recorded only on
    the operator's own server, since any other URI makes the operator send requests wherever the
    experiment's author points it (SSRF). A prefix matches up to a '/', '?' or '#' boundary, so
    "https://mlflow.team-a.example" does not match "https://mlflow.team-a.example.evil"."""

    def allows(self, uri: str) -> bool:
        """Whether the operator may call the tracking server at `uri`."""
        return any(_within(uri, prefix) for prefix in (self.default_uri, *self.allowed_uris) if prefix)


@dataclasses.dataclass(frozen=True)
class ApiSettings:
    concurrency: int = 32
    """Kubernetes API calls in flight at once (threads, and connections kept open). 32: a 512-worker trial's
    pods are created in about a second (a create takes ~10 ms of the API server's time, so 32 keep it busy
    without queueing at the operator), and 32 idle threads cost about 2 MB. Lower it to spare a small API server."""
    reconciles: int = 48
    """Experiments reconciled at once; the others wait their turn, first due first served. Unbounded, 1000
    experiments created together shared the operator's one core among 1000 passes, so most got their pods
    near the end, each holding its rendered objects meanwhile (406-430 MB). 48 keeps the API calls' threads
    busy while passes wait on answers: of 8 to 128 it gave the best median burst (docs/performance.md)."""


@dataclasses.dataclass(frozen=True)
class TimingSettings:
    progress_poll_seconds: float = 15.0
    """How often a running trial's progress is read, in seconds: one pods/log call per trial (its lowest-ranked
    worker's `progress:` line), whatever its number of workers. 15 s keeps `kubectl get dte` fresh at about
    0.07 calls per second per running trial."""
    progress_start_poll_seconds: float = 2.0
    """How often a running trial's progress is read until its first progress line shows, in seconds, for at most
    `progress_start_window_seconds`: the worker prints its first line about 5 s into training
    (contract/progress.py), so the status moves within ~7 s of the first iterations, not up to a poll interval
    later. A trial that already printed one (every trial of a steady state) is read every poll interval."""
    progress_start_window_seconds: float = 120.0
    """How long after a trial is first seen running its log is read every `progress_start_poll_seconds` while it
    shows no progress line, in seconds. 120 s holds the ranks' imports, rendezvous and model build on small CPU
    requests (30-40 s on 250m); it bounds the cost of a trial that never prints one to 60 extra reads."""
    max_progress_backoff_seconds: float = 600.0
    """Longest pause between tries of a log that cannot be read, in seconds. An unreadable log (no node serves
    it, the kubelet is away) is tried again after the poll interval, doubled per failure in a row up to this:
    10 minutes, so a cluster whose kubelets never serve logs is not asked every interval, and a log that
    comes back is read again within minutes."""
    recheck_seconds: float = 300.0
    """Longest time without a full pass while waiting on pods (terminating or pending) or while a trial runs, in
    seconds: pod watch events wake the operator (within `pod_event_delay_seconds`), and a running trial's progress
    is read apart; this only bounds the harm of a lost watch event (kopf resumes a watch from its last
    resourceVersion and relists after a gap, so losing one takes a stalled connection). 5 minutes: full passes
    of running experiments every minute cost a third of the operator's steady-state CPU (docs/performance.md)."""
    startup_deadline_seconds: float = trials.DEFAULT_STARTUP_DEADLINE_SECONDS
    """How long a trial's pod may take from its creation until it runs, in seconds, where the experiment sets no
    runPolicy.startupDeadlineSeconds; past it the trial fails (StartupDeadlineExceeded). Why 300: see
    `trials.DEFAULT_STARTUP_DEADLINE_SECONDS`. Raise it for images that take longer to pull, or on a busy cluster
    without Kueue, where pods may wait for CPU longer than that."""
    capacity_retry_seconds: float = trials.DEFAULT_CAPACITY_RETRY_SECONDS
    """How soon a trial waiting for free capacity (reason WaitingForCapacity) is judged again, in seconds. No event
    says that capacity was freed (another experiment's pods, or anyone's, ending), so waiting trials look again on a
    timer: 5 s starts them within seconds of the room freeing, at one pass per waiting experiment per interval."""
    pod_event_delay_seconds: float = 1.0
    """Seconds from a trial pod's event to the pass it asks for. Pods change together (a trial's are created,
    scheduled, started and finished within moments), so the events of that second share one pass instead of
    each asking for its own; status and Events lag by at most this. 0 passes at once."""
    error_backoff_seconds: float = 5.0
    """First delay after an unexpected error in a reconcile, in seconds, doubled per consecutive error."""
    max_error_backoff_seconds: float = 600.0
    """Longest delay between retries of a failing reconcile, in seconds. A retried error's delay doubles per
    failure in a row (a 403 from 60 s, an unreachable API server from 5 s) up to 10 minutes: an error that
    needs an administrator is not hammered, and a fix is still picked up within minutes."""
    max_error_retries: int = 8
    """Consecutive unexpected errors after which an experiment is left alone until its next change or pod
    event (with a warning Event), instead of retrying forever. 8 doublings of 5 s span about 20 minutes."""


@dataclasses.dataclass(frozen=True)
class Settings:
    """Everything the operator is told at startup, grouped by concern."""

    scope: ScopeSettings = ScopeSettings()
    pods: PodSettings = PodSettings()
    tracking: MlflowSettings = MlflowSettings()
    api: ApiSettings = ApiSettings()
    timing: TimingSettings = TimingSettings()
    liveness_endpoint: str | None = "http://0.0.0.0:8080/healthz"
    """kopf's liveness endpoint, probed by the Deployment. None disables it (tests, local runs)."""
    standalone: bool = True
    """Run without kopf peering: the chart runs exactly one replica with strategy Recreate, so peering's
    extra CRD and its RBAC buy nothing."""


def _within(uri: str, prefix: str) -> bool:
    return uri.startswith(prefix) and (len(uri) == len(prefix) or prefix[-1] in "/?#" or uri[len(prefix)] in "/?#")


def _without_credentials(uris: tuple[str, ...]) -> tuple[str, ...]:
    for uri in uris:
        if redaction.carries_credentials(uri):
            raise ValueError(f"--tracking-allowed-uri {redaction.redact(uri)} carries credentials: the operator sends "
                             "none to those servers (the experiments' pods use their own credentialsSecret); "
                             "remove them")
    return uris


def _env(environ: Mapping[str, str], name: str, default: Any = None) -> Any:
    value = environ.get(f"RINGLEADER_{name}")
    return default if value in (None, "") else value


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a whole number, got {text}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be greater than or equal to 1, got {text}")
    return value


def _positive(text: str) -> float:
    value = float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"must be greater than 0, got {text}")
    return value


def _not_negative(text: str) -> float:
    value = float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be greater than or equal to 0, got {text}")
    return value


def add_arguments(parser: argparse.ArgumentParser, environ: Mapping[str, str] = os.environ) -> None:
    """Declare the operator's flags; each defaults to its RINGLEADER_* variable, then to Settings' default."""
    defaults = Settings()
    env_namespaces = [n for n in _env(environ, "NAMESPACES", "").split(",") if n]
    parser.add_argument("--namespace", "-n", dest="namespaces", action="append", default=None,
                        help="watch only this namespace (repeatable; RINGLEADER_NAMESPACES, comma-separated). "
                             f"Default: cluster-wide{f' (env: {env_namespaces})' if env_namespaces else ''}")
    parser.set_defaults(env_namespaces=env_namespaces)
    render_settings.add_arguments(parser, environ)
    parser.add_argument("--pod-groups", action=argparse.BooleanOptionalAction,
                        default=_env(environ, "POD_GROUPS", "false").lower() == "true",
                        help="allow PodGroups for gang schedulers (RINGLEADER_POD_GROUPS)")
    parser.add_argument("--kueue", action=argparse.BooleanOptionalAction,
                        default=_env(environ, "KUEUE", "false").lower() == "true",
                        help="allow scheduling.queueName: trials admitted by Kueue Workloads (RINGLEADER_KUEUE)")
    parser.add_argument("--admit-by-capacity", action=argparse.BooleanOptionalAction,
                        default=_env(environ, "ADMIT_BY_CAPACITY", "true").lower() == "true",
                        help="create a trial's pods only once all fit the nodes' free capacity, where no gang "
                             "scheduler or Kueue admits them; cluster-wide mode only (RINGLEADER_ADMIT_BY_CAPACITY)")
    parser.add_argument("--tracking-uri", default=_env(environ, "TRACKING_URI", defaults.tracking.default_uri),
                        help="MLflow tracking URI of experiments that set none (RINGLEADER_TRACKING_URI)")
    env_allowed = [u for u in _env(environ, "TRACKING_ALLOWED_URIS", "").split(",") if u]
    parser.add_argument("--tracking-allowed-uri", dest="tracking_allowed_uris", action="append", default=None,
                        metavar="URI_PREFIX",
                        help="a tracking server experiments may name in spec.tracking.uri, besides --tracking-uri "
                             "(repeatable; RINGLEADER_TRACKING_ALLOWED_URIS, comma-separated). Default: none")
    parser.set_defaults(env_tracking_allowed_uris=env_allowed)
    parser.add_argument("--tracking-ui-url", default=_env(environ, "TRACKING_UI_URL", defaults.tracking.ui_url),
                        help="base URL of the MLflow UI shown in status.mlflow.url (RINGLEADER_TRACKING_UI_URL)")
    parser.add_argument("--tracking-timeout", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "TRACKING_TIMEOUT", defaults.tracking.timeout_seconds)),
                        help="longest wait for the answer to one MLflow call, "
                             "once it runs (RINGLEADER_TRACKING_TIMEOUT)")
    parser.add_argument("--tracking-retry", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "TRACKING_RETRY", defaults.tracking.retry_seconds)),
                        help="pause before retrying an unreachable MLflow (RINGLEADER_TRACKING_RETRY)")
    parser.add_argument("--api-concurrency", type=_positive_int, metavar="CALLS",
                        default=_env(environ, "API_CONCURRENCY", defaults.api.concurrency),
                        help="Kubernetes API calls in flight at once (RINGLEADER_API_CONCURRENCY)")
    parser.add_argument("--max-concurrent-reconciles", type=_positive_int, metavar="EXPERIMENTS",
                        default=_env(environ, "MAX_CONCURRENT_RECONCILES", defaults.api.reconciles),
                        help="experiments reconciled at once; the others wait their turn "
                             "(RINGLEADER_MAX_CONCURRENT_RECONCILES)")
    parser.add_argument("--progress-poll-interval", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "PROGRESS_POLL_INTERVAL", defaults.timing.progress_poll_seconds)),
                        help="how often a running trial's progress is read (RINGLEADER_PROGRESS_POLL_INTERVAL)")
    parser.add_argument("--recheck-interval", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "RECHECK_INTERVAL", defaults.timing.recheck_seconds)),
                        help="longest time without a full pass while waiting on pods or while a trial runs "
                             "(RINGLEADER_RECHECK_INTERVAL)")
    parser.add_argument("--startup-deadline", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "STARTUP_DEADLINE", defaults.timing.startup_deadline_seconds)),
                        help="how long a trial's pod may take from its creation until it runs, where the experiment "
                             "sets no runPolicy.startupDeadlineSeconds (RINGLEADER_STARTUP_DEADLINE)")
    parser.add_argument("--capacity-retry-interval", type=_positive, metavar="SECONDS",
                        default=float(_env(environ, "CAPACITY_RETRY_INTERVAL", defaults.timing.capacity_retry_seconds)),
                        help="how soon a trial waiting for free capacity is judged again "
                             "(RINGLEADER_CAPACITY_RETRY_INTERVAL)")
    parser.add_argument("--pod-event-delay", type=_not_negative, metavar="SECONDS",
                        default=float(_env(environ, "POD_EVENT_DELAY", defaults.timing.pod_event_delay_seconds)),
                        help="seconds from a trial pod's event to the pass it asks for, gathering its trial's other "
                             "pod events into that pass (RINGLEADER_POD_EVENT_DELAY)")
    parser.add_argument("--liveness", default=_env(environ, "LIVENESS", defaults.liveness_endpoint),
                        help="kopf liveness endpoint URL, or 'none' (RINGLEADER_LIVENESS)")


def from_args(args: argparse.Namespace) -> Settings:
    """The frozen Settings of a parsed command line (flags first, then RINGLEADER_* variables); ValueError
    with a one-line message for a value that can never work."""
    liveness = None if str(args.liveness).lower() in ("", "none", "off") else args.liveness
    return Settings(
        scope=ScopeSettings(namespaces=tuple(args.namespaces or args.env_namespaces or ())),
        pods=PodSettings(
            render=render_settings.from_args(args, default_tracking_uri=args.tracking_uri or None),
            pod_groups=args.pod_groups,
            kueue=args.kueue,
            admit_by_capacity=args.admit_by_capacity,
        ),
        tracking=MlflowSettings(
            default_uri=args.tracking_uri or None,
            ui_url=args.tracking_ui_url or None,
            timeout_seconds=args.tracking_timeout,
            retry_seconds=args.tracking_retry,
            allowed_uris=_without_credentials(
                tuple(args.tracking_allowed_uris or args.env_tracking_allowed_uris or ())),
        ),
        api=ApiSettings(concurrency=args.api_concurrency, reconciles=args.max_concurrent_reconciles),
        timing=TimingSettings(
            progress_poll_seconds=args.progress_poll_interval,
            recheck_seconds=args.recheck_interval,
            startup_deadline_seconds=args.startup_deadline,
            capacity_retry_seconds=args.capacity_retry_interval,
            pod_event_delay_seconds=args.pod_event_delay,
        ),
        liveness_endpoint=liveness,
    )


def describe(settings: Settings) -> str:
    """One log line with every setting, written once at startup."""
    return json.dumps(dataclasses.asdict(settings), sort_keys=True, default=str)
