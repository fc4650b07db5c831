"""The operator at scale, on the apiserver tier: how fast it creates pods, and what it costs while trials run.

Runs a real etcd, kube-apiserver and kube-controller-manager on 127.0.0.1 (tests/operator/apiserver_tier.py,
binaries from cluster/build-kubernetes.sh and cluster/build-tools.sh etcd) and the operator as the operator
tests run it (tests/operator/operator_process.py: the chart's RBAC, `python -m ringleader.controller`).
There is no kubelet and no scheduler: the benchmark plays their part (tests/operator/kubelet.py) and says so.
Three measurements, the first two beside a floor (the API server's own ceiling, below):

    # one big trial: seconds from the experiment's creation until all its pods exist (3 repeats)
    .venv/bin/python bench/bench_operator.py big --workers 512 --repeats 3
    # many experiments at once: seconds until every pod exists, and per experiment (p50, p95)
    .venv/bin/python bench/bench_operator.py burst --experiments 1000 --workers 8
    # running experiments: the operator's CPU-s per minute, API requests/s and RSS, per progress interval
    .venv/bin/python bench/bench_operator.py steady --experiments 100 --workers 8 --poll-interval 1 15

The floor: a bare client (no operator; `requests` in as many threads as the operator's `--api-concurrency`)
creates the same rendered pods with the same concurrency, so each operator time is reported beside the
fastest the API server and etcd on this machine create those pods, and their ratio says how much of a miss
is the operator's and how much the machine's. Floor pods carry another managed-by label: the operator never
sees them. `--no-floor` skips it.

`--operator-path DIR` runs another tree's operator package (e.g. `git archive <commit> operator | tar -x -C
DIR`) beside this one, for before/after numbers. The operator's cyclic collector is timed too (bench/gc_probe,
first on its PYTHONPATH): `--operator-env RINGLEADER_BENCH_GC_THRESHOLDS=700,10,10` tries other thresholds on
an operator that sets none of its own. Nothing asserts a timing; results go to
bench/results/operator-<scenario>.json. Results and how to read them: docs/performance.md, "The operator at scale".
"""

from __future__ import annotations

import argparse
import concurrent.futures
import json
import os
import pathlib
import platform
import statistics
import sys
import tempfile
import threading
import time

import requests
import requests.adapters

ROOT = pathlib.Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "operator"), str(ROOT / "tests"), str(ROOT / "operator")]

import apiserver_tier  # noqa: E402 -- the test helpers are not a package; see tests/operator/conftest.py
import kubelet  # noqa: E402
import operator_process  # noqa: E402
from apiserver_client import Client, wait_for  # noqa: E402
from ringleader import api, topology  # noqa: E402
from ringleader.api import constants  # noqa: E402

SMALL = {"cpu": "100m", "memory": "128Mi"}
MANAGED = f"{constants.LABEL_MANAGED_BY}={constants.MANAGED_BY}"
CLIENT_THREADS = 16  # the benchmark's own requests (creating experiments, playing the kubelet)
FLOOR_MANAGED_BY = "ringleader-bench-floor"  # floor pods: selected by the floor's watch, never by the operator's
GC_PROBE = ROOT / "bench" / "gc_probe"  # first on the operator's PYTHONPATH: times its cyclic collector
FLOOR_THREADS = 32  # the operator's default --api-concurrency: the floor creates pods as many at a time


def experiment(name: str, namespace: str, workers: int) -> dict:
    """A ring-allreduce experiment of `workers` workers, one trial, small pods."""
    return {"apiVersion": constants.API_VERSION, "kind": constants.KIND,
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"architecture": "RingAllReduce", "workers": {"replicas": workers, "resources": SMALL},
                     "model": {"name": "mlp", "iterations": kubelet.ITERATIONS, "warmupIterations": 1}}}


def add_namespace(admin: Client, name: str) -> None:
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}, exists_ok=True)
    admin.create({"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "default", "namespace": name}},
                 exists_ok=True)


def quantile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]


