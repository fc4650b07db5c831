"""The API refuses invalid experiments with messages that name the field and the fix, and fills in defaults."""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import sys
import threading
import time

import pytest

from ringleader import api
from ringleader.api import loading, reading
from ringleader.api import spec as spec_
from ringleader.api import variants


def problems(document) -> list[str]:
    with pytest.raises(api.SpecError) as caught:
        api.parse(document)
    return caught.value.problems


# One case per cross-field rule: the spec that breaks it, the field path reported, and words of the fix.
RULE_CASES = {
    "maxStaleness above staleness": (
        {"sync": {"paradigm": "DSSP", "staleness": 5, "maxStaleness": 3}},
        "spec.sync.maxStaleness", "raise maxStaleness or lower staleness"),
    "ring allreduce is BSP only": (
        {"architecture": "RingAllReduce", "sync": {"paradigm": "ASP"}},
        "spec.sync.paradigm", "use ParameterServer or PeerToPeer for ASP"),
    "the hierarchical ring is BSP only": (
        {"architecture": "HierarchicalRingAllReduce", "sync": {"paradigm": "SSP", "staleness": 2}},
        "spec.sync.paradigm", "the hierarchical allreduce is a collective"),
    "a parameter server with pod aggregation is BSP only": (
        {"architecture": "ParameterServerPodAggregation", "sync": {"paradigm": "ASP"}},
        "spec.sync.paradigm", "no staleness bound between them can hold; use ParameterServer or PeerToPeer for ASP"),
    "SSP needs staleness": (
        {"sync": {"paradigm": "SSP"}},
        "spec.sync.staleness", "set it to how many iterations"),
    "DSSP needs maxStaleness": (
        {"sync": {"paradigm": "DSSP", "staleness": 3}},
        "spec.sync.maxStaleness", "e.g. staleness 3, maxStaleness 12"),
    "swept DSSP needs maxStaleness": (
        {"sync": {"staleness": 3}, "sweep": {"matrix": {"paradigm": ["BSP", "DSSP"]}}},
        "spec.sync.maxStaleness", "upper bound"),
    "groups add up to replicas": (
        {"workers": {"replicas": 3, "groups": [{"name": "a", "replicas": 1}]}},
        "spec.workers.groups", "so that the sums match"),
    "replicas a multiple of the ranks per pod": (
        {"workers": {"replicas": 3, "ranksPerPod": 2}},
        "spec.workers.replicas", "change replicas or set ranksPerPod"),
    "replicas a multiple of the GPUs per pod when ranksPerPod is unset": (
        {"workers": {"replicas": 2, "resources": {"gpu": 4}}},
        "spec.workers.replicas", "change replicas or set ranksPerPod"),
    "group replicas a multiple of the ranks per pod": (
        {"workers": {"replicas": 4, "ranksPerPod": 2, "groups": [{"name": "a", "replicas": 1},
                                                                  {"name": "b", "replicas": 3}]}},
        "spec.workers.groups", "change the group's replicas"),
    "ranks per pod within the pod's GPUs": (
        {"workers": {"replicas": 4, "ranksPerPod": 4, "resources": {"gpu": 2}}},
        "spec.workers.ranksPerPod", "lower ranksPerPod or request more GPUs per pod"),
    "ranks per pod within a group's GPUs": (
        {"workers": {"replicas": 4, "ranksPerPod": 2,
                     "groups": [{"name": "a", "replicas": 4, "resources": {"gpu": 1}}]}},
        "spec.workers.groups", "request more GPUs for the group"),
    "group names unique": (
        {"workers": {"replicas": 2, "groups": [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 1}]}},
        "spec.workers.groups", "rename the repeated group"),
    "warm-up shorter than the run": (
        {"model": {"iterations": 5, "warmupIterations": 5}},
        "spec.model.warmupIterations", "lower warmupIterations or raise iterations"),
    "Exists toleration has no value": (
        {"scheduling": {"tolerations": [{"operator": "Exists", "value": "x"}]}},
        "spec.scheduling.tolerations.0.value", "remove value or use Equal"),
    "sweep bounded": (
        {"sweep": {"repetitions": 2, "matrix": {"workers": list(range(1, 17)), "batchSize": list(range(1, 17))}}},
        "spec.sweep.matrix", "at most 256 trials"),
    "sweep leaves a ring combination": (
        {"sweep": {"matrix": {"architecture": ["RingAllReduce"], "paradigm": ["ASP"]}}},
        "spec.sweep.matrix", "add BSP to paradigm"),
    "swept staleness below maxStaleness": (
        {"sync": {"maxStaleness": 4}, "sweep": {"matrix": {"staleness": [1, 5]}}},
        "spec.sweep.matrix.staleness", "drop the larger values or raise maxStaleness"),
    "workers sweep without groups": (
        {"workers": {"replicas": 2, "groups": [{"name": "a", "replicas": 2}]},
         "sweep": {"matrix": {"workers": [1, 2]}}},
        "spec.sweep.matrix.workers", "sweep without groups"),
    "queued trials fit a Workload": (
        {"scheduling": {"queueName": "team-a"},
         "workers": {"replicas": 8, "groups": [{"name": f"g{i}", "replicas": 1} for i in range(8)]}},
        "spec.workers.groups", "merge groups or remove queueName"),
    "network enforcement needs a cap": (
        {"network": {"enforcement": "Network"}},
        "spec.network.enforcement", "set `network.bandwidth`"),
    "tracking.uri without userinfo": (
        {"tracking": {"uri": "http://alice:s3cret@mlflow:5000"}},
        "spec.tracking.uri", "put them in a Secret named by `tracking.credentialsSecret`"),
    "tracking.uri without a token parameter": (
        {"tracking": {"uri": "https://mlflow.example/?access_token=abc"}},
        "spec.tracking.uri", "put them in a Secret named by `tracking.credentialsSecret`"),
    "target needs evaluation": (
        {"data": {"format": "Digits"}, "model": {"target": {"accuracyPercent": 90}}},
        "spec.model.target", "set evaluation.everyIterations"),
    "target is one of accuracy and loss": (
        {"data": {"format": "Digits"},
         "model": {"evaluation": {"everyIterations": 5}, "target": {"accuracyPercent": 90, "loss": 0.5}}},
        "spec.model.target.accuracyPercent", "exactly one of `accuracyPercent` and `loss`"),
    "file formats need a path": (
        {"data": {"format": "CIFAR10"}},
        "spec.data.path", "set it to the dataset's directory"),
    "Factory needs a factory": (
        {"data": {"format": "Factory"}},
        "spec.data.factory", '"package.module:factory"'),
    "a volume's path is relative": (
        {"data": {"format": "ImageFolder", "path": "/images", "volume": {"claimName": "images"}}},
        "spec.data.path", "under the volume's mount point"),
    "evaluation needs real data": (
        {"model": {"evaluation": {"everyIterations": 5}}},
        "spec.model.evaluation", "set `data.format` to Digits"),
    "PowerSGD needs a ring": (
        {"compression": {"method": "PowerSGD"}},
        "spec.compression.method", "use None, FP16 or BF16 with ParameterServer, PeerToPeer, HierarchicalRingAllReduce "
                                   "or ParameterServerPodAggregation"),
    "swept TopK needs a ring": (
        {"architecture": "PeerToPeer", "sweep": {"matrix": {"compression": ["TopK", "PowerSGD"]}}},
        "spec.compression.method", "or sweep RingAllReduce too"),
    "servers Apart needs parameter servers": (
        {"architecture": "RingAllReduce", "scheduling": {"placement": {"servers": "Apart"}}},
        "spec.scheduling.placement.servers", "set servers to Any, or sweep ParameterServer or "
                                             "ParameterServerPodAggregation too"),
    "swept servers Apart needs parameter servers": (
        {"architecture": "PeerToPeer", "sweep": {"matrix": {"placement": [{"ranks": "Spread"}, {"servers": "Apart"}]}}},
        "spec.scheduling.placement.servers", "PeerToPeer, RingAllReduce and HierarchicalRingAllReduce have no servers "
                                             "to keep apart"),
}


