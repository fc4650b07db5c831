"""With the chart's defaults (a 15 s progress poll), a trial's progress shows within 10 s of its first iteration.

The operator reads a starting trial's log every 2 s until a first progress line shows, then every poll
interval (docs/operator.md). The trial here prints a line after every iteration (fewer than 20 of them,
contract/progress.py), so its first line's kubelet timestamp is when the first iteration ended; an emulated
5 Mbit/s link makes each iteration last ~0.75 s (~14 s in all), so the status moves mid-run, not at the end.
"""

from __future__ import annotations

import datetime
import pathlib

import yaml

import e2e_specs
from e2e_kube import describe_dte, log, phase, status, wait_for, wait_terminal
from ringleader.contract import progress

CHART_VALUES = pathlib.Path(__file__).resolve().parents[2] / "charts" / "ringleader" / "values.yaml"
ADMIT_TIMEOUT = 900
RUN_TIMEOUT = 600
ITERATIONS = 19  # under 20: a progress line after every iteration
BOUND_SECONDS = 10


def test_progress_moves_within_10_s_of_the_first_iterations_with_the_charts_defaults(
        kube, namespace, launcher, release, report_on_failure):
    default = yaml.safe_load(CHART_VALUES.read_text())["operator"]["progressPollIntervalSeconds"]
    operator = kube.json("get", "deployment", "-n", release["namespace"], release["operator"])
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--progress-poll-interval={default}" in args, args  # the release runs the chart's default

    name = "progress"
    report_on_failure(name)
    manifest = e2e_specs.experiment(name, namespace, architecture="RingAllReduce", network={"bandwidth": "5Mbit"},
                                    model={"iterations": ITERATIONS, "warmupIterations": 1},
                                    runPolicy={"cleanPodPolicy": "None"})
    launcher.submit(manifest, e2e_specs.cpu_cost(manifest), priority=10)
    launcher.wait_admitted(name, ADMIT_TIMEOUT)

    def moved():
        dte = kube.dte(namespace, name)
        if status(dte).get("progress", {}).get("iteration", 0) >= 1:
            return datetime.datetime.now(datetime.timezone.utc), dte
        assert phase(dte) not in ("Succeeded", "Failed"), describe_dte(kube, namespace, name)
        return None

    seen_at, dte = wait_for(f"{name}'s progress to move", moved, RUN_TIMEOUT, interval=0.5,
                            describe=lambda: describe_dte(kube, namespace, name))
    shown = status(dte)["progress"]["iteration"]
    assert shown < ITERATIONS, f"progress showed only at the end ({shown}/{ITERATIONS}): no mid-run read"

    # The operator reads the lowest-ranked worker's log; its first line is the first iteration's end.
    log_text = kube.kubectl("logs", "-n", namespace, f"{name}-0-worker-0", "--timestamps").stdout
    first = progress.lines(log_text)[0]
    assert first.iteration == 1 and first.at is not None, first
    latency = (seen_at - first.at).total_seconds()
    log(f"{name}: progress {shown}/{ITERATIONS} in status {latency:.1f}s after the first iteration ended")
    assert latency <= BOUND_SECONDS, (f"progress showed {latency:.1f}s after the first iteration (bound "
                                      f"{BOUND_SECONDS}s)")
    assert phase(wait_terminal(kube, namespace, name, RUN_TIMEOUT)) == "Succeeded", describe_dte(kube, namespace, name)
