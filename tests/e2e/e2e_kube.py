"""kubectl, bounded waits with progress output, and a CPU-budget launcher for the e2e tests.

tests/e2e is deliberately not a package (like tests/operator): pytest puts this directory on sys.path,
so helper modules import by name; they are prefixed `e2e_` so they never collide with tests/operator's.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import sys
import threading
import time
from typing import Any, Callable

import yaml

DTE = "distributedtrainingexperiments.ringleader.dev"
LABEL_EXPERIMENT = "ringleader.dev/experiment"
TERMINAL = ("Succeeded", "Failed")


_capture = None  # pytest's capture manager, set by conftest's pytest_configure


def log(message: str) -> None:
    """Progress output that pytest's capture does not swallow (bounded waits say what they wait for)."""
    line = f"[e2e {time.strftime('%H:%M:%S')}] {message}"
    if _capture is not None:
        with _capture.global_and_fixture_disabled():
            print(line, file=sys.stderr, flush=True)
    else:
        print(line, file=sys.stderr, flush=True)


def wait_for(what: str, probe: Callable[[], Any], timeout: float, interval: float = 2.0,
             describe: Callable[[], str] | None = None, every: float = 15.0) -> Any:
    """Call `probe` until it returns something truthy (returned), at most `timeout` seconds.

    Prints a progress line every `every` seconds (with `describe()` when given); on timeout raises
    TimeoutError naming `what` and the last description."""
    start = time.monotonic()
    last_report = start
    while True:
        value = probe()
        if value:
            elapsed = time.monotonic() - start
            if elapsed > every:
                log(f"ok after {elapsed:.0f}s: {what}")
            return value
        now = time.monotonic()
        if now - start > timeout:
            state = describe() if describe else ""
            raise TimeoutError(f"timed out after {timeout:.0f}s waiting for {what}"
                               + (f"; last seen: {state}" if state else ""))
        if now - last_report >= every:
            last_report = now
            log(f"waiting for {what} ({now - start:.0f}s/{timeout:.0f}s)" + (f": {describe()}" if describe else ""))
        time.sleep(interval)


class KubectlError(RuntimeError):
    def __init__(self, args: list[str], result: subprocess.CompletedProcess):
        self.result = result
        super().__init__(f"kubectl {' '.join(args)} exited {result.returncode}: {result.stderr.strip()[-2000:]}")


