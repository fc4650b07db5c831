"""Faults on a real cluster, against what docs/operator.md promises.

- a worker pod deleted mid-run restarts the whole trial (Restarting, PodDeleted), which then succeeds;
- a worker's process killed with backoffLimit 0 fails the experiment, naming the pod, exit code and limit;
- an experiment deleted mid-run is gone at once (no finalizer), its pods are garbage-collected and its
  open MLflow runs end KILLED;
- the operator restarted mid-run (its pod deleted; the Deployment recreates it) resumes: the experiment
  succeeds, with its pods never duplicated nor recreated.
- a nonexistent image fails its trial at the startup deadline, with a Warning event naming the image whole,
  and frees the node (its pods deleted);
- a model that cannot be imported fails its trial at once, without a restart, the message ending in what to do;
- a rank killed inside a pod of two ranks ends its pod's other rank and fails the trial as runPolicy says within
  60 s, naming the dead rank, no process left in the pods, the survivors' records in MLflow.

These experiments are slowed by a bandwidth cap (sleeps, no CPU) so that they are surely mid-run when hit.
"""

from __future__ import annotations

import decimal
import os
import secrets
import subprocess
import time

import e2e_checks as checks
import e2e_specs
from e2e_kube import (condition, describe_dte, is_true, log, millicores, phase, status, trials, wait_for,
                      wait_terminal)
from ringleader.controller import capacity

ADMIT_TIMEOUT = 900
RUN_TIMEOUT = 600
PRIORITY = 10  # ahead of the training fleet: these tests wait for their experiment to start


def slow_experiment(name, namespace, **spec):
    return e2e_specs.experiment(name, namespace, network=e2e_specs.SLOW_NETWORK,
                                model={"iterations": e2e_specs.SLOW_ITERATIONS}, **spec)


def start(kube, launcher, namespace, manifest, report_on_failure) -> dict:
    """Submit, wait for admission, then until its workers report progress (training is under way)."""
    name = manifest["metadata"]["name"]
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest), priority=PRIORITY)
    launcher.wait_admitted(name, ADMIT_TIMEOUT)
    total = manifest["spec"]["model"]["iterations"]

    def training():
        dte = kube.dte(namespace, name)
        iteration = status(dte).get("progress", {}).get("iteration", 0)
        if phase(dte) in ("Succeeded", "Failed"):
            raise AssertionError(f"{name} ended before it could be hit: {describe_dte(kube, namespace, name)}")
        return phase(dte) == "Running" and 1 <= iteration < total and dte

    dte = wait_for(f"{name} to be training", training, RUN_TIMEOUT, interval=1,
                   describe=lambda: describe_dte(kube, namespace, name))
    log(f"{name}: training, {status(dte)['progressText']}")
    return dte


def pod(kube, namespace, name):
    return kube.get("pod", namespace, name)


def node_ctr(found: dict) -> tuple[list[str] | None, str]:
    """The `ctr` command line of the containerd that runs the pod's trainer (None on a cluster without node access),
    and the trainer's container id."""
    container = found["status"]["containerStatuses"][0]["containerID"].split("://", 1)[1]
    cluster = os.environ.get("RINGLEADER_E2E_CLUSTER", "harness")
    if cluster == "harness":
        import harness  # conftest put cluster/ on sys.path

        return ["ctr", "--address", harness.containerd_socket(found["spec"]["nodeName"]), "--namespace", "k8s.io"], \
            container
    if cluster == "kind":
        return ["docker", "exec", found["spec"]["nodeName"], "ctr", "--namespace", "k8s.io"], container
    return None, container


def kill_container_process(kube, namespace, pod_name) -> str:
    """SIGKILL the trainer's process from the node (as the OOM killer would). Returns how it was done."""
    ctr, container = node_ctr(pod(kube, namespace, pod_name))
    if ctr is None:
        kube.kubectl("delete", "pod", "-n", namespace, pod_name, "--grace-period=0", "--force")
        return "deleted"
    subprocess.run([*ctr, "task", "kill", "--signal", "SIGKILL", container], check=True, timeout=30,
                   capture_output=True, text=True)
    return "killed"


