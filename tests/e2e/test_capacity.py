"""Admission by free capacity on a real cluster (docs/operator.md, "Admission by free capacity"): no gang scheduler,
no Kueue, 6 tiny experiments applied at once, more than the nodes hold together.

The operator creates a trial's pods only when all fit the node's free CPU, so no pod of a trial is ever scheduled,
holding its share of the node, while a peer of it is unschedulable; the trials that do not fit wait Pending
(WaitingForCapacity), and every experiment succeeds. Watched by polling the pods every second: the wait this
prevents lasted tens of seconds (a pod held idle about 55 s while its peer waited, before admission).
"""

from __future__ import annotations

import time

import yaml

import e2e_specs
from e2e_kube import DTE, log, phase, trials

# 12 pods of 250m: twice what the three test nodes (0.67 CPU each) hold at once, so half the trials must wait. (12
# experiments took 270 s there, every one waiting for capacity at some point: the test shows no more with them.)
BURST = 6
BOUND_SECONDS = 600  # the whole burst: 6 trials of 2 pods, a few at a time
LABEL_EXPERIMENT = "ringleader.dev/experiment"
LABEL_TRIAL = "ringleader.dev/trial"


def _scheduled_at(pod: dict) -> str | None:
    for condition in (pod.get("status") or {}).get("conditions") or []:
        if condition["type"] == "PodScheduled" and condition["status"] == "True":
            return condition.get("lastTransitionTime")
    return None


def _unschedulable(pod: dict) -> bool:
    return any(c["type"] == "PodScheduled" and c.get("reason") == "Unschedulable"
               for c in (pod.get("status") or {}).get("conditions") or [])


def _seconds(timestamp: str) -> float:
    return time.mktime(time.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ"))


def test_a_burst_of_6_experiments_queues_whole_trials_none_half_scheduled_and_all_succeed(
        kube, namespace, release, report_on_failure):
    names = [f"burst-{i:02d}" for i in range(BURST)]
    report_on_failure(names[-1])  # the last in line waits longest
    manifests = [e2e_specs.experiment(name, namespace, architecture="RingAllReduce",
                                      model={"iterations": 4, "warmupIterations": 1}) for name in names]
    started = time.monotonic()
    kube.apply("---\n".join(yaml.safe_dump(m) for m in manifests))
    half_scheduled: list[str] = []
    pods_seen: dict[str, dict] = {}
    waited_for_capacity: set[str] = set()
    try:
        while True:
            assert time.monotonic() - started < BOUND_SECONDS, f"the burst did not end within {BOUND_SECONDS} s"
            pods = kube.json("get", "pods", "-n", namespace, "-l",
                             f"{LABEL_EXPERIMENT} in ({','.join(names)})")["items"]
            by_trial: dict[str, list[dict]] = {}
            for pod in pods:
                by_trial.setdefault(pod["metadata"]["labels"][LABEL_TRIAL], []).append(pod)
                pods_seen[pod["metadata"]["uid"]] = pod
            for trial, found in by_trial.items():
                scheduled = [p["metadata"]["name"] for p in found if p["spec"].get("nodeName")]
                stuck = [p["metadata"]["name"] for p in found if _unschedulable(p)]
                if scheduled and stuck:
                    half_scheduled.append(f"{trial}: {scheduled} scheduled while {stuck} unschedulable")
            dtes = {d["metadata"]["name"]: d for d in kube.json("get", DTE, "-n", namespace)["items"]
                    if d["metadata"]["name"] in names}
            waited_for_capacity |= {n for n, d in dtes.items()
                                    if any(t.get("reason") == "WaitingForCapacity" for t in trials(d))}
            if len(dtes) == BURST and all(phase(d) in ("Succeeded", "Failed") for d in dtes.values()):
                break
            time.sleep(1)
        took = time.monotonic() - started
        waits = [_seconds(_scheduled_at(p)) - _seconds(p["metadata"]["creationTimestamp"])
                 for p in pods_seen.values() if _scheduled_at(p)]
        spreads: dict[str, list[float]] = {}
        for pod in pods_seen.values():
            if _scheduled_at(pod):
                spreads.setdefault(pod["metadata"]["labels"][LABEL_TRIAL], []).append(_seconds(_scheduled_at(pod)))
        held = max((max(s) - min(s) for s in spreads.values()), default=0.0)
        log(f"burst of {BURST}: all ended in {took:.0f} s; {len(waited_for_capacity)} waited for capacity; slowest pod "
            f"from creation to scheduled {max(waits, default=0):.0f} s; "
            "longest a scheduled pod waited for a peer of its "
            f"trial to be scheduled {held:.0f} s; half-scheduled observations: {len(half_scheduled)}")
        assert not half_scheduled, half_scheduled[:5]
        assert {n: phase(d) for n, d in dtes.items()} == {n: "Succeeded" for n in names}, \
            {n: trials(d)[0].get("message") for n, d in dtes.items() if phase(d) != "Succeeded"}
        assert waited_for_capacity, "the burst never exceeded the node: it shows nothing"
    finally:
        kube.kubectl("delete", DTE, "-n", namespace, *names, "--ignore-not-found", "--wait=false", check=False)