@pytest.mark.parametrize("case", RULE_CASES, ids=list(RULE_CASES))
def test_each_rule_reports_its_field_and_fix(experiment_document, case):
    spec, path, fix = RULE_CASES[case]
    [problem] = problems(experiment_document(spec))
    # The message names its fields itself; the path is the problem's field (for -o json), not said twice.
    assert problem.field == path and problem.startswith("`") and not problem.startswith(f"{path}:")
    assert fix in problem


def test_every_published_rule_has_a_case():
    models = [spec_.SyncSpec, spec_.Workers, spec_.Target, spec_.ModelSpec, spec_.DataSpec, spec_.Toleration,
              spec_.Scheduling, spec_.Sweep, spec_.Tracking, spec_.ExperimentSpec]
    rule_count = sum(len(model.rules) for model in models)
    # "swept DSSP needs maxStaleness", "swept TopK needs a ring" and "swept servers Apart needs parameter servers"
    # exercise rules already covered, through the sweep; the tracking.uri rule has a case for each kind of credentials;
    # the ranks-per-pod multiple has one case with ranksPerPod set and one defaulted from the pod's GPUs.
    assert rule_count == len(RULE_CASES) - 5


def test_all_problems_are_reported_at_once(experiment_document):
    found = problems(experiment_document({
        "workers": {"replicas": 0}, "model": {"batchSize": 0}, "sync": {"paradigm": "Sometimes"},
    }))
    assert len(found) == 3
    assert "`spec.workers.replicas` must be greater than or equal to 1 (got 0)" in found
    assert "`spec.model.batchSize` must be greater than or equal to 1 (got 0)" in found
    assert "`spec.sync.paradigm` must be 'BSP', 'ASP', 'SSP' or 'DSSP' (got 'Sometimes')" in found


