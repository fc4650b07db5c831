"""`ringleader profile`'s refusals before anything runs, and the one worker it makes of an experiment's trial (the
recording itself, with real ranks: tests/integration/launch/test_profile_command.py)."""

from __future__ import annotations

import yaml

from ringleader import api, cli
from ringleader.api import spec as spec_
from ringleader.api import variants
from ringleader.commands import profile

from conftest import make_document


def run(capsys, *argv) -> tuple[int, str, str]:
    code = cli.main([str(part) for part in argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def experiment_file(tmp_path, spec: dict, name: str = "plan") -> str:
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(make_document(spec, name)))
    return str(path)


def test_an_invalid_experiment_is_refused_in_validates_words(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = experiment_file(tmp_path, {"workers": {"replicas": "two"}})
    code, out, err = run(capsys, "profile", path)
    _, _, said = run(capsys, "validate", path)
    assert (code, out) == (1, "")
    assert err == said
    assert not (tmp_path / "profile.json").exists()


def test_a_worker_asking_for_a_gpu_where_none_is_visible_is_refused_saying_so(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("CUDA_VISIBLE_DEVICES", "")
    path = experiment_file(tmp_path,
                           {"architecture": "RingAllReduce", "workers": {"replicas": 4, "resources": {"gpu": 4}}})
    code, out, err = run(capsys, "profile", path)
    assert (code, out) == (1, "")
    assert err == (f"{path}: trial plan-profile-0's workers ask for a GPU (`resources.gpu`), and none is visible here "
                   "(CUDA_VISIBLE_DEVICES, torch.cuda): profile on a machine with one, or set "
                   "`workers.resources.gpu: 0` for a CPU profile\n")


def test_options_that_cannot_work_are_refused_as_usage(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    path = experiment_file(tmp_path, {})
    for argv, said in (((path, "--iterations", "2"), "--iterations must be at least 3"),
                       ((path, "--timeout-seconds", "0"), "--timeout-seconds must be greater than 0"),
                       ((path, "--data-dir", tmp_path / "absent"), "not a directory"),
                       ((path, "-o", tmp_path / "absent" / "p.json"), "cannot be written"),
                       ((path, "--trial", "1"), "--trial 1 does not exist: the experiment has trials 0 to 0")):
        code, out, err = run(capsys, "profile", *argv)
        assert (code, out) == (2, "") and said in err and err.count("\n") == 1, err


def test_one_worker_keeps_the_trials_model_data_and_device_and_drops_the_rest():
    experiment = api.parse(make_document({
        "architecture": "ParameterServer", "sync": {"paradigm": "SSP", "staleness": 2},
        "workers": {"replicas": 4, "ranksPerPod": 2, "resources": {"cpu": "3", "memory": "3Gi"},
                    "groups": [{"name": "slow", "replicas": 2, "slowdownPercent": 300,
                                "resources": {"cpu": "1", "memory": "1Gi"}}, {"name": "fast", "replicas": 2}]},
        "model": {"name": "cnn", "batchSize": 48, "iterations": 500, "warmupIterations": 0,
                  "evaluation": {"everyIterations": 50}, "target": {"accuracyPercent": 90}},
        "data": {"format": "Digits"}, "network": {"bandwidth": "1Gbit"}, "compression": {"method": "FP16"},
        "profiling": {"iterations": 3}, "tracking": {"uri": "http://mlflow.private.example:5000"},
        "sweep": {"matrix": {"batchSize": [48, 96]}}}, "plan"))
    chosen = api.expand(experiment).trials[1]
    made = profile.one_worker(chosen, 12)
    spec = made.spec
    assert (made.name, made.experiment, len(made.slots())) == ("plan-profile-0", "plan", 1)
    assert (spec.architecture, spec.sync.paradigm) == (variants.Architecture.RING_ALL_REDUCE, variants.Paradigm.BSP)
    assert (spec.model.name, spec.model.batch_size, spec.data.format) == ("cnn", 96, spec_.DataFormat.DIGITS)
    assert (spec.model.warmup_iterations, spec.model.iterations) == (1, 13)
    assert spec.model.evaluation is None and spec.model.target is None and spec.profiling is None
    # The first worker's share of its pod: group slow's 1 CPU split by its 2 ranks.
    assert spec.workers.resources.model_dump() == {"cpu": "500m", "memory": "1Gi", "gpu": 0}
    assert spec.workers.groups == [] and spec.network.bandwidth is None and not spec.compression.compressing()
    assert spec.tracking.uri is None and "private" not in made.model_dump_json()
