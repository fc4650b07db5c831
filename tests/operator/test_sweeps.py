"""Apiserver tier (no kubelet: the test writes pod status): a sweep runs its trials at most maxParallel at a time."""

import experiments as dtes
from apiserver_client import wait_for
from ringleader.api import constants


def trial_pods(admin, namespace, trial):
    return [p for p in admin.trial_pods(namespace, "grid") if p["metadata"]["labels"][constants.LABEL_TRIAL] == trial]


def finish_trial(admin, namespace, trial, count):
    pods = wait_for(f"the {count} pods of {trial}", lambda: (lambda found: len(found) == count and found)(
        trial_pods(admin, namespace, trial)))
    for pod in pods:
        admin.run_pod(pod)
    for pod in pods:
        # Every rank ends, its servers too (they exit once the workers are done): the workers with the summary.
        admin.finish_pod(pod, 0, "Completed",
                         dtes.summary_message() if dtes.role(pod) == "worker" else "ringleader: ended, 10 records")
    return pods


def test_a_sweep_runs_one_trial_at_a_time_and_records_each(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("grid", namespace,
                                 sweep={"matrix": {"workers": [1, 2]}, "repetitions": 1, "maxParallel": 1}))
    wait_for("grid-0's pods", lambda: len(trial_pods(admin, namespace, "grid-0")) == 2)  # 1 ps + 1 worker
    waiting = dtes.trials(admin.experiment(namespace, "grid"))[1]
    assert (waiting["phase"], waiting["reason"]) == ("Pending", "WaitingForSlot")
    assert trial_pods(admin, namespace, "grid-1") == []
    finish_trial(admin, namespace, "grid-0", 2)
    between = wait_for("grid-1's pods created", lambda: (lambda d: dtes.trials(d)[1]["phase"] == "Created" and d)(
        admin.experiment(namespace, "grid")))
    # Between trials the sweep still runs: its next trial's pods are starting.
    assert dtes.phase(between) == "Running"
    assert dtes.condition(between, "Running")["reason"] == "TrialStarting"

    finish_trial(admin, namespace, "grid-1", 3)  # 1 ps + 2 workers, started only after grid-0 finished
    done = wait_for("phase Succeeded", lambda: dtes.phase(admin.experiment(namespace, "grid")) == "Succeeded"
                    and admin.experiment(namespace, "grid"))
    trials = dtes.trials(done)
    assert [(t["name"], t["phase"], t["parameters"]) for t in trials] == [
        ("grid-0", "Succeeded", {"workers": "1"}), ("grid-1", "Succeeded", {"workers": "2"})]
    assert dtes.time_of(trials[1]["startTime"]) >= dtes.time_of(trials[0]["completionTime"])
    assert done["status"]["progress"]["trialsCompleted"] == 2
    assert done["status"]["progressText"].startswith("2/2 trials")
    assert dtes.condition(done, "Succeeded")["message"] == ("all 2 trials succeeded; best: workers=1 (grid-0), "
                                                           "512.5 samples/s")  # equal throughputs: the first
    # `kubectl get dte`: what the sweep compares and its best trial, not the spec's default workers.
    row = admin.table(namespace, "grid")
    assert (row["Architecture"], row["Paradigm"], row["Workers"], row["Phase"]) == ("ParameterServer", "BSP", "1,2",
                                                                                    "Succeeded")
    assert (row["Best"], row["Throughput"]) == ("workers=1", 512.5)


def test_a_sweep_with_max_parallel_two_starts_two_trials_at_once(admin, namespace, operator):
    operator()
    admin.create(dtes.experiment("grid", namespace, sweep={"matrix": {"workers": [1, 2, 3]}, "maxParallel": 2}))
    wait_for("two trials' pods", lambda: len(trial_pods(admin, namespace, "grid-0")) == 2
             and len(trial_pods(admin, namespace, "grid-1")) == 3)
    dte = admin.experiment(namespace, "grid")
    assert [t["phase"] for t in dtes.trials(dte)] == ["Created", "Created", "Pending"]
    assert trial_pods(admin, namespace, "grid-2") == []
