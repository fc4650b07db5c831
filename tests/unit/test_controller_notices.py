"""What a failing reconcile tells users: which failures are news, their reason, and a message with the count and next
attempt."""

import kopf

from ringleader.controller import kube, notices, statuses, workqueue


def test_a_forbidden_call_is_news_at_once_with_the_count_and_the_next_attempt():
    error = kube.Forbidden("POST /api/v1/namespaces/a/pods is forbidden: no create", delay=60)
    notice = notices.notice(workqueue.PassFailure(error, attempt=1, retry_in=60.0))
    assert notice.reason == "Forbidden"
    assert notice.message.startswith("POST /api/v1/namespaces/a/pods is forbidden: no create")
    assert "1 failed attempt in a row; next attempt in 60s" in notice.message


def test_an_unreadable_status_is_news_at_once_and_says_it_is_not_retried():
    error = statuses.Unreadable("status of the experiment is unreadable (...); delete and recreate it")
    notice = notices.notice(workqueue.PassFailure(error, attempt=1, retry_in=None))
    assert notice.reason == "StatusUnreadable"
    assert "delete and recreate it" in notice.message and "not retried" in notice.message


def test_a_single_blip_is_not_news_but_a_repeated_one_is():
    blip = kopf.TemporaryError("GET /apis/...: API server unreachable", delay=5)
    assert notices.notice(workqueue.PassFailure(blip, attempt=1, retry_in=5.0)) is None
    repeated = notices.notice(workqueue.PassFailure(blip, attempt=3, retry_in=20.0))
    assert repeated.reason == "ApiError" and "3 failed attempts in a row; next attempt in 20s" in repeated.message


def test_an_unexpected_error_names_its_type_and_says_when_it_was_given_up():
    notice = notices.notice(workqueue.PassFailure(KeyError("trials"), attempt=9, retry_in=None))
    assert notice.reason == "ReconcileFailing"
    assert (notice.message.startswith("KeyError: 'trials'")
            and "until the experiment or its pods change" in notice.message)


def test_a_long_error_is_cut():
    notice = notices.notice(workqueue.PassFailure(kube.Forbidden("x" * 5000, delay=60), attempt=1, retry_in=60.0))
    assert len(notice.message) < notices.MESSAGE_CHARACTERS + 100


def test_the_conditions_alone_parse_when_the_rest_of_the_status_does_not():
    condition = {"type": "Running", "status": "True", "reason": "TrialRunning", "message": "",
                 "lastTransitionTime": "2024-01-01T00:00:00Z"}
    body = {"status": {"conditions": [condition], "startTime": "not a time"}}
    assert [c.reason for c in statuses.read_conditions(body)] == ["TrialRunning"]
    assert statuses.read_conditions({"status": {"conditions": [{"type": "Nonsense"}]}}) == []