# Run inside the trainer's container: SIGKILL the rank of local rank 1, a child of the pod's agent (PID 1).
KILL_LOCAL_RANK_1 = """
import os, signal
for pid in (p for p in os.listdir("/proc") if p.isdigit() and int(p) != os.getpid()):
    try:
        parent = int(open(f"/proc/{pid}/stat").read().rsplit(")", 1)[1].split()[1])
        environ = open(f"/proc/{pid}/environ", "rb").read().split(b"\\0")
    except OSError:
        continue
    if parent == 1 and b"LOCAL_RANK=1" in environ:
        os.kill(int(pid), signal.SIGKILL)
        print(pid)
"""


def kill_local_rank_1(kube, namespace, pod_name) -> str:
    """SIGKILL one rank of a pod of two, inside its container (as the OOM killer kills one process of a pod): through
    the node's containerd where the harness or kind gives it, else `kubectl exec`. Returns the pid it killed."""
    ctr, container = node_ctr(pod(kube, namespace, pod_name))
    command = ["python", "-c", KILL_LOCAL_RANK_1]
    if ctr is None:
        done = kube.kubectl("exec", "-n", namespace, pod_name, "-c", "trainer", "--", *command)
    else:
        done = subprocess.run([*ctr, "task", "exec", "--exec-id", f"kill-{secrets.token_hex(3)}", container, *command],
                              check=True, timeout=60, capture_output=True, text=True)
    killed = done.stdout.split()
    assert len(killed) == 1, f"expected one rank of local rank 1 in {pod_name}, killed {killed}: {done.stderr}"
    return killed[0]


def test_a_worker_pod_deleted_mid_run_restarts_the_trial_which_then_succeeds(kube, namespace, launcher, mlflow,
                                                                           report_on_failure):
    manifest = slow_experiment("restart", namespace, architecture="PeerToPeer",
                               runPolicy={"backoffLimit": 2, "cleanPodPolicy": "None"})
    start(kube, launcher, namespace, manifest, report_on_failure)
    before = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.experiment_pods(namespace, "restart")}
    victim = "restart-0-worker-1"
    kube.kubectl("delete", "pod", "-n", namespace, victim, "--grace-period=0", "--force")
    log(f"restart: force-deleted {victim}")

    restarting = wait_for("the trial to restart", lambda: (lambda d: (trials(d)[0].get("restarts", 0) >= 1) and d)(
        kube.dte(namespace, "restart")), 60, interval=0.5, describe=lambda: describe_dte(kube, namespace, "restart"))
    assert (condition(restarting, "Restarting").get("reason")
            in ("PodDeleted", "NoRestartInProgress")), restarting["status"]
    dte = wait_terminal(kube, namespace, "restart", RUN_TIMEOUT)
    assert phase(dte) == "Succeeded", describe_dte(kube, namespace, "restart")
    assert is_true(dte, "Succeeded")
    assert trials(dte)[0]["restarts"] == 1, trials(dte)
    restart_condition = condition(dte, "Restarting")
    assert restart_condition["status"] == "False", restart_condition
    assert f"pod {victim} was deleted" in restart_condition["message"], restart_condition
    assert "restarting the trial (restart 1 of at most 2)" in restart_condition["message"], restart_condition
    checks.assert_events(kube, namespace, "restart", "PodDeleted", "WorkersSucceeded", "TrialsSucceeded")
    after = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.experiment_pods(namespace, "restart")}
    assert sorted(after) == sorted(before), (before, after)  # same ranks...
    assert not set(after.values()) & set(before.values()), (before, after)  # ...in new pods
    assert status(dte)["progress"]["iteration"] == e2e_specs.SLOW_ITERATIONS
    checks.assert_summary(status(dte)["summary"], "restart")
    trial_run = trials(dte)[0]["runId"]
    wait_for("the trial run to be FINISHED", lambda: mlflow.status(trial_run) == "FINISHED", 60)