def test_a_misspelt_field_or_value_gets_the_name_it_was_closest_to(experiment_document):
    found = problems(experiment_document({
        "network": {"bandwith": "100Mbit"}, "workers": {"replica": 2}, "sync": {"paradigm": "DSP"},
        "model": {"colour": "blue"},
    }))
    assert "`spec.network.bandwith` is not a field of this object; did you mean `bandwidth`?" in found
    assert "`spec.workers.replica` is not a field of this object; did you mean `replicas`?" in found
    assert "`spec.sync.paradigm` must be 'BSP', 'ASP', 'SSP' or 'DSSP' (got 'DSP'); did you mean `DSSP`?" in found
    # Nothing near: no guess, the general advice.
    assert "`spec.model.colour` is not a field of this object: check its spelling (fields are camelCase)" in found


def test_a_known_field_at_the_wrong_level_is_told_where_it_belongs(experiment_document):
    found = problems(experiment_document({"groups": [{"name": "slow", "replicas": 1}], "model": {"paradigm": "SSP"}}))
    assert ("`spec.groups` is not a field of this object; it belongs under `spec.workers` (check its indentation)"
            in found)
    assert ("`spec.model.paradigm` is not a field of this object; it belongs under `spec.sync` or `spec.sweep.matrix` "
            "(check its indentation)") in found


@pytest.mark.parametrize("case", RULE_CASES, ids=list(RULE_CASES))
def test_a_field_error_does_not_hide_a_broken_rule(experiment_document, case):
    # Pydantic checks a model's rules only when all its fields are valid: `spec.image` of the wrong type
    # would otherwise hide every rule of `spec` until it is fixed.
    spec, path, fix = RULE_CASES[case]
    found = problems(experiment_document({**spec, "image": 5}))
    [field_error] = [p for p in found if p.field == "spec.image"]
    [broken] = [p for p in found if p != field_error]
    assert field_error == "`spec.image` must be a valid string (got 5)"
    assert broken.startswith("`") and fix in broken and broken.field == path


def test_a_rule_that_reads_a_field_in_error_is_not_reported(experiment_document):
    # With `replicas` unreadable, whether the groups add up to it is unknown: only the names rule, which
    # reads the groups alone, can be said to be broken.
    found = problems(experiment_document({
        "sync": {"paradigm": "DSSP", "staleness": "3", "maxStaleness": 2},
        "workers": {"replicas": "two", "groups": [{"name": "a", "replicas": 1}, {"name": "a", "replicas": 2}]},
    }))
    assert found == [
        "`spec.sync.staleness` must be a valid integer (got '3')",
        "`spec.workers.replicas` must be a valid integer (got 'two')",
        "`workers.groups` names must be unique: rename the repeated group",
    ]


