"""Which watch events ask for a pass, and how soon: an experiment's listing, creation and spec changes at once, its
own status writes never; a pod's events after a short delay that gathers its trial's other events."""

import asyncio
import logging

from ringleader.api import constants
from ringleader.controller import cli, reconciler, recording
from ringleader.controller import settings as settings_


def body(generation, name="q"):
    return {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
            "metadata": {"namespace": "ns", "name": name, "uid": "u-1", "generation": generation}}


def controller(delay=1.0):
    settings = settings_.Settings(timing=settings_.TimingSettings(pod_event_delay_seconds=delay))
    return reconciler.Controller(settings, kube_=None, recorder=recording.MlflowCalls(settings.tracking))


def test_a_listed_or_created_experiment_and_a_new_spec_ask_for_a_pass_its_status_writes_do_not():
    found = controller()
    assert found.is_news(None, body(1))  # listed when the operator starts
    assert not found.is_news("MODIFIED", body(1))  # a status write: the generation stays
    assert found.is_news("MODIFIED", body(2))  # the spec changed
    assert not found.is_news("MODIFIED", body(2))
    assert not found.is_news("DELETED", body(2))  # `mark_runs_killed_on_delete` handles it
    assert found.is_news("ADDED", body(1, name="r"))


def test_forgetting_an_experiment_only_costs_a_pass_it_never_loses_one():
    async def run():
        found = controller()
        assert found.is_news("ADDED", body(3))
        found.forget(body(3))  # deleted: its runs are ended in the background (none here)
        news = found.is_news("MODIFIED", body(3))  # nothing remembered: the event is news
        await found.runs.close()
        return news
    assert asyncio.run(run())


def test_a_pod_event_waits_for_the_delay_and_news_of_the_experiment_does_not():
    async def run():
        found = controller(delay=1.0)
        found.request(("ns", "q"), 1.0)
        waiting = found.queue.pending(("ns", "q"))
        found.request(("ns", "q"), 1.0)  # a second pod's event: the same pass, not a later one
        again = found.queue.pending(("ns", "q"))
        found.request(("ns", "q"))
        now = found.queue.pending(("ns", "q"))
        await found.queue.close()
        return waiting, again, now
    waiting, again, now = asyncio.run(run())
    assert 0.9 < waiting <= 1.0 and again <= waiting and now == 0.0


def record(message, level=logging.INFO):
    return logging.LogRecord("kopf.objects", level, __file__, 1, message, None, None)


def test_the_operator_logs_no_line_per_handled_event_but_every_failure():
    assert not cli._without_handler_successes(record("Handler 'watch_trial_pods' succeeded."))
    assert cli._without_handler_successes(record("Handler 'watch_trial_pods' failed with an exception", logging.ERROR))
    assert cli._without_handler_successes(record("ringleader operator settings: {}"))


def test_kopf_keeps_no_copy_of_a_watched_body_to_compare():
    from ringleader.controller import handlers
    storage = handlers.NoDiffBase()
    pod = {"metadata": {"name": "q-0-worker-0"}, "spec": {"containers": [{"name": "trainer"}]}}
    assert storage.build(body=pod) == {} and storage.fetch(body=pod) is None


class PatchingKube:
    def __init__(self):
        self.patches = []

    async def patch_status(self, namespace, name, status):
        self.patches.append((namespace, name, status))


def test_between_passes_an_experiment_is_remembered_slim_and_its_next_success_still_clears_reconcile_failed():
    failed = {"type": "ReconcileFailed", "status": "True", "reason": "Forbidden", "message": "no create",
              "lastTransitionTime": "2026-01-01T00:00:00Z"}
    full = {**body(4), "spec": {"workers": {"replicas": 512}}, "status": {"phase": "Running", "conditions": [failed]}}
    full["metadata"]["managedFields"] = [{"manager": "kubectl", "fieldsV1": {"f:spec": {}}}]
    slim = reconciler._slim(full)
    assert slim == {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
                    "metadata": {"namespace": "ns", "name": "q", "uid": "u-1", "generation": 4},
                    "status": {"conditions": [failed]}}

    async def run():
        from kopf._core.engines import posting
        import kopf
        queue = asyncio.Queue()
        posting.settings_var.set(kopf.OperatorSettings())
        posting.event_queue_var.set(queue)
        posting.event_queue_loop_var.set(asyncio.get_running_loop())
        found = controller()
        found.kube = PatchingKube()
        found._bodies[("ns", "q")] = slim
        await found._succeeded(("ns", "q"))
        return found.kube.patches, [queue.get_nowait().reason for _ in range(queue.qsize())]
    patches, events = asyncio.run(run())
    (namespace, name, status), = patches
    assert (namespace, name) == ("ns", "q") and status["conditions"][0]["status"] == "False"
    assert events == ["Reconciled"]
