"""docs/api.md matches the code: its field reference is generated, its examples run, every spec field is explained."""

from __future__ import annotations

import pathlib
import re

import yaml

from ringleader import api, cli
from ringleader.api import crd, reference

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs" / "api.md"


def test_the_field_reference_is_current():
    text = DOCS.read_text()
    assert reference.with_field_reference(text, crd.openapi_schema()) == text, (
        "run `python -m ringleader.api.crd --docs docs/api.md`")


def test_every_spec_field_and_rule_is_in_the_reference():
    text = DOCS.read_text()

    def paths(node, prefix):
        for name, prop in node.get("properties", {}).items():
            yield f"{prefix}{name}"
            yield from paths(prop, f"{prefix}{name}.")
            if "items" in prop:
                yield from paths(prop["items"], f"{prefix}{name}[].")

    for path in paths(crd.openapi_schema()["properties"]["spec"], "spec."):
        assert f"| `{path}` |" in text, path
    for model in (api.spec.SyncSpec, api.spec.Workers, api.spec.Target, api.spec.ModelSpec, api.spec.DataSpec,
                  api.spec.Toleration,
                  api.spec.Scheduling, api.spec.Sweep, api.spec.ExperimentSpec):
        for rule in model.rules:
            assert rule.message in text


def test_the_overview_explains_every_top_level_spec_field():
    overview = DOCS.read_text().split("## Reference")[0]
    for field in api.ExperimentSpec.model_fields.values():
        assert f"`{field.alias}`" in overview, field.alias


def test_the_first_experiment_is_valid():
    [block] = re.findall(r"## A first experiment\n\n```yaml\n(.*?)```", DOCS.read_text(), re.S)
    trials = api.expand(api.parse(yaml.safe_load(block))).trials
    assert [t.spec.sync.paradigm.value for t in trials] == ["BSP", "DSSP"]


def test_the_validation_example_is_what_validate_prints(tmp_path, monkeypatch, capsys):
    [block] = re.findall(r"```console\n\$ ringleader validate broken.yaml\n(.*?)```", DOCS.read_text(), re.S)
    (tmp_path / "broken.yaml").write_text(yaml.safe_dump({
        "apiVersion": api.API_VERSION, "kind": api.KIND, "metadata": {"name": "broken"},
        "spec": {"sync": {"paradigm": "DSSP", "staleness": 5, "maxStaleness": 3}, "workers": {"replicas": 0}}}))
    monkeypatch.chdir(tmp_path)
    assert cli.main(["validate", "broken.yaml"]) == 1
    printed = capsys.readouterr()
    assert (printed.out, printed.err) == ("", block)  # problems go to stderr
