"""What an operator installed without PodGroups or Kueue, or barred from a tracking server, refuses to run, and in
which order it says so."""

from ringleader import api
from ringleader.api import constants
from ringleader.controller import reasons, refusals
from ringleader.controller.settings import PodSettings


def refusal(scheduling=None, pods=PodSettings(), tracking_refusal=None):
    spec = {"scheduling": scheduling} if scheduling else {}
    experiment = api.parse({"apiVersion": constants.API_VERSION, "kind": constants.KIND,
                            "metadata": {"name": "q", "namespace": "default"}, "spec": spec})
    return refusals.refusal_condition(experiment, api.expand(experiment), pods, tracking_refusal)


def test_an_experiment_within_what_the_operator_was_installed_with_runs():
    assert refusal() is None
    assert refusal({"gang": "Volcano", "queueName": "team-a"}, PodSettings(pod_groups=True, kueue=True)) is None


def test_a_gang_scheduler_without_pod_groups_is_refused_first():
    reason, message = refusal({"gang": "Volcano", "queueName": "team-a"}, tracking_refusal="not that server")
    assert reason == reasons.PODGROUPS_DISABLED
    assert "podGroups.enabled=true" in message


def test_a_queue_without_kueue_is_refused_before_the_tracking_server():
    reason, message = refusal({"queueName": "team-a"}, tracking_refusal="not that server")
    assert reason == reasons.KUEUE_DISABLED
    assert "kueue.enabled=true" in message


def test_the_recorders_word_on_the_tracking_uri_is_the_last_refusal():
    assert refusal(tracking_refusal="not that server") == (reasons.TRACKING_URI_NOT_ALLOWED, "not that server")