def test_a_killed_worker_with_backoff_limit_0_fails_the_experiment_naming_the_pod(kube, namespace, launcher, mlflow,
                                                                                report_on_failure):
    manifest = slow_experiment("no-retry", namespace, architecture="RingAllReduce",
                               runPolicy={"backoffLimit": 0, "cleanPodPolicy": "Running"})
    start(kube, launcher, namespace, manifest, report_on_failure)
    victim = "no-retry-0-worker-1"
    how = kill_container_process(kube, namespace, victim)
    log(f"no-retry: {how} {victim}'s trainer process")

    dte = wait_terminal(kube, namespace, "no-retry", 180)
    assert phase(dte) == "Failed", describe_dte(kube, namespace, "no-retry")
    failed = condition(dte, "Failed")
    assert failed["status"] == "True" and failed["reason"] == "BackoffLimitExceeded", failed
    cause = (f"pod {victim}: container trainer exited with code 137" if how == "killed"
             else f"pod {victim} was deleted")
    assert cause in failed["message"], failed
    assert "backoffLimit 0 reached after 0 restarts" in failed["message"], failed
    assert not is_true(dte, "Succeeded")
    assert trials(dte)[0]["phase"] == "Failed" and trials(dte)[0]["restarts"] == 0, trials(dte)
    checks.assert_events(kube, namespace, "no-retry", "BackoffLimitExceeded")
    # cleanPodPolicy Running: nothing is left running; the killed pod stays, for its logs.
    wait_for("no pod of no-retry left running", lambda: all(
        p["status"].get("phase") in ("Succeeded", "Failed") for p in kube.experiment_pods(namespace, "no-retry")), 120)
    if how == "killed":
        left = {p["metadata"]["name"]: p["status"]["phase"] for p in kube.experiment_pods(namespace, "no-retry")}
        assert left.get(victim) == "Failed", left
    parent, trial_run = status(dte)["mlflow"]["runId"], trials(dte)[0]["runId"]
    wait_for("the trial and parent runs to be FAILED",
             lambda: mlflow.status(trial_run) == "FAILED" and mlflow.status(parent) == "FAILED", 60)


def test_an_experiment_deleted_mid_run_is_collected_and_its_runs_killed(kube, namespace, launcher, mlflow,
                                                                        report_on_failure):
    manifest = slow_experiment("doomed", namespace, architecture="PeerToPeer", runPolicy={"cleanPodPolicy": "None"})
    dte = start(kube, launcher, namespace, manifest, report_on_failure)
    parent, trial_run = status(dte)["mlflow"]["runId"], trials(dte)[0]["runId"]
    assert mlflow.status(trial_run) == "RUNNING"
    assert not dte["metadata"].get("finalizers"), dte["metadata"]
    pods = len(kube.experiment_pods(namespace, "doomed"))

    began = time.monotonic()
    kube.kubectl("delete", "dte", "-n", namespace, "doomed", "--wait=true", "--timeout=60s", timeout=90)
    took = time.monotonic() - began
    log(f"doomed: deleted in {took:.1f}s")
    launcher.release("doomed")
    assert took < 30, f"deleting a running experiment took {took:.0f}s"
    assert kube.dte(namespace, "doomed") is None
    wait_for("doomed's pods, Service and ConfigMap to be garbage-collected", lambda: (
        kube.experiment_pods(namespace, "doomed") == [] and kube.get("service", namespace, "doomed-0") is None
        and kube.get("configmap", namespace, "doomed-0-trial") is None), 120,
        describe=lambda: str([p["metadata"]["name"] for p in kube.experiment_pods(namespace, "doomed")]))
    wait_for("the trial and parent runs to be KILLED",
             lambda: mlflow.status(trial_run) == "KILLED" and mlflow.status(parent) == "KILLED", 60,
             describe=lambda: f"trial {mlflow.status(trial_run)}, parent {mlflow.status(parent)}")
    # Each stopped pod's rank published what it had recorded and ended its own run KILLED (SIGTERM, not SIGKILL).
    ranks = mlflow.children(status(dte)["mlflow"]["experimentId"], trial_run)
    assert len(ranks) == pods and {r.info.status for r in ranks} == {"KILLED"}, [(r.info.run_name, r.info.status)
                                                                                 for r in ranks]
    assert all(mlflow.history(r.info.run_id, "time/iteration_ms") for r in ranks
               if r.data.tags.get("ringleader.role") == "worker")