@dataclasses.dataclass
class Kube:
    """kubectl/helm of one cluster (an environment with KUBECONFIG, and the binaries)."""

    env: dict[str, str]
    kubectl_bin: str
    helm_bin: str

    def kubectl(self, *args: str, input: str | None = None, timeout: float = 60,
                check: bool = True) -> subprocess.CompletedProcess:
        cmd = [self.kubectl_bin, "--request-timeout=30s", *args]
        try:
            result = subprocess.run(cmd, input=input, env=self.env, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"kubectl {' '.join(args)} did not finish in {timeout:.0f}s") from error
        if check and result.returncode != 0:
            raise KubectlError(list(args), result)
        return result

    def helm(self, *args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess:
        try:
            result = subprocess.run([self.helm_bin, *args], env=self.env, capture_output=True, text=True,
                                    timeout=timeout)
        except subprocess.TimeoutExpired as error:
            raise RuntimeError(f"helm {' '.join(args)} did not finish in {timeout:.0f}s") from error
        if check and result.returncode != 0:
            raise RuntimeError(f"helm {' '.join(args)} exited {result.returncode}: {result.stderr.strip()[-3000:]}")
        return result

    def json(self, *args: str, timeout: float = 60) -> Any:
        return json.loads(self.kubectl(*args, "-o", "json", timeout=timeout).stdout)

    def apply(self, manifest: dict | str, check: bool = True) -> subprocess.CompletedProcess:
        text = manifest if isinstance(manifest, str) else yaml.safe_dump(manifest, sort_keys=False)
        return self.kubectl("apply", "-f", "-", input=text, check=check)

    def get(self, kind: str, namespace: str | None, name: str) -> dict | None:
        args = ["get", kind, name, "--ignore-not-found", "-o", "json"]
        if namespace:
            args[1:1] = ["-n", namespace]
        out = self.kubectl(*args).stdout.strip()
        return json.loads(out) if out else None

    def dte(self, namespace: str, name: str) -> dict | None:
        return self.get(DTE, namespace, name)

    def pods(self, namespace: str, selector: str) -> list[dict]:
        return self.json("get", "pods", "-n", namespace, "-l", selector)["items"]

    def experiment_pods(self, namespace: str, experiment: str) -> list[dict]:
        return sorted(self.pods(namespace, f"{LABEL_EXPERIMENT}={experiment}"), key=lambda p: p["metadata"]["name"])

    def events(self, namespace: str, name: str) -> list[dict]:
        return self.json("get", "events", "-n", namespace, "--field-selector",
                         f"involvedObject.name={name},involvedObject.kind=DistributedTrainingExperiment")["items"]

    def pod_logs(self, namespace: str, name: str, tail: int = 40) -> str:
        result = self.kubectl("logs", "-n", namespace, name, f"--tail={tail}", check=False)
        return result.stdout + result.stderr


# ------------------------------------------------------------------------------------------ status queries

def status(dte: dict | None) -> dict:
    return ((dte or {}).get("status")) or {}


def phase(dte: dict | None) -> str | None:
    return status(dte).get("phase")


def condition(dte: dict | None, type_: str) -> dict:
    for found in status(dte).get("conditions") or []:
        if found["type"] == type_:
            return found
    return {}


def is_true(dte: dict | None, type_: str) -> bool:
    return condition(dte, type_).get("status") == "True"


def trials(dte: dict | None) -> list[dict]:
    return status(dte).get("trials") or []


def describe_dte(kube: Kube, namespace: str, name: str) -> str:
    """One line for progress output: phase, progress, each trial's phase and reason, pod phases."""
    dte = kube.dte(namespace, name)
    if dte is None:
        return f"{name}: absent"
    parts = [f"{name}: phase={phase(dte)} progress={status(dte).get('progressText')}"]
    for trial in trials(dte):
        parts.append(f"{trial['name']}={trial.get('phase')}/{trial.get('reason')} "
                     f"({(trial.get('message') or '')[:160]})")
    try:
        pods = kube.experiment_pods(namespace, name)
        parts.append("pods: " + ", ".join(f"{p['metadata']['name']}={p['status'].get('phase')}" for p in pods))
    except Exception as error:  # noqa: BLE001 - a description never fails a wait
        parts.append(f"pods: ? ({error})")
    return "; ".join(parts)


def wait_terminal(kube: Kube, namespace: str, name: str, timeout: float) -> dict:
    """Wait for Succeeded or Failed; return the experiment."""
    return wait_for(f"experiment {name} to finish",
                    lambda: (lambda d: phase(d) in TERMINAL and d)(kube.dte(namespace, name)),
                    timeout, describe=lambda: describe_dte(kube, namespace, name))


def explain_failure(kube: Kube, namespace: str, name: str) -> str:
    """The experiment's status and its pods' logs, for assertion messages."""
    dte = kube.dte(namespace, name)
    lines = [json.dumps(status(dte), indent=1)[:6000]]
    for pod in kube.experiment_pods(namespace, name):
        pod_name = pod["metadata"]["name"]
        lines.append(f"--- pod {pod_name} ({pod['status'].get('phase')}) log tail")
        lines.append(kube.pod_logs(namespace, pod_name, tail=25)[-3000:])
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------ CPU budget

def millicores(quantity: str | int | float | None) -> int:
    if quantity is None:
        return 0
    text = str(quantity)
    if text.endswith("m"):
        return int(text[:-1])
    return int(round(float(text) * 1000))


def free_cpu(kube: Kube) -> int:
    """Allocatable CPU of the schedulable nodes minus the requests of every pod not finished, in millicores."""
    nodes = kube.json("get", "nodes")["items"]
    allocatable = sum(millicores(n["status"]["allocatable"]["cpu"]) for n in nodes
                      if not n["spec"].get("unschedulable"))
    pods = kube.json("get", "pods", "-A", "--field-selector", "status.phase!=Succeeded,status.phase!=Failed")["items"]
    requested = 0
    for pod in pods:
        for container in pod["spec"].get("containers", []):
            requested += millicores(((container.get("resources") or {}).get("requests") or {}).get("cpu"))
    return allocatable - requested


@dataclasses.dataclass
class _Entry:
    name: str
    manifest: dict
    cost: int
    priority: int
    order: int
    admitted_at: float | None = None
    finished: bool = False
    error: str | None = None


class Launcher:
    """Applies experiments as the node's CPU allows, so trials never wait half-scheduled.

    Pods request what they are limited to (the operator renders Guaranteed pods), so a trial fits
    or does not; admitting experiments only when their pods fit keeps every gang whole and lets
    several small experiments run side by side on a 2-core node. Higher priority goes first; among
    equals, submission order; a later experiment that fits may start before an earlier one that
    does not (backfill). An experiment gives its CPU back when it ends, or when `release`d."""

    def __init__(self, kube: Kube, namespace: str, budget: int):
        self.kube, self.namespace, self.budget = kube, namespace, budget
        self._entries: dict[str, _Entry] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._order = 0
        self._thread = threading.Thread(target=self._loop, name="e2e-launcher", daemon=True)
        self._thread.start()
        log(f"launcher: CPU budget {budget}m for experiments in {namespace}")

    def submit(self, manifest: dict, cost: int, priority: int = 0) -> str:
        name = manifest["metadata"]["name"]
        if cost > self.budget:
            raise ValueError(f"experiment {name} needs {cost}m CPU but the budget is {self.budget}m")
        with self._lock:
            self._order += 1
            self._entries[name] = _Entry(name, manifest, cost, priority, self._order)
        self._wake.set()
        return name

    def wait_admitted(self, name: str, timeout: float) -> float:
        """Wait until `name` is applied; return how long it waited in the queue."""
        start = time.monotonic()
        entry = self._entries[name]
        wait_for(f"experiment {name} to be admitted ({entry.cost}m CPU)",
                 lambda: entry.admitted_at is not None or entry.error,
                 timeout, interval=0.5, describe=self.describe)
        if entry.error:
            raise RuntimeError(f"applying {name} failed: {entry.error}")
        return time.monotonic() - start

    def release(self, name: str) -> None:
        with self._lock:
            if name in self._entries:
                self._entries[name].finished = True
        self._wake.set()

    def in_use(self) -> int:
        return sum(e.cost for e in self._entries.values() if e.admitted_at is not None and not e.finished)

    def describe(self) -> str:
        with self._lock:
            running = [e.name for e in self._entries.values() if e.admitted_at is not None and not e.finished]
            queued = [e.name for e in self._entries.values() if e.admitted_at is None and not e.error]
        return f"in use {self.in_use()}m of {self.budget}m; running {running}; queued {queued}"

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
        self._thread.join(timeout=10)

    def _loop(self) -> None:
        while not self._stop.is_set():
            try:
                self._step()
            except Exception as error:  # noqa: BLE001 - keep admitting; the waits report what is stuck
                log(f"launcher: {error}")
            self._wake.wait(2.0)
            self._wake.clear()

    def _step(self) -> None:
        with self._lock:
            active = [e for e in self._entries.values() if e.admitted_at is not None and not e.finished]
        if active:
            found = {d["metadata"]["name"]: d for d in self.kube.json("get", DTE, "-n", self.namespace)["items"]}
            for entry in active:
                dte = found.get(entry.name)
                if dte is None or phase(dte) in TERMINAL:
                    # Terminal pods free their CPU; wait for running ones (parameter servers being stopped).
                    busy = [p for p in self.kube.experiment_pods(self.namespace, entry.name)
                            if p["status"].get("phase") not in ("Succeeded", "Failed")]
                    if not busy:
                        entry.finished = True
        with self._lock:
            queued = sorted((e for e in self._entries.values() if e.admitted_at is None and not e.error),
                            key=lambda e: (-e.priority, e.order))
        for entry in queued:
            if self.in_use() + entry.cost <= self.budget:
                result = self.kube.apply(entry.manifest, check=False)
                if result.returncode != 0:
                    entry.error = result.stderr.strip()
                    log(f"launcher: apply {entry.name} failed: {entry.error}")
                    continue
                entry.admitted_at = time.monotonic()
                log(f"launcher: applied {entry.name} ({entry.cost}m); {self.describe()}")