def test_a_missing_field_drops_its_object_and_the_rules_reading_it(experiment_document):
    found = problems(experiment_document({
        "architecture": "RingAllReduce", "sync": {"paradigm": "SSP"},
        "workers": {"replicas": 2, "groups": [{"replicas": 2}]},
    }))
    assert found == [
        "`spec.workers.groups.0.name` is required",
        "`sync.paradigm` must be BSP when `architecture` is RingAllReduce: allreduce is a "
        "collective in which every worker waits for all; use ParameterServer or PeerToPeer for ASP, SSP or DSSP",
        "`sync.staleness` is required when `sync.paradigm` is SSP or DSSP: set it to how many "
        "iterations the fastest worker may run ahead of the slowest (e.g. 3)",
    ]


def test_gang_names_who_starts_a_trials_pods_together_and_the_old_boolean_is_refused(experiment_document):
    assert api.parse(experiment_document({})).spec.scheduling.gang == spec_.Gang.OPERATOR
    [problem] = problems(experiment_document({"scheduling": {"gang": True}}))
    assert problem.startswith("`spec.scheduling.gang` must be 'Operator', 'Volcano' or 'SchedulerPlugins'")


def test_unknown_fields_are_refused_with_a_spelling_hint(experiment_document):
    [problem] = problems(experiment_document({"workers": {"replica": 2}}))
    assert problem == "`spec.workers.replica` is not a field of this object; did you mean `replicas`?"


@pytest.mark.parametrize("spec, field, meant", [
    ({"network": {"bandwith": "1Gbit"}}, "spec.network.bandwith", "bandwidth"),  # a field, a letter missing
    ({"sync": {"paradigm": "SPP"}}, "spec.sync.paradigm", "SSP"),  # a short value, a letter wrong
    ({"sync": {"paradigm": "BPS"}}, "spec.sync.paradigm", "BSP"),  # two letters swapped
    ({"compression": {"method": "topk"}}, "spec.compression.method", "TopK"),  # another case
    ({"model": {"name": "mpl"}}, "spec.model.name", "mlp"),  # a built-in model, not a factory path
])
def test_a_misspelt_field_or_value_gets_the_one_it_is_closest_to(experiment_document, spec, field, meant):
    [problem] = problems(experiment_document(spec))
    assert problem.field == field and problem.endswith(f"; did you mean `{meant}`?")


def test_a_value_near_none_of_the_allowed_gets_no_guess(experiment_document):
    [problem] = problems(experiment_document({"sync": {"paradigm": "Gossip"}}))
    assert "did you mean" not in problem and "'BSP', 'ASP', 'SSP' or 'DSSP'" in problem


def test_snake_case_is_not_the_wire_format(experiment_document):
    [problem] = problems(experiment_document({"model": {"batch_size": 8}}))
    assert "`spec.model.batch_size` is not a field" in problem


@pytest.mark.parametrize("field, value, hint", [
    ({"workers": {"resources": {"cpu": "lots"}}}, "lots", 'a CPU quantity such as "500m"'),
    ({"workers": {"resources": {"memory": "4GB"}}}, "4GB", 'a memory quantity such as "512Mi"'),
    ({"network": {"bandwidth": "fast"}}, "fast", 'a bandwidth such as "100Mbit"'),
    ({"model": {"name": "resnet18; rm"}}, "resnet18; rm", 'or "package.module:factory"'),
    ({"image": "my image"}, "my image", "an image reference without spaces"),
    ({"scheduling": {"queueName": "Team_A"}}, "Team_A", "a DNS label"),
])
def test_pattern_errors_say_what_the_value_should_look_like(experiment_document, field, value, hint):
    [problem] = problems(experiment_document(field))
    assert hint in problem and repr(value) in problem
    assert "pattern" not in problem


def test_experiment_names_follow_kubernetes(experiment_document):
    [problem] = problems(experiment_document(name="Bad_Name"))
    assert problem.startswith("`metadata.name` must be a DNS subdomain")
    assert api.parse(experiment_document(name="study.v2")).name == "study.v2"


def test_defaults_make_a_two_worker_bsp_parameter_server_job(experiment_document):
    spec = api.parse(experiment_document()).spec
    assert spec.architecture == variants.Architecture.PARAMETER_SERVER
    assert spec.sync.paradigm == variants.Paradigm.BSP
    assert (spec.parameter_servers.replicas, spec.workers.replicas) == (1, 2)
    assert (spec.model.name, spec.model.batch_size, spec.model.iterations) == ("mlp", 32, 100)
    assert spec.run_policy.backoff_limit == 3 and spec.scheduling.gang == spec_.Gang.OPERATOR
    assert spec.sweep is None and spec.image is None and spec.network.bits_per_second() is None


