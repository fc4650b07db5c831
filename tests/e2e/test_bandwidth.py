"""A bandwidth cap the network enforces: the pods' own byte counters see the cap, and the same trial uncapped is faster.

Two experiments of the fleet (e2e_specs.NETWORK_TRIAL): a 2-worker ring allreduce capped at 100 Mbit/s
with `network.enforcement: Network` (the pods are annotated; the harness's CNI chains the bandwidth
plugin, which shapes each pod's veth both ways) and the same trial without a cap. The rate checked is
the trial's mean, over every worker iteration after warm-up, of the bytes per second the worker's eth0
sent (`linkTxBytesPerSecondMean`, read from /sys/class/net/eth0/statistics in the pod). Why the mean of
per-iteration rates: a ring allreduce iteration is communication-bound here (31 MB at 100 Mbit/s is
2.5 s against ~0.1 s of compute), and tokens the bucket gains while a worker computes are spent at
line rate in the next transfer, so each iteration's bytes over its duration is the token rate; the
mean averages out the 10 Hz sampler's window edges. The p95 is logged, not asserted: a window that
catches a refilled token burst may exceed the cap briefly.
"""

from __future__ import annotations

import json

import e2e_checks as checks
import e2e_specs
from e2e_kube import log, wait_terminal

FINISH_TIMEOUT = 1200
TOLERANCE = 0.15


def trial_run(mlflow, dte: dict):
    [trial] = dte["status"]["trials"]
    return mlflow.run(trial["runId"])


def test_a_trial_capped_by_the_network_sends_at_the_cap_and_uncapped_it_is_faster(
        kube, namespace, fleet, mlflow, report_on_failure):
    report_on_failure("net-capped")
    report_on_failure("net-uncapped")
    capped = wait_terminal(kube, namespace, "net-capped", FINISH_TIMEOUT)
    uncapped = wait_terminal(kube, namespace, "net-uncapped", FINISH_TIMEOUT)
    checks.assert_succeeded(capped, fleet["net-capped"])
    checks.assert_succeeded(uncapped, fleet["net-uncapped"])

    # The pods asked the network for the cap, both ways.
    for pod in kube.experiment_pods(namespace, "net-capped"):
        annotations = pod["metadata"].get("annotations") or {}
        assert annotations.get("kubernetes.io/ingress-bandwidth") == "100000000", annotations
        assert annotations.get("kubernetes.io/egress-bandwidth") == "100000000", annotations

    # The runs record what applied the cap: the param and summary.json.
    capped_run, uncapped_run = trial_run(mlflow, capped), trial_run(mlflow, uncapped)
    assert capped_run.data.params.get("network.enforcement") == "Network", capped_run.data.params
    assert "network.enforcement" not in uncapped_run.data.params, uncapped_run.data.params
    summaries = {name: json.loads(mlflow.artifact_text(run.info.run_id, "summary.json"))
                 for name, run in (("capped", capped_run), ("uncapped", uncapped_run))}
    assert summaries["capped"]["bandwidthEnforcement"] == "Network", summaries["capped"]
    assert summaries["uncapped"]["bandwidthEnforcement"] == "None", summaries["uncapped"]

    cap = e2e_specs.NETWORK_CAP_BYTES_PER_SECOND
    rates = {name: (s["linkTxBytesPerSecondMean"], s["linkTxBytesPerSecondP95"], s["iterationTimeP50Seconds"],
                    s["throughput"]) for name, s in summaries.items()}
    for name, (mean, p95, p50, throughput) in rates.items():
        log(f"net-{name}: link tx mean {mean * 8 / 1e6:.1f} Mbit/s (p95 {p95 * 8 / 1e6:.1f}), cap "
            f"{cap * 8 / 1e6:.0f} Mbit/s; iteration p50 {p50:.2f} s, throughput {throughput:.1f} samples/s")
    mean = rates["capped"][0]
    assert abs(mean - cap) <= TOLERANCE * cap, (
        f"net-capped sent {mean * 8 / 1e6:.1f} Mbit/s on average, not within {TOLERANCE:.0%} of the "
        f"{cap * 8 / 1e6:.0f} Mbit/s cap: {summaries['capped']}")
    # Uncapped: the same trial is faster, and its pods send well above the cap.
    assert rates["uncapped"][2] < rates["capped"][2] and rates["uncapped"][3] > rates["capped"][3], rates
    assert rates["uncapped"][0] > (1 + TOLERANCE) * cap, rates
