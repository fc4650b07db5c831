"""The in-cluster MLflow server, reached through `kubectl port-forward` on 127.0.0.1 only."""

from __future__ import annotations

import re
import subprocess
import threading
import time
import urllib.request

from e2e_kube import Kube, log, wait_for


class PortForward:
    """`kubectl port-forward svc/NAME :PORT --address 127.0.0.1`, restarted when it dies (a pod restart ends it)."""

    def __init__(self, kube: Kube, namespace: str, service: str, port: int):
        self.kube, self.namespace, self.service, self.port = kube, namespace, service, port
        self.process: subprocess.Popen | None = None
        self.local_port: int | None = None
        self.output: tuple[str, ...] = ()  # its last lines, replaced whole (another thread reads them): why it ended
        self._lock = threading.Lock()

    def url(self) -> str:
        with self._lock:
            if self.process is None or self.process.poll() is not None or not self._healthy():
                self._start()
            return f"http://127.0.0.1:{self.local_port}"

    def restart(self, why: str) -> None:
        with self._lock:
            ended = self.process is not None and self.process.poll() is not None
            log(f"port-forward to svc/{self.service} restarted after {why}; it had "
                f"{'ended' if ended else 'not ended'}, saying: {' | '.join(self.output) or 'nothing'}")
            self._start()

    def _healthy(self) -> bool:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.local_port}/health", timeout=5) as answer:
                return answer.status == 200
        except OSError:
            return False

    def _start(self) -> None:
        self.stop()
        for attempt in range(1, 4):
            self.process = subprocess.Popen(
                [self.kube.kubectl_bin, "port-forward", "-n", self.namespace, f"svc/{self.service}", f":{self.port}",
                 "--address", "127.0.0.1"], env=self.kube.env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                text=True, start_new_session=True)
            line, deadline = "", time.monotonic() + 30
            while time.monotonic() < deadline and self.process.poll() is None:
                line = self.process.stdout.readline()
                match = re.search(r"Forwarding from 127\.0\.0\.1:(\d+)", line)
                if match:
                    self.local_port = int(match.group(1))
                    break
            if self.local_port and self.process.poll() is None:
                # Drain its output so the pipe never fills and blocks it; the last lines say why it ended.
                self.output = ()
                threading.Thread(target=self._drain, args=(self.process,), daemon=True).start()
                try:
                    wait_for("MLflow /health through the port-forward", self._healthy, 60, interval=1)
                    return
                except TimeoutError:
                    pass
            log(f"port-forward to svc/{self.service} attempt {attempt} failed: {line.strip()}")
            self.stop()
            time.sleep(2)
        raise RuntimeError(f"cannot port-forward to svc/{self.service} in {self.namespace}")

    def _drain(self, process: subprocess.Popen) -> None:
        for line in process.stdout:
            self.output = (*self.output[-4:], line.strip())

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(timeout=5)
        self.process = None


def refused(error: Exception) -> bool:
    """Whether a call failed because nothing listened on the forward's port (kubectl port-forward exits when a
    stream of its tunnel breaks), not because of what the server answered."""
    return "Connection refused" in str(error) or "Max retries exceeded" in str(error)


class ReconnectingClient:
    """An MlflowClient whose calls, when the port-forward under them has gone, start a new forward and are made
    again (twice at most): the server and its runs are the test's subject, the test's own way to them is not."""

    ATTEMPTS = 3

    def __init__(self, forward: PortForward):
        self.forward = forward

    def __getattr__(self, name: str):
        import mlflow

        if name.startswith("_"):
            raise AttributeError(name)

        def call(*args, **kwargs):
            for attempt in range(1, self.ATTEMPTS + 1):
                method = getattr(mlflow.MlflowClient(tracking_uri=self.forward.url()), name)
                try:
                    return method(*args, **kwargs)
                except Exception as error:  # MlflowException or requests' ConnectionError, by the MLflow version
                    if attempt == self.ATTEMPTS or not refused(error):
                        raise
                    self.forward.restart(f"{name}: {str(error)[:200]}")
        return call


class Mlflow:
    """The MLflow server's runs, through a client that outlives a port-forward's restart."""

    def __init__(self, forward: PortForward):
        self.forward = forward

    def client(self) -> ReconnectingClient:
        return ReconnectingClient(self.forward)

    def run(self, run_id: str):
        return self.client().get_run(run_id)

    def status(self, run_id: str) -> str:
        return self.run(run_id).info.status

    def children(self, experiment_id: str, parent_run_id: str) -> list:
        return self.client().search_runs([experiment_id], filter_string=f"tags.mlflow.parentRunId = '{parent_run_id}'",
                                         max_results=1000)

    def history(self, run_id: str, key: str) -> list:
        return self.client().get_metric_history(run_id, key)

    def every_run(self) -> dict[str, dict]:
        """Every run of every experiment, deleted ones too, by id: what a server that keeps its runs must
        still answer after a restart (status, times, params, tags and the last value of each metric)."""
        from mlflow.entities import ViewType

        client = self.client()
        experiments = [e.experiment_id for e in client.search_experiments(view_type=ViewType.ALL, max_results=1000)]
        runs, token = {}, None
        for _ in range(100):  # pages of 1000 runs, bounded
            page = client.search_runs(experiments, run_view_type=ViewType.ALL, max_results=1000, page_token=token)
            for run in page:
                runs[run.info.run_id] = {"status": run.info.status, "start": run.info.start_time,
                                         "end": run.info.end_time, "params": run.data.params,
                                         "tags": run.data.tags, "metrics": run.data.metrics}
            token = page.token
            if not token:
                return runs
        raise AssertionError("more than 100 pages of runs")

    def artifact_text(self, run_id: str, path: str) -> str:
        """The text of one artifact of a run, downloaded through the server."""
        import tempfile

        with tempfile.TemporaryDirectory(prefix="e2e-artifact-") as directory:
            local = self.client().download_artifacts(run_id, path, directory)
            with open(local, encoding="utf-8") as file:
                return file.read()