def test_wire_form_is_camel_case_and_leaves_unset_fields_out(experiment_document):
    wire = api.parse(experiment_document({"sync": {"paradigm": "SSP", "staleness": 3}})).spec.wire()
    assert wire["sync"] == {"paradigm": "SSP", "staleness": 3}
    assert wire["parameterServers"]["replicas"] == 1
    assert wire["model"]["warmupIterations"] == 5
    assert "sweep" not in wire and "image" not in wire


def test_a_parsed_spec_round_trips_through_its_wire_form(experiment_document):
    spec = api.parse(experiment_document({
        "architecture": "PeerToPeer", "workers": {"replicas": 3, "groups": [
            {"name": "fast", "replicas": 2}, {"name": "slow", "replicas": 1, "slowdownPercent": 250}]},
    })).spec
    assert api.ExperimentSpec.model_validate(spec.wire()) == spec


def test_load_reports_missing_files_and_bad_yaml(tmp_path):
    with pytest.raises(api.LoadError, match="absent.yaml: file not found$"):
        api.load(tmp_path / "absent.yaml")
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec: [unclosed\n")
    with pytest.raises(api.LoadError, match="broken.yaml: not valid YAML: .* at line 2, column 1 "
                                            r"\(a flow sequence opened at line 1, column 7\)$"):
        api.load(broken)


def caret_column(excerpt_line: str) -> int:
    """The column (from 1) a caret line of an excerpt points at: "     |    ^" under "  26 |    iterations: [5"."""
    return excerpt_line.index("^") - excerpt_line.index("|") - 1


def test_a_yaml_error_shows_its_line_with_a_caret_under_the_column(tmp_path):
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec:\n  model:\n    name: mlp\n   iterations: [5\n")
    with pytest.raises(api.LoadError) as refused:
        api.load(broken)
    assert "at line 4, column 4" in refused.value.problem
    shown, caret = refused.value.excerpt.splitlines()
    assert shown == "  4 |    iterations: [5" and caret_column(caret) == 4
    assert refused.value.shown() == f"{refused.value}\n{refused.value.excerpt}"


def test_a_bracket_left_open_shows_the_line_it_opened_on_before_the_line_the_parser_noticed(tmp_path):
    # The parser notices a missing '}' on the next line: the line it names is not the mistake's.
    broken = tmp_path / "broken.yaml"
    broken.write_text("spec:\n  data:\n    synthetic: {samples: 1024\n  network:\n    bandwidth: 1Gbit\n")
    with pytest.raises(api.LoadError) as refused:
        api.load(broken)
    assert refused.value.problem.endswith("at line 4, column 10 (a flow mapping opened at line 3, column 16)")
    opened, opened_caret, noticed, noticed_caret = refused.value.excerpt.splitlines()
    assert opened.startswith("  3 | ") and caret_column(opened_caret) == 16
    assert noticed.startswith("  4 | ") and caret_column(noticed_caret) == 10


def test_a_long_line_is_shown_around_its_column_only(tmp_path):
    broken = tmp_path / "broken.yaml"
    line = "spec: {" + ", ".join(f"k{i}: {i}" for i in range(100)) + ", bad: : x}"
    broken.write_text(line + "\n")
    with pytest.raises(api.LoadError) as refused:
        api.load(broken)
    column = int(re.search(r"at line 1, column (\d+)", refused.value.problem)[1])
    shown, caret = refused.value.excerpt.splitlines()
    assert len(shown) <= len("  1 | ") + loading.EXCERPT_WIDTH + 2 * len("...") < len(line)
    assert shown[shown.index("|") + 1 + caret_column(caret)] == line[column - 1]  # the caret is on the same character


# What kubectl sends the API server for each plain scalar (as `kubectl annotate --local -f x.yaml -o json` prints
# it: sigs.k8s.io/yaml on go-yaml v2, YAML 1.1 without base 60), where PyYAML's YAML 1.1 reads otherwise.
@pytest.mark.parametrize("scalar, expected", [
    ("1:00", "1:00"), ("-1:30.5", "-1:30.5"), ("190:20:30", "190:20:30"), ("y", True), ("Y", True), ("n", False),
    ("N", False), ("yes", True), ("On", True), ("off", False), ("=", "="), ("2024-01-01", "2024-01-01"),
    ("2024-01-01 10:00:00", "2024-01-01 10:00:00"), ("010", 8), ("0x1F", 31), ("0b101", 5), ("1_000", 1000),
    ("30", 30), ("-7", -7), ("1.5", 1.5), ("1.0e+3", 1000.0), ("~", None), ("null", None), ("'1:00'", "1:00"),
    ('"y"', "y"), ("!!str 10", "10"),
])
def test_plain_scalars_are_typed_as_kubectl_types_them(tmp_path, scalar, expected):
    path = tmp_path / "scalar.yaml"
    path.write_text(f"a: {scalar}\n")
    [document] = loading.load_documents(str(path))
    assert document == {"a": expected} and type(document["a"]) is type(expected)


def test_a_base_60_integer_is_a_string_as_the_api_server_gets_it(tmp_path, experiment_document):
    path = tmp_path / "sexagesimal.yaml"
    path.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\nmetadata: {name: x}\n"
                    "spec:\n  model: {iterations: 1:00}\n")
    with pytest.raises(api.SpecError) as caught:
        api.load(path)
    assert caught.value.problems == ["line 5: `spec.model.iterations` must be a valid integer (got '1:00')"]


@contextlib.contextmanager
def within(seconds: int):
    """Fail instead of hanging: SIGALRM interrupts a blocked open() and raises here."""
    def expire(signum, frame):
        raise TimeoutError(f"still waiting after {seconds} s")

    previous = signal.signal(signal.SIGALRM, expire)
    signal.alarm(seconds)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, previous)


