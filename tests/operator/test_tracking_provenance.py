"""Apiserver tier (no kubelet: the test writes pod status and plays the rank that logs the trial's summary): an
operator experiment's sweep run says where its numbers were taken, as a `ringleader run`'s does.

At its creation, what the operator knows: the resource and its generation, the spec's hash, the pods' image and the
operator's own versions. When the experiment ends, what the ranks recorded (the trial summary's usage): their
nodes, their pods' CPU quota, each node's load per CPU as they ended and the versions in the pods; the report
attached to the sweep run opens with it ("Taken on ...").
"""

import json
import pathlib

import experiments as dtes
from apiserver_client import wait_for

from ringleader.api import experiment as experiment_
from ringleader.contract import keys, provenance

PREFIX = "ringleader.provenance."


def rank_usage(node: str, load: float) -> dict:
    """What runtime/usage.py records of a rank in a pod (the values a pod of 1.5 CPUs on `node` would see)."""
    return {keys.HOST: f"pod-on-{node}", keys.NODE: node, keys.CPUS: 1.5, keys.THREADS: 1, keys.LOAD_PER_CPU: load,
            keys.RINGLEADER: "0.1.0", keys.TORCH: "2.9.1", keys.PYTHON: "3.11.7"}


def test_the_sweep_run_says_where_its_numbers_were_taken_from_its_creation_to_the_report(
        admin, namespace, operator, tmp_path):
    import mlflow

    uri = f"sqlite:///{tmp_path / 'mlflow.db'}"
    operator(extra_args=("--tracking-uri", uri, "--tracking-timeout", "60"))
    admin.create(dtes.experiment("taken", namespace))
    pods = wait_for("3 pods", lambda: (lambda found: len(found) == 3 and found)(admin.trial_pods(namespace, "taken")),
                    timeout=120)
    dte = admin.experiment(namespace, "taken")
    parent, run_id = dte["status"]["mlflow"]["runId"], dtes.trials(dte)[0]["runId"]
    client = mlflow.MlflowClient(tracking_uri=uri)

    # At its creation: the resource, the spec's hash (not its values), the image its pods run, the operator's versions.
    tags = client.get_run(parent).data.tags
    spec = experiment_.parse(dte).spec.model_dump(mode="json", by_alias=True)
    assert tags[PREFIX + "command"] == f"DistributedTrainingExperiment {namespace}/taken, generation 1"
    assert tags[PREFIX + "specSha256"] == provenance.spec_hash(spec)
    assert tags[PREFIX + "image"] == pods[0]["spec"]["containers"][0]["image"]
    assert tags[PREFIX + "operatorRingleader"] and tags[PREFIX + "operatorPython"]
    assert not {PREFIX + key for key in ("host", "loadBefore", "nodes")} & set(tags)  # nothing the pods know yet

    # The lowest worker rank logs the trial's summary.json, every rank's usage in it (tracking/live.py).
    summary = {**dtes.SUMMARY, keys.USAGE: {"0": rank_usage("node-a", 0.2), "1": rank_usage("node-a", 0.2),
                                            "2": rank_usage("node-b", 0.9)}}
    (tmp_path / "summary.json").write_text(json.dumps(summary))
    client.log_artifact(run_id, str(tmp_path / "summary.json"))
    for pod in pods:
        admin.run_pod(pod)
    for pod in sorted(pods, key=dtes.rank)[1:]:
        admin.finish_pod(pod, 0, "Completed", dtes.summary_message())
    wait_for("the report", lambda: admin.experiment(namespace, "taken")["status"]["mlflow"].get("reportUrl"),
             timeout=120)

    tags = client.get_run(parent).data.tags
    assert {key: tags[PREFIX + key] for key in ("nodes", "cpuQuota", "loadPerCpuAtEnd", "torch", "python")} == {
        "nodes": "node-a, node-b", "cpuQuota": "1.5", "loadPerCpuAtEnd": "0.2-0.9", "torch": "2.9.1",
        "python": "3.11.7"}
    page = pathlib.Path(client.download_artifacts(parent, "report/report.html", str(tmp_path))).read_text()
    assert ("Taken on 2 nodes (node-a, node-b): pods with CPU quota 1.5, load per CPU 0.2-0.9 at the ranks&#x27; end; "
            "ringleader 0.1.0, torch 2.9.1, Python 3.11.7 in image ") in page
    assert (f"`DistributedTrainingExperiment {namespace}/taken, generation 1`, spec sha256 "
            f"{provenance.spec_hash(spec)}") in page