STARTUP_DEADLINE = 30  # seconds; the bound the experiment sets (runPolicy.startupDeadlineSeconds)
MISSING_IMAGE = "localhost/ringleader/does-not-exist:1.0"


def submit_failing(kube, launcher, namespace, manifest, report_on_failure) -> float:
    """Submit ahead of the training fleet and wait until the launcher applied it; returns when (monotonic)."""
    name = manifest["metadata"]["name"]
    report_on_failure(name)
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest), priority=PRIORITY)
    launcher.wait_admitted(name, ADMIT_TIMEOUT)
    return time.monotonic()


def test_a_nonexistent_image_fails_the_trial_at_its_startup_deadline_with_a_warning(kube, namespace, launcher,
                                                                                   report_on_failure):
    manifest = e2e_specs.experiment("no-image", namespace, architecture="RingAllReduce", image=MISSING_IMAGE,
                                    runPolicy={"startupDeadlineSeconds": STARTUP_DEADLINE})
    applied = submit_failing(kube, launcher, namespace, manifest, report_on_failure)
    # The bound, plus the pass that notices it (the operator wakes at the deadline) and the API's latency.
    dte = wait_terminal(kube, namespace, "no-image", STARTUP_DEADLINE + 60)
    log(f"no-image: {phase(dte)} {time.monotonic() - applied:.0f}s after it was applied")
    assert phase(dte) == "Failed", describe_dte(kube, namespace, "no-image")
    failed = condition(dte, "Failed")
    assert failed["reason"] == "StartupDeadlineExceeded", failed
    assert failed["message"].startswith("trial no-image-0: pod no-image-0-worker-"), failed
    assert f"did not start within startupDeadlineSeconds={STARTUP_DEADLINE} of its creation: " in failed["message"]
    # The kubelet's own words, whole: ErrImageNeverPull under the e2e's pull policy Never, ImagePullBackOff elsewhere.
    assert f'"{MISSING_IMAGE}"' in failed["message"], failed
    assert trials(dte)[0]["restarts"] == 0, trials(dte)
    warning = wait_for("the StartupDeadlineExceeded Warning event", lambda: next(
        (e for e in kube.events(namespace, "no-image") if e["type"] == "Warning"
         and e["reason"] == "StartupDeadlineExceeded"), None), 30, interval=1)
    assert MISSING_IMAGE in warning["message"], warning
    # Nothing is left holding the node's CPU.
    wait_for("no-image's pods to be deleted", lambda: kube.experiment_pods(namespace, "no-image") == [], 60)


def test_a_model_that_cannot_be_imported_fails_the_trial_at_once_without_a_restart(kube, namespace, launcher,
                                                                                 report_on_failure):
    manifest = e2e_specs.experiment("no-model", namespace, architecture="RingAllReduce",
                                    model={"name": "nosuch_models.nets:tiny"}, runPolicy={"backoffLimit": 3})
    submit_failing(kube, launcher, namespace, manifest, report_on_failure)
    dte = wait_terminal(kube, namespace, "no-model", RUN_TIMEOUT)
    assert phase(dte) == "Failed", describe_dte(kube, namespace, "no-model")
    failed = condition(dte, "Failed")
    assert failed["reason"] == "PermanentFailure", failed
    assert trials(dte)[0]["restarts"] == 0 and not condition(dte, "Restarting"), trials(dte)
    message = failed["message"]
    assert "failed (permanent): ModelError: model 'nosuch_models.nets:tiny': importing nosuch_models.nets failed: " \
           "cannot import 'nosuch_models'" in message, message
    # Whole, to the words that say what to do.
    assert "install it in the image or put it on PYTHONPATH" in message, message
    assert message.endswith("not restarted: the runtime reported a failure no restart can fix"), message
    checks.assert_events(kube, namespace, "no-model", "PermanentFailure")


