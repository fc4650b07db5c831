"""The validation bench's pairs, from recorded trials: every trial predicting every trial of its worker count.

Used by bench/bench_predict_validation.py, which records its runs with this module (`--record`), and by
tests/unit/test_prediction_held_out.py, which predicts those recorded trials again with the models as they are now
and checks that validation.BANDS are what they fit, and that a band fitted without a trial covers that trial's
predictions. A recorded trial keeps what `ringleader predict` reads and nothing else: the trial, its summary's
link probe and usage, its workers' records (the fields the models read) and its lowest worker rank's layers.json.
"""

from __future__ import annotations

import dataclasses
import gzip
import json
import pathlib
import statistics
from typing import Any, Iterable, Mapping, Sequence

from ringleader.models import prediction, validation
from ringleader.models.profile import worker_rank
from ringleader.models.results import TrialResult
from ringleader.api.trial import Trial
from ringleader.contract import keys

KEPT_FIELDS = (keys.STEP, keys.ROLE, keys.WARMUP, keys.TIME_ITERATION, keys.TIME_COMM, keys.TIME_WAIT, keys.TIME_UPDATE,
               keys.TIME_BACKWARD, keys.TIME_CODEC, keys.SERVER_AGGREGATION)
"""KEPT_FIELDS are the fields of an iteration record the models read (profile.py, prediction_serving.py)."""


def record(trials: Iterable[TrialResult]) -> list[dict[str, Any]]:
    """The recorded form of `trials` (those with a layers.json), as JSON documents."""
    found = []
    for trial in trials:
        try:
            rank = worker_rank(trial)
        except LookupError:
            continue
        summary = trial.summary
        found.append({"trial": trial.trial.model_dump(mode="json"), "rank": rank, "layers": trial.layers[rank],
                      "linkProbe": summary.link_probe if summary else None, "usage": summary.usage if summary else None,
                      "records": {str(r): [{k: v for k, v in x.items() if k in KEPT_FIELDS} for x in records]
                                  for r, records in trial.records.items()}})
    return found


def write(path: pathlib.Path, runs: Sequence[Mapping[str, Any]]) -> None:
    """Write recorded runs ({link, load, command, trials}) to a gzipped JSON file."""
    path.write_bytes(gzip.compress(json.dumps({"runs": list(runs)}, separators=(",", ":")).encode(), mtime=0))


def read(path: pathlib.Path) -> list[dict[str, Any]]:
    """The recorded runs of a file `write` wrote."""
    return json.loads(gzip.decompress(path.read_bytes()))["runs"]


@dataclasses.dataclass(frozen=True)
class Pair(validation.Scored):
    """A pair of the validation bench, with what decides which band it takes."""

    kind: str
    """kind is the link's kind as the source trial calibrated it (calibration.py)."""
    threads_per_cpu: float
    """threads_per_cpu: the more crowded of the two trials (prediction_serving.Cores)."""
    load_per_cpu: float
    """load_per_cpu: the busier machine of the two trials' (1-minute load per CPU; 0 where neither recorded it)."""
    busy_cores: int = 0
    """busy_cores: the other work the run had beside it (its --burners): bands are fitted per such machine."""
    machine: str = ""
    """machine: which machine the run ran on (machine_of): bands are held out by it."""


def predict(recorded: Mapping[str, Any],
            load_per_cpu: float | None = None) -> tuple[str, int, prediction.TrialPrediction]:
    """(the trial's name, its workers, its prediction) as the models predict it now; `load_per_cpu` is the run's
    machine load, for the ranks that did not record their own (runs recorded before ranks did)."""
    trial = Trial.model_validate(recorded["trial"])
    records = {int(rank): records for rank, records in recorded["records"].items()}
    usage = {rank: {keys.LOAD_PER_CPU: load_per_cpu, **used} for rank, used in (recorded["usage"] or {}).items()}
    found = prediction.predict_trial(trial, records, recorded["layers"], recorded["rank"], recorded["linkProbe"],
                                     usage=usage)
    return trial.name, found.inputs.workers, found


def run_load_per_cpu(run: Mapping[str, Any]) -> float:
    """A recorded run's machine load when it ended: its 1-minute load average over the machine's CPUs."""
    return round(run["loadAfter"][0] / run["machine"]["cpus"], 3)


def machine_of(run: Mapping[str, Any]) -> str:
    """The machine a recorded run ran on: its boot (a machine of this kind is new each boot), or, for runs recorded
    before the bench read it, the platform string, which named the one machine they all ran on."""
    return run["machine"].get("boot") or run["machine"]["platform"]


def pairs(predicted: Sequence[tuple[str, int, prediction.TrialPrediction]], busy_cores: int = 0,
          machine: str = "") -> list[Pair]:
    """Every (source, target) of one worker count whose target measured its iteration."""
    found = []
    for source, workers, made in predicted:
        by_label = {e.label: e for e in made.estimates}
        for target, target_workers, measured in predicted:
            if target_workers == workers and measured.measured_seconds and measured.architecture in by_label:
                found.append(Pair(source, target, measured.architecture, workers,
                                  by_label[measured.architecture].iteration_seconds, measured.measured_seconds,
                                  made.inputs.calibration.kind,
                                  max(made.inputs.cores.threads_per_cpu, measured.inputs.cores.threads_per_cpu),
                                  max(made.inputs.cores.load_per_cpu or 0.0, measured.inputs.cores.load_per_cpu or 0.0),
                                  busy_cores, machine))
    return found