class PodWatch:
    """Every trial pod's first appearance (monotonic seconds), from one watch of the API server."""

    def __init__(self, admin: Client, selector: str = MANAGED) -> None:
        self.selector = selector
        self.seen: dict[tuple[str, str], float] = {}
        self.pods: dict[tuple[str, str], dict] = {}
        self._admin = admin
        self._stop = threading.Event()
        self._lock = threading.Lock()
        listed = admin.request("GET", "/api/v1/pods", labelSelector=selector)
        self._version = listed["metadata"]["resourceVersion"]
        self._thread = threading.Thread(target=self._watch, name="pod-watch", daemon=True)
        self._thread.start()

    def _watch(self) -> None:
        while not self._stop.is_set():
            try:
                response = self._admin.session.get(
                    f"{self._admin.url}/api/v1/pods", stream=True, timeout=(5, 30),
                    params={"watch": "1", "labelSelector": self.selector, "resourceVersion": self._version,
                            "allowWatchBookmarks": "true", "timeoutSeconds": "20"})
                for line in response.iter_lines():
                    if self._stop.is_set():
                        return
                    event = json.loads(line)
                    obj = event["object"]
                    self._version = obj["metadata"].get("resourceVersion", self._version)
                    if event["type"] == "ADDED":
                        key = (obj["metadata"]["namespace"], obj["metadata"]["name"])
                        with self._lock:
                            self.seen.setdefault(key, time.monotonic())
                            self.pods[key] = obj
            except requests.RequestException:
                time.sleep(0.2)

    def in_namespace(self, namespace: str) -> dict[tuple[str, str], float]:
        with self._lock:
            return {k: t for k, t in self.seen.items() if k[0] == namespace}

    def close(self) -> None:
        self._stop.set()