PAIR_POD = {"cpu": "500m", "memory": "1536Mi"}  # two ranks' torch (one thread each) and their agent


def test_a_rank_killed_inside_a_two_rank_pod_fails_the_trial_within_60_s_naming_it_and_keeps_the_records(
        kube, namespace, launcher, mlflow, report_on_failure):
    name = "pod-pair"
    manifest = slow_experiment(name, namespace, architecture="RingAllReduce",
                               workers={"replicas": 4, "ranksPerPod": 2, "resources": dict(PAIR_POD)},
                               runPolicy={"backoffLimit": 0, "cleanPodPolicy": "None"})
    dte = start(kube, launcher, namespace, manifest, report_on_failure)
    pods = sorted(p["metadata"]["name"] for p in kube.experiment_pods(namespace, name))
    assert pods == [f"{name}-0-worker-0", f"{name}-0-worker-1"], pods  # 4 ranks in 2 pods
    reached = status(dte)["progress"]["iteration"]
    victim = f"{name}-0-worker-1"  # ranks 2 and 3: rank 3 is its local rank 1
    pid = kill_local_rank_1(kube, namespace, victim)
    killed_at = time.monotonic()
    log(f"{name}: SIGKILLed rank 3 (pid {pid} in {victim}) at iteration {reached}")

    dte = wait_terminal(kube, namespace, name, 60)
    log(f"{name}: {phase(dte)} {time.monotonic() - killed_at:.0f} s after the kill")
    assert phase(dte) == "Failed", describe_dte(kube, namespace, name)
    failed = condition(dte, "Failed")
    assert failed["reason"] == "BackoffLimitExceeded", failed
    # The pod's agent exits as its rank did (137) and names it: rank, pod and local rank, signal.
    assert (f"pod {victim}: container trainer exited with code 137 (Error): ringleader: rank 3 (worker-1 local rank 1, "
            "killed by SIGKILL) failed: ") in failed["message"], failed
    assert "backoffLimit 0 reached after 0 restarts" in failed["message"], failed
    # No process is left in either pod: each agent exits only once its ranks are reaped, and takes its container down.
    ended = wait_for("both pods' trainers to have ended", lambda: (lambda found: all(
        p["status"].get("phase") == "Failed"
        and all("terminated" in c["state"] for c in p["status"]["containerStatuses"])
        for p in found) and found)(kube.experiment_pods(namespace, name)), 60,
        describe=lambda: str([(p["metadata"]["name"], p["status"].get("phase"))
                              for p in kube.experiment_pods(namespace, name)]))
    assert len(ended) == 2

    # Every rank but the dead one published what it recorded; each rank run names its node, pod and local rank.
    experiment_id, trial_run = status(dte)["mlflow"]["experimentId"], trials(dte)[0]["runId"]
    def survivors_ended():
        found = {int(r.data.tags["ringleader.rank"]): r for r in mlflow.children(experiment_id, trial_run)}
        return all(rank in found and found[rank].info.status in ("FAILED", "KILLED") for rank in (0, 1, 2)) and found
    runs = wait_for("the surviving ranks' runs to have ended", survivors_ended, 60)
    for rank in (0, 1, 2):
        tags = runs[rank].data.tags
        assert (tags.get("ringleader.pod"), tags.get("ringleader.localRank")) == (
            f"worker-{rank // 2}", str(rank % 2)), tags
        assert tags.get("ringleader.node"), tags
        history = (mlflow.history(runs[rank].info.run_id, "time/iteration_ms")
                   + mlflow.history(runs[rank].info.run_id, "warmup/time/iteration_ms"))
        steps = sorted(point.step for point in history)
        # BSP: every rank had recorded at least the iteration the status showed before the kill, each step once.
        assert len(steps) >= reached - 1 and steps == list(range(len(steps))), (rank, reached, steps[-5:])
    assert runs[2].info.status == "KILLED"  # rank 3's peer in its pod, stopped by the agent after publishing