def _write_later(fifo, data: bytes, after_seconds: float = 0.0) -> threading.Thread:
    """A writer that opens `fifo` after the reader did (a generator slower to start), writes `data` and closes."""
    def write():
        time.sleep(after_seconds)
        with contextlib.suppress(BrokenPipeError), open(fifo, "wb") as stream:
            stream.write(data)

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_process_substitution_is_read_like_a_file(repo_root):
    # What `ringleader validate <(envsubst < tmpl.yaml)` gives the command: /dev/fd/63, a pipe.
    command = f'"{sys.executable}" -m ringleader.cli validate <(cat "{repo_root}/examples/quickstart.yaml")'
    done = subprocess.run(["bash", "-c", command], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert "/dev/fd/" in done.stdout and "valid" in done.stdout


def test_a_fifo_whose_writer_comes_later_is_read_to_its_end(tmp_path, repo_root):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    writer = _write_later(fifo, (repo_root / "examples/quickstart.yaml").read_bytes(), after_seconds=0.5)
    with within(20):
        [document] = loading.load_documents(str(fifo))
    writer.join()
    assert document["kind"] == "DistributedTrainingExperiment"


def test_a_fifo_nobody_writes_to_is_refused_at_the_bound_not_waited_on_forever(tmp_path, monkeypatch):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    monkeypatch.setattr(reading, "FIFO_WAIT_SECONDS", 0.5)
    with within(10), pytest.raises(api.LoadError) as caught:
        api.load(fifo)
    assert str(caught.value) == (f"{fifo}: a FIFO that did not reach its end within 0.5 s (0 bytes read): "
                                 "is anything writing to it?")


def test_a_fifo_larger_than_the_api_servers_limit_is_refused_without_reading_it_all(tmp_path):
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    writer = _write_later(fifo, b"a: 1\n" + b"#" * (2 * reading.MAX_BYTES))
    with within(20), pytest.raises(api.LoadError, match="is larger than 3 MiB"):
        api.load(fifo)
    writer.join(10)
    assert not writer.is_alive()  # the reader closed its end: the writer's next write broke, it was not left blocked


def test_a_path_that_turns_into_a_device_after_its_check_is_refused(tmp_path, monkeypatch):
    # The path is checked, then opened: what was opened is checked again.
    regular, device = tmp_path / "regular.yaml", tmp_path / "device.yaml"
    regular.write_text("a: 1\n")
    device.symlink_to(os.devnull)
    stat = os.stat
    monkeypatch.setattr(reading.os, "stat", lambda path, *args, **kwargs: stat(regular if str(path) == str(device)
                                                                                  else path, *args, **kwargs))
    with within(10), pytest.raises(api.LoadError, match=r"device.yaml: is not a regular file or a FIFO \(a character"):
        api.load(device)


def test_bandwidth_is_parsed_into_bits_per_second():
    assert spec_.parse_bandwidth("100Mbit") == 100_000_000
    assert spec_.parse_bandwidth("10Gbit") == 10_000_000_000
    with pytest.raises(ValueError, match="100Mbit, 1Gbit or 10Gbit"):
        spec_.parse_bandwidth("10GB")


def test_progress_text_is_short_enough_for_a_column():
    assert api.status.Progress(iteration=37, iterations=200, trials=1).text() == "37/200"
    assert api.status.Progress(iteration=3, iterations=50, trials=6, trials_completed=2).text() == "2/6 trials, 3/50"
    assert (api.status.Progress(iteration=0, iterations=50, trials=6, trials_queued=3).text()
            == "0/6 trials, 0/50, 3 queued")


def test_network_enforcement_says_what_applied_the_cap(experiment_document):
    emulated = api.parse(experiment_document({"network": {"bandwidth": "100Mbit"}})).spec.network
    enforced = (api.parse(experiment_document({"network": {"bandwidth": "100Mbit",
                                                           "enforcement": "Network"}})).spec.network)
    uncapped = api.parse(experiment_document()).spec.network
    assert (emulated.enforced_by(), emulated.emulated_bits_per_second()) == ("Emulated", 100_000_000)
    # The network caps it: the runtime must not sleep on top, yet the cap is still the link rate.
    assert (enforced.enforced_by(), enforced.emulated_bits_per_second(), enforced.bits_per_second()) == (
        "Network", None, 100_000_000)
    assert (uncapped.enforced_by(), uncapped.emulated_bits_per_second()) == ("None", None)


def test_a_staleness_field_no_trial_reads_is_a_warning_and_a_sweep_that_reads_it_is_not(tmp_path, capsys):
    from ringleader import cli

    ssp = tmp_path / "ssp.yaml"
    ssp.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\nmetadata: {name: s}\n"
                   "spec: {architecture: ParameterServer, sync: {paradigm: SSP, staleness: 2, maxStaleness: 6}}\n")
    assert cli.main(["validate", str(ssp)]) == 0
    err = capsys.readouterr().err
    assert err == (f"{ssp}: warning: `spec.sync.maxStaleness` is set, but no trial reads it: only DSSP uses it, "
                   "and this "
                   "experiment runs SSP; remove it, or sweep a paradigm that reads it\n")
    swept = tmp_path / "swept.yaml"
    swept.write_text(ssp.read_text().replace("}}\n", "}, sweep: {matrix: {paradigm: [SSP, DSSP]}}}\n"))
    assert cli.main(["validate", str(swept)]) == 0
    assert capsys.readouterr().err == ""


