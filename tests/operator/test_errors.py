"""Apiserver tier (no kubelet: the test writes pod status): errors go where users look.

A call the operator's RBAC forbids and a status that can never be read each become a Warning Event
and a ReconcileFailed condition on the experiment, with the count of failed attempts and when the
next one is; a forbidden call is retried with a growing delay and the condition clears once it works.
"""

import copy
import re

import experiments as dtes
from apiserver_client import wait_for

from ringleader.api import constants


def _warnings(admin, namespace, name, reason):
    return [e for e in admin.events(namespace, name) if e["reason"] == reason and e["type"] == "Warning"]


def _failing(admin, namespace, name):
    """The experiment once its ReconcileFailed condition is True."""
    return wait_for("ReconcileFailed True", lambda: (lambda dte: dtes.is_true(dte, "ReconcileFailed") and dte)(
        admin.experiment(namespace, name)), timeout=120)


def test_a_forbidden_call_is_a_warning_event_and_a_condition_and_is_retried_until_allowed(admin, namespace, operator):
    operator()
    role = next(r for r in admin.list("Role", namespace)
                if any("pods" in rule.get("resources", []) for rule in r["rules"]))
    granted = copy.deepcopy(role["rules"])
    # The RBAC of an operator installed by hand, missing one verb: pods may be listed, never created.
    admin.patch("Role", namespace, role["metadata"]["name"], {"rules": [
        {**rule, "verbs": [v for v in rule["verbs"] if v != "create"]} if rule.get("resources") == ["pods"] else rule
        for rule in granted]})
    admin.create(dtes.experiment("denied", namespace))

    failing = _failing(admin, namespace, "denied")
    condition = dtes.condition(failing, "ReconcileFailed")
    assert condition["reason"] == "Forbidden"
    assert "pods is forbidden" in condition["message"] and "check the operator's RBAC" in condition["message"]
    # A 403 is retried 60 s later, the delay doubling per failure in a row.
    attempts, delay = map(int, re.search(r"(\d+) failed attempts? in a row; next attempt in (\d+)s",
                                         condition["message"]).groups())
    assert delay == min(60 * 2 ** (attempts - 1), 600)
    warnings = wait_for("a Forbidden Warning Event", lambda: _warnings(admin, namespace, "denied", "Forbidden"))
    assert "pods is forbidden" in warnings[0]["message"]
    assert admin.trial_pods(namespace, "denied") == []

    admin.patch("Role", namespace, role["metadata"]["name"], {"rules": granted})
    # The next attempt comes 60 s after the first failure (a 403's delay), then the pods are made.
    wait_for("3 pods once allowed", lambda: len(admin.trial_pods(namespace, "denied")) == 3, timeout=180)
    cleared = wait_for("ReconcileFailed False", lambda: (lambda dte: dtes.condition(dte, "ReconcileFailed").get(
        "status") == "False" and dte)(admin.experiment(namespace, "denied")), timeout=60)
    assert dtes.condition(cleared, "ReconcileFailed")["reason"] == "Reconciled"


def test_a_status_that_cannot_be_read_is_a_warning_event_and_a_condition_not_retried(admin, namespace, operator):
    running = operator()
    admin.create(dtes.experiment("garbled", namespace))
    wait_for("3 pods", lambda: len(admin.trial_pods(namespace, "garbled")) == 3, timeout=120)
    running.stop()
    # Edited by hand (kubectl edit --subresource=status): a time the API server takes but no parser reads.
    admin.patch(constants.KIND, namespace, "garbled", {"status": {"startTime": "2024-01-01T00:00:00+99:00"}},
                sub="status")
    running.start()

    failing = _failing(admin, namespace, "garbled")
    condition = dtes.condition(failing, "ReconcileFailed")
    assert condition["reason"] == "StatusUnreadable"
    assert "startTime" in condition["message"] and "delete and recreate it" in condition["message"]
    assert "not retried" in condition["message"]
    # The other conditions are kept: only the conditions were written.
    assert dtes.condition(failing, "Created")["status"] == "True"
    warnings = wait_for("a StatusUnreadable Warning Event",
                        lambda: _warnings(admin, namespace, "garbled", "StatusUnreadable"))
    assert "delete and recreate it" in warnings[0]["message"]