def test_the_operator_restarted_mid_run_resumes_without_duplicate_pods(kube, namespace, launcher, release, mlflow,
                                                                       report_on_failure):
    manifest = slow_experiment("op-restart", namespace, architecture="ParameterServer",
                               runPolicy={"cleanPodPolicy": "None"})
    start(kube, launcher, namespace, manifest, report_on_failure)
    original = {p["metadata"]["name"]: p["metadata"]["uid"] for p in kube.experiment_pods(namespace, "op-restart")}
    assert sorted(original) == ["op-restart-0-ps-0", "op-restart-0-worker-0", "op-restart-0-worker-1"], original

    selector = "app.kubernetes.io/component=operator"
    old = [p["metadata"]["name"] for p in kube.pods(release["namespace"], selector)]
    assert len(old) == 1, old
    kube.kubectl("delete", "pod", "-n", release["namespace"], old[0], "--wait=false")
    log(f"op-restart: deleted the operator pod {old[0]}")

    seen: dict[str, str] = dict(original)
    most = len(original)

    def watch():
        nonlocal most
        pods = kube.experiment_pods(namespace, "op-restart")
        most = max(most, len(pods))
        seen.update({p["metadata"]["name"]: p["metadata"]["uid"] for p in pods})
        return phase(kube.dte(namespace, "op-restart")) in ("Succeeded", "Failed")

    def new_operator_ready():
        watch()
        return [p["metadata"]["name"] for p in kube.pods(release["namespace"], selector)
                if p["metadata"]["name"] not in old and not p["metadata"].get("deletionTimestamp")
                and any(c.get("ready") for c in p["status"].get("containerStatuses") or [])]

    new = wait_for("a new operator pod to be ready", new_operator_ready, 180, interval=1)
    log(f"op-restart: new operator pod {new}")
    wait_for("op-restart to finish", watch, RUN_TIMEOUT, interval=1,
             describe=lambda: describe_dte(kube, namespace, "op-restart"))
    dte = kube.dte(namespace, "op-restart")
    assert phase(dte) == "Succeeded" and is_true(dte, "Succeeded"), describe_dte(kube, namespace, "op-restart")
    assert trials(dte)[0]["restarts"] == 0, trials(dte)
    assert most == len(original) and seen == original, ("pods were duplicated or recreated: "
                                                        f"{seen} (at most {most} at once)")
    assert status(dte)["progress"]["iteration"] == e2e_specs.SLOW_ITERATIONS
    checks.assert_summary(status(dte)["summary"], "op-restart")
    # No second trial run was created by the new operator; every rank ran once.
    experiment_id, parent = status(dte)["mlflow"]["experimentId"], status(dte)["mlflow"]["runId"]
    wait_for("the parent run to be FINISHED", lambda: mlflow.status(parent) == "FINISHED", 60)
    trial_runs = mlflow.children(experiment_id, parent)
    assert [r.info.run_id for r in trial_runs] == [trials(dte)[0]["runId"]], [r.info.run_id for r in trial_runs]
    assert len(mlflow.children(experiment_id, trials(dte)[0]["runId"])) == 3