def test_a_file_indented_one_step_off_is_told_to_check_that_lines_indentation(tmp_path):
    path = tmp_path / "indent.yaml"
    path.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\nmetadata: {name: x}\n"
                    "spec:\n  workers:\n    replicas: 2\n   groups: []\n")
    with pytest.raises(api.LoadError) as caught:
        api.load(path)
    assert caught.value.problem == ("not valid YAML: did not find expected key at line 7, column 4: check its "
                                    "indentation against the lines above (a key sits in its mapping's column)")


def test_each_problem_of_a_file_opens_on_its_line_a_missing_field_on_its_objects(tmp_path):
    path = tmp_path / "lines.yaml"
    path.write_text("apiVersion: ringleader.dev/v1alpha1\nkind: DistributedTrainingExperiment\nmetadata: {name: x}\n"
                    "spec:\n  workers:\n    replicas: 2\n  scheduling: {nodeSelector: {kubernetes.io/hostname: [a]}}\n"
                    "  groups: []\n  model:\n    batchSize: 0\n")
    with pytest.raises(api.SpecError) as caught:
        api.load(path)
    found = caught.value.problems
    assert any(p.startswith("line 8: `spec.groups` is not a field of this object; it belongs under `spec.workers`")
               for p in found), found
    # A key with dots of its own is found whole.
    assert any(p.startswith("line 7: `spec.scheduling.nodeSelector.kubernetes.io/hostname`") for p in found), found
    assert any(p.startswith("line 10: `spec.model.batchSize` must be greater than or equal to 1") for p in found), found
