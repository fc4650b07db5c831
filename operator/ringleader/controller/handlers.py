"""The kopf handlers: each turns one kind of news into a reconcile of the experiment concerned; registered on import by
`cli`.

The handlers stay thin on purpose. Whatever triggers them (a new or changed experiment, an
operator restart, any event of a trial's pods), the same level-based pass runs (`reconciler`),
serialized per experiment by the work queue, which also wakes it at deadlines and TTL expiries.
No handler needs a finalizer: deleting an experiment never waits for the operator.

Every handler is a watch-event handler, none is one of kopf's change handlers (create, update,
resume): those would store a copy of each experiment's spec in an annotation (a PATCH per new
experiment) and copy every experiment's body on every event to compare, and most of an
experiment's events are its own status writes. Which events matter is told from the event alone
(`Controller.is_news`).
"""

from __future__ import annotations

import gc
import logging

import kopf

from ringleader.api import constants
from ringleader.controller import kube, reconciler, recording
from ringleader.controller import settings as settings_

EXPERIMENTS = (constants.GROUP, constants.VERSION, constants.PLURAL)
WORKLOADS = ("kueue.x-k8s.io", "v1beta1", "workloads")
TRIAL_PODS = {constants.LABEL_MANAGED_BY: constants.MANAGED_BY}
GC_THRESHOLDS = (20_000, 20, 10)
"""The cyclic collector's thresholds (Python's defaults: 700, 10, 10). In a burst the operator's young objects
(watch events, rendered trials, API answers) live across many allocations, as passes wait for the API server:
with the defaults they reach the oldest generation and set off full collections of the whole heap, 50 in a
1000-experiment burst, 40 % of the operator's CPU (docs/performance.md, "Third round"). Collected every 20,000
allocations instead, they die young; full collections happen about every 4 million."""


class NoDiffBase(kopf.DiffBaseStorage):
    """No last-handled state: kopf copies every watched body (each pod's too) on every event to compare it with
    the last handled one, which only change handlers need, and there are none here."""

    def build(self, *, body: kopf.Body, extra_fields=None) -> kopf.BodyEssence:
        return kopf.BodyEssence()

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


@kopf.on.startup()
async def configure_operator(settings: kopf.OperatorSettings, memo: kopf.Memo, logger: logging.Logger, **_) -> None:
    ours: settings_.Settings = memo.settings
    settings.persistence.diffbase_storage = NoDiffBase()
    # Only the trials' pods are watched, filtered by the API server: a cluster's other pods never reach us.
    settings.watching.label_selectors["v1", "pods"] = ",".join(f"{k}={v}" for k, v in TRIAL_PODS.items())
    if ours.pods.kueue:
        settings.watching.label_selectors[WORKLOADS[0], WORKLOADS[2]] = settings.watching.label_selectors["v1", "pods"]
    settings.posting.level = logging.INFO
    if ours.scope.namespaces:
        # Namespace mode runs on Roles alone: no listing of namespaces or CRDs, which are cluster-scoped.
        # The named namespaces are taken as given, and the CRD must exist before the operator starts
        # (Helm installs crds/ first).
        settings.scanning.disabled = True
    client = kube.Kube(kube.configure(ours.api.concurrency), ours.api.concurrency)
    recorder = recording.MlflowCalls(ours.tracking)
    if ours.tracking.default_uri or ours.tracking.allowed_uris:
        recorder.load()  # in the background: loaded before the first experiment needs it
    memo.controller = reconciler.Controller(ours, client, recorder)
    memo.controller.start()
    logger.info("ringleader operator settings: %s", settings_.describe(ours))
    # What is loaded by now (modules, classes: some 80,000 objects) lives as long as the process: frozen, it is
    # left out of the cyclic collector's full collections, which would otherwise walk all of it each time.
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


@kopf.on.cleanup()
async def stop_reconciling(memo: kopf.Memo, **_) -> None:
    await memo.controller.close()


def _is_news(type: str | None, body: kopf.Body, memo: kopf.Memo, **_) -> bool:
    return memo.controller.is_news(type, body)


# Filtered before the handler is called: the experiments' own status writes (a progress update per running
# trial per poll) would otherwise each cost a handler call and a log line.
@kopf.on.event(*EXPERIMENTS, when=_is_news)
async def reconcile_experiment(namespace: str, name: str, memo: kopf.Memo, **_) -> None:
    """A new, changed or (listed at an operator's start) existing experiment: reconcile it now."""
    memo.controller.request((namespace, name))


@kopf.on.event("v1", "pods", labels=TRIAL_PODS)
async def watch_trial_pods(body: kopf.Body, namespace: str, memo: kopf.Memo, **_) -> None:
    """Any change of a trial's pod (scheduled, running, failed, deleted): reconcile the experiment owning it,
    after a short delay that gathers its other pods' events into the same pass."""
    _reconcile_owner(body, namespace, memo, memo.settings.timing.pod_event_delay_seconds)


def _reconcile_owner(body: kopf.Body, namespace: str, memo: kopf.Memo, delay: float = 0.0) -> None:
    for owner in body.metadata.get("ownerReferences") or []:
        if owner.get("kind") == constants.KIND and owner.get("apiVersion", "").startswith(f"{constants.GROUP}/"):
            memo.controller.request((namespace, owner["name"]), delay)


def watch_workloads() -> None:
    """Register the watch on the trials' Kueue Workloads; `cli` calls it when Kueue is enabled, since the watch
    needs Kueue's CRDs and RBAC on workloads."""
    kopf.on.event(*WORKLOADS, labels=TRIAL_PODS)(reconcile_on_admission)


async def reconcile_on_admission(body: kopf.Body, namespace: str, memo: kopf.Memo, **_) -> None:
    """Kueue admitted, evicted or dropped a trial's Workload: reconcile the experiment owning it."""
    _reconcile_owner(body, namespace, memo)


@kopf.on.event(*EXPERIMENTS, when=lambda type, **_: type == "DELETED")
async def mark_runs_killed_on_delete(type: str, body: kopf.Body, memo: kopf.Memo, **_) -> None:
    """An experiment is gone (its pods follow by garbage collection): end its open MLflow runs as KILLED.

    A watch event instead of a deletion handler: a deletion handler would need a finalizer, and a
    finalizer makes `kubectl delete` hang whenever the operator is down."""
    if type == "DELETED":
        memo.controller.forget(dict(body))
