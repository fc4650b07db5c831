"""The experiments shown in README.md are valid, so the front page cannot drift from the API."""

import pathlib
import re

import yaml

from ringleader import api

README = pathlib.Path(__file__).resolve().parents[2] / "README.md"


def test_every_experiment_in_the_readme_validates_and_expands():
    blocks = re.findall(r"```yaml\n(.*?)```", README.read_text(), flags=re.DOTALL)
    experiments = [doc for doc in map(yaml.safe_load, blocks) if doc and doc.get("kind") == api.KIND]
    assert experiments, "README.md shows no DistributedTrainingExperiment"
    for document in experiments:
        expansion = api.expand(api.parse(document, "README.md"))
        assert expansion.trials
