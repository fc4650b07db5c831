"""The bands across nodes, from the recorded runs of Study 1 across nodes: every trial whose bytes all crossed a NIC
predicting every such trial of its worker count.

Used by tests/unit/test_node_bands.py, which checks validation.NODE_BANDS are what these runs fit and that each band
held 9 in 10 of the pairs of a run it was not fitted on. A run is one `make study-nodes` (tests/e2e/
study_across_nodes.py): its document keeps each trial's placement, measured iteration and the prediction its pods
made of every architecture, so a band holds for the models that made them; a change to the models that moves those
predictions needs the study run again and recorded here.
"""

from __future__ import annotations

import dataclasses
import json
import pathlib
import statistics
from typing import Any, Mapping, Sequence

from ringleader.models import validation

RUNS = ("study-1-nodes-host-wire.json", "study-1-nodes-host-wire-250m.json", "study-1-nodes-host-wire-250m-run-2.json",
        "study-1-nodes-host-wire-250m-run-3.json")
"""RUNS are the recorded runs the bands are fitted on, files in the repository's docs/studies/: 3 nodes, NICs capped
at 500 Mbit/s, pods of 150m and 250m CPU."""


@dataclasses.dataclass(frozen=True)
class NodePair(validation.Scored):
    """A pair of one recorded run of Study 1 across nodes, at its pods' quota."""

    run: str
    pod_cpus: float


def read(folder: pathlib.Path, names: Sequence[str] = RUNS) -> dict[str, dict[str, Any]]:
    """The recorded runs in `folder`, by file name."""
    return {name: json.loads((folder / name).read_text()) for name in names}


def spread(trial: Mapping[str, Any]) -> bool:
    """Whether every byte of the trial crossed a NIC (the placements a band across nodes is fitted on)."""
    return trial.get("crossNodeByteShare") == 1.0 and bool(trial.get("prediction"))


def pod_cpus(trial: Mapping[str, Any]) -> float | None:
    """The fewest CPUs a rank of the trial had (its pods' quota), where recorded."""
    quotas = [used.get("cpus") for used in (trial.get("usage") or {}).values()]
    return min((q for q in quotas if isinstance(q, (int, float)) and q > 0), default=None)


def pairs(runs: Mapping[str, Mapping[str, Any]]) -> list[NodePair]:
    """Every (source, target) of one run and worker count, both spread, at one quota."""
    found = []
    for run, document in runs.items():
        chosen = [t for t in document["trials"] if spread(t) and pod_cpus(t) is not None]
        for source in chosen:
            predicted = source["prediction"]["architectures"]
            for target in chosen:
                if (target["workers"] == source["workers"] and pod_cpus(target) == pod_cpus(source)
                        and target["architecture"] in predicted):
                    found.append(NodePair(source["trial"], target["trial"], target["architecture"], source["workers"],
                                          predicted[target["architecture"]]["iterationSeconds"],
                                          target["iterationP50Seconds"], run, pod_cpus(source) or 0.0))
    return found


def held_out_by_run(chosen: Sequence[NodePair]) -> tuple[int, int]:
    """(pairs covered, pairs) when each run's pairs are scored against the band fitted on the other runs' pairs."""
    covered = 0
    for pair in chosen:
        within = validation.fit([p.error for p in chosen if p.run != pair.run])
        covered += within is not None and abs(pair.error) <= within
    return covered, len(chosen)


def band(chosen: Sequence[NodePair]) -> validation.NodeBand | None:
    """The band of one quota's pairs, or None where it cannot be stated: fewer than 2 runs to hold one out, too few
    pairs, or held out by run it kept fewer than 9 in 10."""
    errors = [abs(p.error) for p in chosen]
    within = validation.fit(errors)
    runs = len({p.run for p in chosen})
    held_out = held_out_by_run(chosen)
    if within is None or runs < 2 or held_out[0] < validation.COVERAGE * held_out[1]:
        return None
    return validation.NodeBand(within, validation.round_up(statistics.median(errors)), validation.round_up(max(errors)),
                               len(errors), tuple(sorted({p.workers for p in chosen})), chosen[0].pod_cpus,
                               tuple(sorted({p.architecture for p in chosen})), runs, held_out)


def bands(found: Sequence[NodePair]) -> dict[float, validation.NodeBand]:
    """The band of each quota in `found` that its runs support."""
    fitted = {}
    for cpus in sorted({p.pod_cpus for p in found}):
        chosen = band([p for p in found if p.pod_cpus == cpus])
        if chosen is not None:
            fitted[cpus] = chosen
    return fitted