def test_a_request_no_node_can_hold_fails_within_30_s_naming_the_request_and_the_largest_node(
        kube, namespace, report_on_failure):
    """64 CPUs of nodes that have 2: the operator, which reads the nodes (cluster-wide install), fails the trial
    before creating a pod, setting the request against the largest node's allocatable; without node access the
    scheduler's verdict (preemption not helpful on every node) does it, also at once. Applied directly: its pods
    never hold a CPU, so the launcher's budget does not apply."""
    name = "too-large"
    report_on_failure(name)
    manifest = e2e_specs.experiment(name, namespace, architecture="RingAllReduce",
                                    workers={"replicas": 2, "resources": {"cpu": "64", "memory": "256Mi"}})
    nodes = [n for n in kube.json("get", "nodes")["items"] if not n["spec"].get("unschedulable")]
    largest = max(nodes, key=lambda n: millicores(n["status"]["allocatable"]["cpu"]))
    allocatable = capacity.quantity_text("cpu",
                                         decimal.Decimal(millicores(largest["status"]["allocatable"]["cpu"])) / 1000)
    applied = time.monotonic()
    kube.apply(manifest)
    dte = wait_terminal(kube, namespace, name, 30)
    took = time.monotonic() - applied
    log(f"{name}: {phase(dte)} after {took:.1f} s: {trials(dte)[0].get('message')}")
    assert phase(dte) == "Failed", describe_dte(kube, namespace, name)
    trial = trials(dte)[0]
    assert trial["reason"] == "RequestFitsNoNode", trial
    assert trial["message"].startswith(f"pod {name}-0-worker-0 requests cpu 64") or \
        trial["message"].startswith(f"pod {name}-0-worker-1 requests cpu 64"), trial
    named = f"the largest node, {largest['metadata']['name']}, has cpu {allocatable} allocatable"
    assert named in trial["message"], (named, trial)  # the request set against the capacity
    assert condition(dte, "Running")["message"] == "the trial never started"
    assert kube.experiment_pods(namespace, name) == []  # none was ever created


def test_a_namespace_deleted_mid_trial_logs_no_restart_and_no_rbac_blame(kube, release, report_on_failure):
    """The namespace of a training experiment deleted: the namespace controller takes its pods, and the API server
    refuses anything new there. The operator sees no pod failure to restart and no RBAC problem: it logs that the
    namespace is going, and nothing of a restart, a forbidden call or RBAC. Its own namespace, applied directly."""
    doomed = f"e2e-doomed-{secrets.token_hex(3)}"
    name = "homeless"
    kube.kubectl("create", "namespace", doomed)
    try:
        wait_for("the default ServiceAccount", lambda: kube.get("serviceaccount", doomed, "default"), 60, interval=1)
        kube.apply(slow_experiment(name, doomed, architecture="RingAllReduce"))
        wait_for(f"{name} to be training", lambda: phase(kube.dte(doomed, name)) == "Running" and status(
            kube.dte(doomed, name)).get("progress", {}).get("iteration", 0) >= 1, RUN_TIMEOUT, interval=1,
            describe=lambda: describe_dte(kube, doomed, name))
        since = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 5))
        kube.kubectl("delete", "namespace", doomed, "--wait=false")

        def operator_lines() -> list[str]:
            found = kube.kubectl("logs", "-n", release["namespace"], f"deploy/{release['operator']}",
                                 f"--since-time={since}", check=False).stdout
            return [line for line in found.splitlines() if doomed in line]

        said = wait_for("the operator to say the namespace is going", lambda: (lambda lines: any(
            "its namespace is being deleted" in line for line in lines) and lines)(operator_lines()), 120, interval=2)
        kube.kubectl("wait", "--for=delete", f"namespace/{doomed}", "--timeout=180s", timeout=200, check=False)
        lines = operator_lines()
        blamed = [line for line in lines if "Restarting" in line or "RBAC" in line]
        log(f"{doomed}: the operator said {len(lines)} lines of it, e.g. {said[-1][-200:]}")
        assert not blamed, blamed
    finally:
        kube.kubectl("delete", "namespace", doomed, "--ignore-not-found", "--wait=false", check=False)