def recorded_pairs(runs: Sequence[Mapping[str, Any]]) -> list[Pair]:
    """The pairs of every recorded run (within each run), its trials named "RUN/TRIAL" by the run's index."""
    found = []
    for index, run in enumerate(runs):
        predicted = [predict(trial, run_load_per_cpu(run)) for trial in run["trials"]]
        found += pairs([(f"{index}/{name}", workers, made) for name, workers, made in predicted], run["burners"],
                       machine_of(run))
    return found


def bands(found: Sequence[Pair], labels: Sequence[str] = ("1ps", "p2p", "ring")
          ) -> dict[tuple[str, str], tuple[validation.Band, ...]]:
    """The bands of each (link kind, architecture) in `found`, one per machine load the runs had (alone, with busy
    cores beside), the quietest first: fit over that architecture's pairs at that load, on every machine the bench
    ran on, or over every architecture's while one has too few for a band of its own (pooled)."""
    fitted: dict[tuple[str, str], tuple[validation.Band, ...]] = {}
    for mine, pooled in _fitted_on(found, labels):
        band = _band(mine, pooled)
        if band is not None:
            key = (mine[0].kind, mine[0].architecture)
            fitted[key] = fitted.get(key, ()) + (band,)
    return fitted


def _fitted_on(found: Sequence[Pair], labels: Sequence[str]) -> list[tuple[list[Pair], list[Pair]]]:
    """(one architecture's pairs, every architecture's) of each link kind and load, in bands' order."""
    chosen = []
    for kind in sorted({p.kind for p in found}):
        for busy in sorted({p.busy_cores for p in found if p.kind == kind}):
            pooled = [p for p in found if p.kind == kind and p.busy_cores == busy]
            chosen += [(mine, pooled) for label in labels if (mine := [p for p in pooled if p.architecture == label])]
    return chosen


def fit(chosen: Sequence[Pair]) -> float | None:
    """The band of these pairs: the |error| 9 in 10 of them fall within (validation.fit), and no narrower than any one
    machine's own band: a machine's noise is its own, and the band is for a machine the bench has not seen."""
    overall = validation.fit([p.error for p in chosen])
    if overall is None:
        return None
    each = (validation.fit([p.error for p in chosen if p.machine == m]) for m in {p.machine for p in chosen})
    return max([overall, *(within for within in each if within is not None)])


def _fit(mine: Sequence[Pair], pooled: Sequence[Pair]) -> tuple[float | None, Sequence[Pair]]:
    """(the band's |error|, the pairs it was fitted on): the architecture's own, or the pooled while it has too few."""
    own = fit(mine)
    return (own, mine) if own is not None else (fit(pooled), pooled)


def _by_machine(mine: Sequence[Pair], pooled: Sequence[Pair]) -> list[tuple[str, bool]]:
    """(machine, inside) of each pair of `mine` against the band fitted on the other machines' pairs alone."""
    scored = []
    for machine in sorted({p.machine for p in mine}):
        other, _ = _fit([p for p in mine if p.machine != machine], [p for p in pooled if p.machine != machine])
        scored += [(machine, other is not None and abs(p.error) <= other) for p in mine if p.machine == machine]
    return scored


def _band(mine: Sequence[Pair], pooled: Sequence[Pair]) -> validation.Band | None:
    within, chosen = _fit(mine, pooled)
    if within is None:
        return None
    errors = [abs(p.error) for p in chosen]
    machines = len({p.machine for p in chosen})
    scored = _by_machine(mine, pooled) if machines > 1 else []
    return validation.Band(within, validation.round_up(statistics.median(errors)), validation.round_up(max(errors)),
                           len(errors), tuple(sorted({p.workers for p in chosen})),
                           max(p.threads_per_cpu for p in chosen), chosen[0].busy_cores,
                           max(p.load_per_cpu for p in chosen), machines,
                           (sum(inside for _, inside in scored), len(scored)) if scored else None)


def groups(found: Sequence[Pair]) -> list[list[Pair]]:
    """The pairs one band is fitted on: of one link kind, architecture and machine (busy cores beside)."""
    keyed: dict[tuple[str, str, int], list[Pair]] = {}
    for pair in found:
        keyed.setdefault((pair.kind, pair.architecture, pair.busy_cores), []).append(pair)
    return list(keyed.values())


def held_out(found: Sequence[Pair]) -> tuple[int, int]:
    """(pairs covered, pairs) when each pair is scored against the band fitted on every other pair of its group:
    leave one out, the check of fit's own promise (docs/predict-validation.md also gives leave one trial out,
    held_out_trials)."""
    covered = 0
    for group in groups(found):
        for index, pair in enumerate(group):
            within = fit(group[:index] + group[index + 1:])
            covered += within is not None and abs(pair.error) <= within
    return covered, len(found)


def held_out_trials(found: Sequence[Pair]) -> tuple[int, int]:
    """(pairs covered, pairs) when each trial's predictions are scored against a band fitted on the pairs of their
    group that do not involve that trial at all (neither predicting nor predicted): leave one trial out, stricter,
    since the pairs predicting one trial share its measurement."""
    covered = 0
    for group in groups(found):
        for pair in group:
            within = fit([p for p in group if pair.source not in (p.source, p.target)])
            covered += within is not None and abs(pair.error) <= within
    return covered, len(found)


def held_out_machines(found: Sequence[Pair], labels: Sequence[str] = ("1ps", "p2p", "ring")
                      ) -> dict[str, tuple[int, int]]:
    """machine -> (pairs covered, pairs) when each machine's pairs are scored against their band fitted on the other
    machines' pairs alone: whether the bands travel to a machine they were not fitted on."""
    scored: dict[str, tuple[int, int]] = {}
    for mine, pooled in _fitted_on(found, labels):
        for machine, inside in _by_machine(mine, pooled):
            covered, total = scored.get(machine, (0, 0))
            scored[machine] = (covered + inside, total + 1)
    return scored