class Probe:
    """The operator process's CPU seconds and memory (/proc), its cyclic collector's work (bench/gc_probe), and the
    API server's request counters (/metrics)."""

    def __init__(self, admin: Client, pid: int, gc_file: pathlib.Path) -> None:
        self.admin, self.pid, self.gc_file = admin, pid, gc_file
        self.tick = os.sysconf("SC_CLK_TCK")
        self._gc = self.collector()

    def collector(self) -> dict[str, dict[str, float]]:
        """Collections and seconds so far by generation ("0", "1", "2"; 2 is a full collection), as of the last
        second; the probe writes its file a second after the operator starts."""
        wait_for("the operator's collector statistics", self.gc_file.exists, timeout=30, interval=0.2)
        return json.loads(self.gc_file.read_text())["generations"]

    def collector_since(self) -> dict[str, float]:
        """The collector's work since this probe was made: its seconds, and how many full collections."""
        time.sleep(1.1)  # the probe's next write
        now = self.collector()
        return {"seconds": round(sum(now[g]["seconds"] - self._gc[g]["seconds"] for g in now), 2),
                "full_collections": now["2"]["collections"] - self._gc["2"]["collections"]}

    def cpu_seconds(self) -> float:
        fields = pathlib.Path(f"/proc/{self.pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / self.tick  # utime + stime

    def memory_mb(self) -> dict[str, float]:
        found = {}
        for line in pathlib.Path(f"/proc/{self.pid}/status").read_text().splitlines():
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM"):
                found[key] = int(value.split()[0]) / 1024
        return found

    def requests(self) -> dict[str, float]:
        """Resource requests served so far (watches left out), by 'VERB resource[/subresource]'."""
        text = self.admin.session.get(f"{self.admin.url}/metrics", timeout=30).text
        counts: dict[str, float] = {}
        for line in text.splitlines():
            if not line.startswith("apiserver_request_total{"):
                continue
            labels_text, _, value = line.partition("} ")
            labels = dict(part.split("=", 1) for part in labels_text[len("apiserver_request_total{"):].split(","))
            labels = {k: v.strip('"') for k, v in labels.items()}
            if labels.get("verb") in ("WATCH", "WATCHLIST") or not labels.get("resource"):
                continue
            key = f"{labels['verb']} {labels['resource']}" + (f"/{labels['subresource']}" if labels.get("subresource")
                                                              else "")
            counts[key] = counts.get(key, 0.0) + float(value)
        return counts


class Bench:
    """An apiserver tier, the CRD, the chart's cluster-wide RBAC, and operators started on demand."""

    def __init__(self, directory: pathlib.Path, operator_path: str | None, operator_env: dict[str, str]) -> None:
        self.directory = directory
        self.operator_path = operator_path
        self.operator_env = operator_env
        self._tier = apiserver_tier.running(directory / "apiserver")
        self.server = self._tier.__enter__()
        self.admin = Client(self.server.url, self.server.admin_token, self.server.ca)
        operator_process.install_crds(self.admin)
        token = operator_process.chart_rbac(self.admin, "rlc", []) or self.server.admin_token
        self.kubeconfig = apiserver_tier.kubeconfig(directory / "operator.kubeconfig", self.server.url, token,
                                                    self.server.ca)
        self.operator: operator_process.Operator | None = None
        self.gc_file = directory / "operator-gc.json"

    def start_operator(self, args: list[str]) -> operator_process.Operator:
        self.stop_operator()
        self.gc_file.unlink(missing_ok=True)
        env = {"PYTHONPATH": os.pathsep.join((str(GC_PROBE), self.operator_path or str(ROOT / "operator"))),
               "RINGLEADER_BENCH_GC_FILE": str(self.gc_file), **self.operator_env}
        self.operator = operator_process.Operator(self.kubeconfig, args, self.directory / "operator.log", env,
                                                  verbose=False).start()
        return self.operator

    def stop_operator(self) -> None:
        if self.operator is not None:
            self.operator.stop()
            self.operator = None

    def close(self) -> None:
        self.stop_operator()
        self._tier.__exit__(None, None, None)


def create_all(admin: Client, objects: list[dict]) -> dict[str, float]:
    """POST every object from CLIENT_THREADS threads; when each POST returned (monotonic seconds), by name."""
    def post(obj: dict) -> tuple[str, float]:
        admin.create(obj)
        return obj["metadata"]["name"], time.monotonic()

    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        return dict(pool.map(post, objects))


def wait_for_pods(watch: PodWatch, namespace: str, count: int, timeout: float) -> dict[tuple[str, str], float]:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        seen = watch.in_namespace(namespace)
        if len(seen) >= count:
            return seen
        time.sleep(0.05)
    seen = watch.in_namespace(namespace)
    raise RuntimeError(f"only {len(seen)} of {count} pods in {namespace} after {timeout:.0f} s")


def by_experiment(watch: PodWatch, seen: dict[tuple[str, str], float]) -> dict[str, list[float]]:
    found: dict[str, list[float]] = {}
    for key, at in seen.items():
        name = watch.pods[key]["metadata"]["labels"][constants.LABEL_EXPERIMENT]
        found.setdefault(name, []).append(at)
    return found


def warm_up(bench: Bench, watch: PodWatch) -> None:
    """One one-worker experiment through the operator, so that no measurement includes its start."""
    namespace = f"warm-up-{os.getpid()}"
    add_namespace(bench.admin, namespace)
    create_all(bench.admin, [experiment("warm-up", namespace, 1)])
    wait_for_pods(watch, namespace, 1, 120)


# -- the floor: the same pods, created by a bare client ----------------------------------------------------------


def floor_pods(manifest: dict) -> list[dict]:
    """The pods the operator renders for `manifest`'s one trial, unowned and labelled for the floor's watch."""
    trial = api.expand(api.parse(manifest, "floor")).trials[0]
    pods = [o for o in topology.render(trial) if o["kind"] == "Pod"]
    for pod in pods:
        pod["metadata"]["labels"][constants.LABEL_MANAGED_BY] = FLOOR_MANAGED_BY
    return pods


class Floor:
    """A bare client: POSTs pods from FLOOR_THREADS threads over as many kept-open connections, and a watch of them."""

    def __init__(self, bench: Bench) -> None:
        self.client = Client(bench.server.url, bench.server.admin_token, bench.server.ca)
        adapter = requests.adapters.HTTPAdapter(pool_connections=1, pool_maxsize=FLOOR_THREADS)
        self.client.session.mount("https://", adapter)
        self.pool = concurrent.futures.ThreadPoolExecutor(FLOOR_THREADS, thread_name_prefix="floor")
        self.watch = PodWatch(bench.admin, f"{constants.LABEL_MANAGED_BY}={FLOOR_MANAGED_BY}")

    def create(self, pods: list[dict]) -> list[concurrent.futures.Future]:
        return [self.pool.submit(self.client.create, pod) for pod in pods]

    def close(self) -> None:
        self.watch.close()
        self.pool.shutdown(wait=True)


def floor_big(bench: Bench, floor: Floor, namespace: str, workers: int, timeout: float) -> float:
    """Seconds from the first POST until the floor's watch has seen all of one big trial's pods."""
    add_namespace(bench.admin, namespace)
    pods = floor_pods(experiment("big", namespace, workers))
    started = time.monotonic()
    futures = floor.create(pods)
    seen = wait_for_pods(floor.watch, namespace, len(pods), timeout)
    for future in futures:
        future.result()
    return max(seen.values()) - started


def floor_burst(bench: Bench, args) -> dict:
    """The burst with a bare client in the operator's place (the operator stopped): the benchmark POSTs the
    experiments as in `burst`, and as each POST returns, that experiment's pods are queued to the floor's pool."""
    namespace = f"floor-burst-{os.getpid()}"
    add_namespace(bench.admin, namespace)
    floor = Floor(bench)
    created: dict[str, float] = {}
    futures: list[concurrent.futures.Future] = []
    lock = threading.Lock()
    try:
        manifests = [experiment(f"e-{i:04d}", namespace, args.workers) for i in range(args.experiments)]

        def post(manifest: dict) -> None:
            bench.admin.create(manifest)
            at = time.monotonic()
            queued = floor.create(floor_pods(manifest))
            with lock:
                created[manifest["metadata"]["name"]] = at
                futures.extend(queued)

        started = time.monotonic()
        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
            list(pool.map(post, manifests))
        posted = time.monotonic() - started
        seen = wait_for_pods(floor.watch, namespace, args.experiments * args.workers, args.timeout)
        for future in futures:
            future.result()
        latencies = [max(times) - created[name] for name, times in by_experiment(floor.watch, seen).items()]
    finally:
        floor.close()
    # Gone before the operator starts: it would otherwise reconcile these experiments (their pods it never sees).
    # A collection's deletion answers when it is done: for thousands of objects, minutes on busy cores.
    for kind in (constants.KIND, "Pod"):
        response = bench.admin.session.delete(bench.admin.url + bench.admin.path(kind, namespace), timeout=args.timeout)
        response.raise_for_status()
    wait_for("the floor's experiments to be deleted", lambda: not bench.admin.list(constants.KIND, namespace),
             timeout=args.timeout)
    result = {"posted_seconds": posted, "all_pods_seconds": max(seen.values()) - started,
              "per_experiment": {"p50": quantile(latencies, 0.5), "p95": quantile(latencies, 0.95),
                                 "max": max(latencies)}}
    print(f"  floor {args.experiments}x{args.workers}: all pods in {result['all_pods_seconds']:.1f} s (experiments "
          f"posted in {posted:.1f} s); per experiment p50 {result['per_experiment']['p50']:.1f} s, "
          f"p95 {result['per_experiment']['p95']:.1f} s; load {os.getloadavg()[0]:.1f}", flush=True)
    return result


def big(bench: Bench, args) -> dict:
    bench.start_operator(["--recheck-interval", "60", *args.operator_arg])
    watch = PodWatch(bench.admin)
    floor = Floor(bench) if args.floor else None
    runs = []
    try:
        warm_up(bench, watch)
        for repeat in range(args.repeats):
            # Interleaved: the operator's trial, then the floor's same pods, so both see the same load.
            namespace = f"big-{repeat}-{os.getpid()}"
            add_namespace(bench.admin, namespace)
            load = os.getloadavg()[0]
            probe = Probe(bench.admin, bench.operator.process.pid, bench.gc_file)
            cpu = probe.cpu_seconds()
            created = create_all(bench.admin, [experiment("big", namespace, args.workers)])["big"]
            seen = wait_for_pods(watch, namespace, args.workers, args.timeout)
            times = sorted(at - created for at in seen.values())
            run = {"first": times[0], "half": quantile(times, 0.5), "all": times[-1], "load": load,
                   "operator_cpu_seconds": probe.cpu_seconds() - cpu}
            bench.admin.delete(constants.KIND, namespace, "big")
            wait_for("the trial's pods to be garbage-collected",
                     lambda: not bench.admin.list("Pod", namespace, labelSelector=MANAGED),  # noqa: B023 - waited for here
                     timeout=args.timeout)
            if floor is not None:
                run["floor"] = floor_big(bench, floor, f"floor-{repeat}-{os.getpid()}", args.workers, args.timeout)
                run["ratio"] = run["all"] / run["floor"]
            runs.append(run)
            print(f"  repeat {repeat} (load {load:.1f}): first pod {times[0]:.2f} s, half {run['half']:.2f} s, "
                  f"all {times[-1]:.2f} s, operator CPU {run['operator_cpu_seconds']:.2f} s"
                  + (f"; floor {run['floor']:.2f} s, operator / floor {run['ratio']:.2f}"
                                              if floor is not None else ""), flush=True)
    finally:
        watch.close()
        if floor is not None:
            floor.close()
    result = {"runs": runs, "all_seconds": _spread([r["all"] for r in runs])}
    if floor is not None:
        result["floor_seconds"] = _spread([r["floor"] for r in runs])
        result["operator_over_floor"] = _spread([r["ratio"] for r in runs])
    return result


def _spread(values: list[float]) -> dict[str, float]:
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


def burst(bench: Bench, args, namespace: str | None = None) -> dict:
    """E experiments created at once; returns their timings (and leaves them, with pods, for `steady`)."""
    namespace = namespace or f"burst-{os.getpid()}"
    add_namespace(bench.admin, namespace)
    watch = PodWatch(bench.admin)
    try:
        warm_up(bench, watch)
        objects = [experiment(f"e-{i:04d}", namespace, args.workers) for i in range(args.experiments)]
        load = os.getloadavg()[0]
        probe = Probe(bench.admin, bench.operator.process.pid, bench.gc_file)
        cpu, counts = probe.cpu_seconds(), probe.requests()
        started = time.monotonic()
        created = create_all(bench.admin, objects)
        posted = time.monotonic() - started
        seen = wait_for_pods(watch, namespace, args.experiments * args.workers, args.timeout)
        cpu = probe.cpu_seconds() - cpu
        collector = probe.collector_since()
        # Every request the API server served meanwhile (the benchmark's own POSTs of experiments included).
        requests_ = {k: round(v - counts.get(k, 0)) for k, v in probe.requests().items() if v - counts.get(k, 0) >= 1}
        pods = dict(watch.pods)
    finally:
        watch.close()
    latencies = [max(times) - created[name] for name, times in by_experiment(watch, seen).items()]
    result = {
        "experiments": args.experiments, "workers": args.workers, "load": load, "posted_seconds": posted,
        "all_pods_seconds": max(seen.values()) - started,
        "per_experiment": {"p50": quantile(latencies, 0.5), "p95": quantile(latencies, 0.95), "max": max(latencies)},
        "operator_cpu_seconds": cpu, "operator_collector": collector, "operator_memory_mb": probe.memory_mb(),
        "requests": requests_,
    }
    print(f"  {args.experiments}x{args.workers}: all {len(seen)} pods in {result['all_pods_seconds']:.1f} s "
          f"(experiments posted in {posted:.1f} s); per experiment p50 {result['per_experiment']['p50']:.1f} s, "
          f"p95 {result['per_experiment']['p95']:.1f} s, max {result['per_experiment']['max']:.1f} s; "
          f"operator CPU {cpu:.1f} s (cyclic collector {collector['seconds']:.1f} s, "
          f"{collector['full_collections']} full collections), RSS {result['operator_memory_mb']}; "
          f"requests {requests_}",
          flush=True)
    result["_pods"] = [p for k, p in pods.items() if k[0] == namespace]
    result["_namespace"] = namespace
    return result


def _running_experiments(admin: Client, namespace: str) -> int:
    items = admin.list(constants.KIND, namespace)
    return sum(1 for e in items if ((e.get("status") or {}).get("phase")) == "Running")


def steady(bench: Bench, args) -> dict:
    """Running experiments left alone: the operator's cost per minute at each progress interval."""
    server = kubelet.LogServer(bench.directory) if args.logs == "served" else None
    if server is not None:
        kubelet.add_node(bench.admin, server.port)
    bench.start_operator(["--recheck-interval", "60", *args.operator_arg])
    created = burst(bench, args)
    pods, namespace = created.pop("_pods"), created.pop("_namespace")
    started = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
        list(pool.map(lambda pod: kubelet.run_pod(bench.admin, pod, bind=server is not None), pods))
    print(f"  {len(pods)} pods bound and reported Running in {time.monotonic() - started:.1f} s", flush=True)
    results = {"burst": created, "logs": args.logs, "intervals": []}
    try:
        for interval in args.poll_interval:
            bench.start_operator(["--recheck-interval", "60", "--progress-poll-interval", str(interval),
                                  *args.operator_arg])
            wait_for("every experiment to be Running",
                     lambda: _running_experiments(bench.admin, namespace) == args.experiments, timeout=args.timeout,
                     interval=2.0)
            time.sleep(args.settle + interval)  # the restart's resume pass, then the first polls, are over
            probe = Probe(bench.admin, bench.operator.process.pid, bench.gc_file)
            cpu, counts, logs = probe.cpu_seconds(), probe.requests(), server.requests if server else 0
            begin = time.monotonic()
            time.sleep(args.window)
            seconds = time.monotonic() - begin
            cpu_used = probe.cpu_seconds() - cpu
            collector = probe.collector_since()
            after = probe.requests()
            delta = {k: (after.get(k, 0) - counts.get(k, 0)) / seconds for k in after}
            delta = {k: round(v, 2) for k, v in sorted(delta.items(), key=lambda kv: -kv[1]) if v > 0}
            row = {"interval_seconds": interval, "window_seconds": seconds,
                   "cpu_seconds_per_minute": cpu_used * 60 / seconds,
                   "cpu_seconds_per_minute_per_100": cpu_used * 60 / seconds * 100 / args.experiments,
                   "requests_per_second": sum(delta.values()), "requests_by_kind": delta,
                   "kubelet_log_reads_per_second": ((server.requests if server else 0) - logs) / seconds,
                   "operator_collector": collector, "operator_memory_mb": probe.memory_mb()}
            results["intervals"].append(row)
            print(f"  interval {interval:g} s: {row['cpu_seconds_per_minute']:.2f} CPU-s/min "
                  f"({row['cpu_seconds_per_minute_per_100']:.2f} per 100 experiments), "
                  f"{row['requests_per_second']:.1f} API requests/s {delta}, "
                  f"log reads at the kubelet {row['kubelet_log_reads_per_second']:.1f}/s, cyclic collector "
                  f"{collector['seconds']:.1f} s ({collector['full_collections']} full), "
                  f"RSS {row['operator_memory_mb']}",
                  flush=True)
    finally:
        if server is not None:
            server.close()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("scenario", choices=("big", "burst", "steady"))
    parser.add_argument("--workers", type=int, default=None, help="workers per trial (big: 512, else 8)")
    parser.add_argument("--repeats", type=int, default=3, help="big: trials created one after another")
    parser.add_argument("--experiments", type=int, default=100, help="burst, steady: experiments created at once")
    parser.add_argument("--poll-interval", type=float, nargs="+", default=[15.0],
                        help="steady: progress intervals to measure, seconds (the operator restarts for each)")
    parser.add_argument("--logs", choices=("served", "unavailable"), default="served",
                        help="steady: pods bound to a Node whose logs the benchmark serves, or unbound (no log)")
    parser.add_argument("--window", type=float, default=60.0, help="steady: seconds measured per interval")
    parser.add_argument("--settle", type=float, default=30.0,
                        help="steady: seconds left after a restart before measuring")
    parser.add_argument("--timeout", type=float, default=600.0, help="longest wait for pods or experiments, seconds")
    parser.add_argument("--operator-path", help="PYTHONPATH of the operator to run (another tree's operator/)")
    parser.add_argument("--floor", action=argparse.BooleanOptionalAction, default=True,
                        help="big, burst: also time a bare client creating the same pods (the API server's ceiling)")
    parser.add_argument("--operator-env", action="append", default=[], metavar="NAME=VALUE",
                        help="an environment variable of the operator process (repeatable)")
    parser.add_argument("--operator-arg", action="append", default=[], help="an extra operator flag (repeatable)")
    args = parser.parse_args()
    args.workers = args.workers or (512 if args.scenario == "big" else 8)
    if apiserver_tier.binaries() is None:
        print("needs etcd, kube-apiserver and kube-controller-manager: run cluster/build-kubernetes.sh and "
              "cluster/build-tools.sh etcd", file=sys.stderr)
        return 1
    load_before = os.getloadavg()
    with tempfile.TemporaryDirectory(prefix="bench-operator-") as directory:
        bench = Bench(pathlib.Path(directory), args.operator_path, dict(e.split("=", 1) for e in args.operator_env))
        try:
            floor = floor_burst(bench, args) if args.scenario == "burst" and args.floor else None
            if args.scenario == "burst":
                bench.start_operator(["--recheck-interval", "60", *args.operator_arg])
            result = {"big": big, "burst": burst, "steady": steady}[args.scenario](bench, args)
            if floor is not None:
                result["floor"] = floor
                result["operator_over_floor"] = {
                    "all_pods": result["all_pods_seconds"] / floor["all_pods_seconds"],
                    "p95": result["per_experiment"]["p95"] / floor["per_experiment"]["p95"]}
                print(f"  operator / floor: all pods {result['operator_over_floor']['all_pods']:.2f}, "
                      f"p95 {result['operator_over_floor']['p95']:.2f}", flush=True)
        except BaseException:
            if bench.operator is not None:
                print(bench.operator.tail(40), file=sys.stderr)
            raise
        finally:
            bench.close()
    result.pop("_pods", None)
    result.pop("_namespace", None)
    record = {"scenario": args.scenario, "config": {k: v for k, v in vars(args).items()},
              "operator": args.operator_path or str(ROOT / "operator"), "python": platform.python_version(),
              "cores": os.cpu_count(), "load_before": load_before, "load_after": os.getloadavg(), "result": result}
    out = ROOT / "bench" / "results" / f"operator-{args.scenario}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(record, indent=2))
    print(f"load {load_before[0]:.1f} -> {record['load_after'][0]:.1f}; written to {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
