"""A worker's profile, read once for every model: its gradients (size, when backward produced each) and its compute.

Called by models/prediction.py (`ringleader predict`, and every trial's end), models/whatif.py and
commands/whatif.py (`ringleader whatif`) and report/scaling.py; all of them replay it through
models/overlap.py. Read from a worker rank's layers.json (the gradient hooks of its traced iterations,
runtime/timing.py) and the workers' iteration records, or from a profile file (docs/whatif.md). Both
commands take the same rank of a trial (`worker_rank`: the lowest worker rank with a layers.json) and,
where one trial must be chosen to model a ring, the same trial (`pick`: a ring trial, the fewest workers).
"""

from __future__ import annotations

import dataclasses
import statistics
from typing import Any, Callable, Mapping, Sequence

from ringleader.models import recorded, results
from ringleader.api import constants, variants
from ringleader.api.variants import Paradigm
from ringleader.contract import keys
from ringleader.contract import records as records_


@dataclasses.dataclass(frozen=True)
class Gradient:
    name: str
    size_bytes: float
    ready_seconds: float
    """ready_seconds is when backward produced the gradient, in seconds from the start of backward."""
    shape: tuple[int, ...] | None = None
    """shape is the parameter's, where recorded: what PowerSGD's factors are sized by (models/collectives.py)."""


@dataclasses.dataclass(frozen=True)
class Profile:
    """One iteration's backward: the gradients in the model's parameter order, and how long backward lasts."""

    gradients: tuple[Gradient, ...]
    backward_seconds: float

    @property
    def total_bytes(self) -> float:
        return sum(g.size_bytes for g in self.gradients)

    def in_ready_order(self) -> list[Gradient]:
        return sorted(self.gradients, key=lambda g: g.ready_seconds)

    def scaled(self, backward_seconds: float) -> Profile:
        """The same backward stretched to last `backward_seconds` (ready times in proportion): the traced
        iterations are a sample; the records' median time/backward is the whole run's."""
        if not self.backward_seconds > 0:
            return dataclasses.replace(self, backward_seconds=backward_seconds)
        factor = backward_seconds / self.backward_seconds
        return Profile(tuple(dataclasses.replace(g, ready_seconds=g.ready_seconds * factor) for g in self.gradients),
                       backward_seconds)


def from_layers(document: Mapping[str, Any]) -> Profile:
    """The median iteration of a layers.json document (timing.IterationTimer.layers()).

    Each parameter's ready time is its median offset from backwardStart over the traced iterations it
    appeared in (a parameter with no gradient in any of them is left out); backward lasts the median of
    backwardEnd - backwardStart."""
    iterations = document.get("iterations") or []
    if not iterations:
        raise ValueError("layers.json has no traced iterations: run more than warmupIterations iterations "
                         "(RINGLEADER_TRACE_ITERATIONS > 0)")
    offsets: dict[str, list[float]] = {}
    for iteration in iterations:
        for name, ready in iteration["ready"].items():
            offsets.setdefault(name, []).append(ready - iteration["backwardStart"])
    gradients = tuple(Gradient(p["name"], float(p["bytes"]), statistics.median(offsets[p["name"]]), _shape(p))
                      for p in document["parameters"] if p["name"] in offsets)
    if not gradients:
        raise ValueError("layers.json records no gradient of its parameters")
    return Profile(gradients, statistics.median(i["backwardEnd"] - i["backwardStart"] for i in iterations))


def _shape(entry: Mapping[str, Any]) -> tuple[int, ...] | None:
    """A parameter's recorded shape; None where it was not recorded (layers.json before shapes, or none given)."""
    shape = entry.get("shape")
    return tuple(int(d) for d in shape) if isinstance(shape, list) and all(recorded.is_number(d) for d in shape) \
        else None


def of_rank(document: Mapping[str, Any], records: Sequence[Mapping[str, Any]]) -> Profile:
    """A worker rank's profile: its layers.json (from_layers), stretched so that backward lasts the rank's median
    time/backward after warm-up (the traced iterations are a sample of the run; the median, as the measured
    iteration is, so a few stalled iterations do not stretch it)."""
    counted = _worker_records(records)
    if not counted:
        raise ValueError("no worker iteration records")
    return from_layers(document).scaled(statistics.median(r.get(keys.TIME_BACKWARD) or 0.0 for r in counted))


def bucket_sizes(document: Mapping[str, Any]) -> tuple[float, ...]:
    """The sizes of a ring trial's buckets in launch order, from its first traced iteration with collectives; ()
    for a trial that recorded none (not a ring)."""
    for iteration in document.get("iterations") or []:
        if iteration.get("collectives"):
            return tuple(float(c["bytes"]) for c in sorted(iteration["collectives"], key=lambda c: c["start"]))
    return ()


# ---------------------------------------------------------------------------------------------
# Compute: a worker's iteration less its communication


@dataclasses.dataclass(frozen=True)
class Compute:
    """The workers' seconds per iteration outside communication and waiting: time/iteration less time/comm and
    time/wait (so data, forward, backward, update, evaluation and the loop's own work, whether or not each is
    recorded apart, and whichever of comm or wait a synchronizer books its waiting as). Each statistic over
    iterations is a median, like the measured iteration a prediction is compared with."""

    by_rank: Mapping[int, Mapping[int, float]]
    """by_rank maps each worker rank to its seconds outside communication per step, after warm-up."""

    @property
    def median_seconds(self) -> float:
        """The median over every worker iteration."""
        return statistics.median(c for steps in self.by_rank.values() for c in steps.values())

    @property
    def slowest_per_iteration_seconds(self) -> float:
        """Per iteration the slowest worker's, their median: the barrier of BSP waits for it (the compute skew)."""
        by_step: dict[int, list[float]] = {}
        for steps in self.by_rank.values():
            for step, seconds in steps.items():
                by_step.setdefault(step, []).append(seconds)
        return statistics.median(max(values) for values in by_step.values())

    @property
    def slowest_worker_seconds(self) -> float:
        """The median of the slowest worker: the pace a staleness bound holds the others to."""
        return max(statistics.median(steps.values()) for steps in self.by_rank.values())

    def critical(self, paradigm: Paradigm | str) -> float:
        """The compute an iteration waits for: BSP the slowest worker of each iteration, SSP and DSSP the slowest
        worker's pace, ASP each worker's own."""
        return CRITICAL[variants.PARADIGMS[Paradigm(paradigm)].waits](self)

    def paced_seconds(self, paced: float, last: float) -> float:
        """The median iteration of these workers (a step's: how much later their mean end is than at the step
        before), replayed step by step, when each one's communication is paced for `paced` seconds from the end
        of its own compute but ends no sooner than `last` seconds after the last worker's (an emulated ring, whose
        card, runtime/nic.py, carries a rank's buckets from its own launch and the last from the last rank's,
        runtime/ring.py: a late rank is hidden up to the paced time, not beyond it)."""
        steps = sorted(set.intersection(*(set(steps) for steps in self.by_rank.values())))
        if not steps:
            return self.slowest_per_iteration_seconds + paced
        ends, previous, iterations = dict.fromkeys(self.by_rank, 0.0), 0.0, []
        for step in steps:
            ready = {rank: ends[rank] + self.by_rank[rank][step] for rank in ends}
            latest = max(ready.values())
            ends = {rank: max(ready[rank] + paced, latest + last) for rank in ends}
            end = statistics.fmean(ends.values())
            iterations.append(end - previous)
            previous = end
        return statistics.median(iterations)


CRITICAL: dict[variants.Waits, Callable[[Compute], float]] = {
    variants.Waits.EVERY_WORKER: lambda compute: compute.slowest_per_iteration_seconds,
    variants.Waits.SLOWEST_PACE: lambda compute: compute.slowest_worker_seconds,
    variants.Waits.OWN: lambda compute: compute.median_seconds,
}
"""CRITICAL: per what a paradigm waits for (variants.PARADIGMS), the compute an iteration waits for."""


def _outside_comm(record: Mapping[str, Any], apart: Sequence[str] = ()) -> float:
    """One iteration's seconds outside communication, waiting and the phases `apart`."""
    return max(0.0, (record.get(keys.TIME_ITERATION) or 0.0)
               - sum(record.get(phase) or 0.0 for phase in (keys.TIME_COMM, keys.TIME_WAIT, *apart)))


def _worker_records(records: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    """A rank's worker iteration records after warm-up (none for a server's)."""
    return [r for r in recorded.measured(list(records), constants.ROLE_WORKER)
            if records_.is_worker_record(r) and r.get(keys.TIME_ITERATION)]


def compute(records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]], apart: Sequence[str] = ()) -> Compute:
    """The workers' Compute from their iteration records after warm-up (ranks without worker records are ignored),
    less the phases `apart` too (whatif prices time/codec on its own)."""
    by_rank = {rank: {int(r.get(keys.STEP, index)): _outside_comm(r, apart)
                      for index, r in enumerate(_worker_records(records))}
               for rank, records in records_by_rank.items()}
    by_rank = {rank: steps for rank, steps in by_rank.items() if steps}
    if not by_rank:
        raise ValueError("no worker iteration records")
    return Compute(by_rank)


def measured_iteration_seconds(records_by_rank: Mapping[int, Sequence[Mapping[str, Any]]]) -> float | None:
    """The median time/iteration over every worker iteration after warm-up (the trial's p50): what a prediction is
    compared with."""
    times = [float(r[keys.TIME_ITERATION]) for records in records_by_rank.values() for r in _worker_records(records)]
    return statistics.median(times) if times else None


# ---------------------------------------------------------------------------------------------
# Which trial and rank


def worker_rank(trial: results.TrialResult, asked: int | None = None) -> int:
    """`asked` (checked), else the lowest worker rank with a layers.json: the rank that predicts at a trial's end.
    LookupError saying why when there is none."""
    workers = [s.rank for s in trial.trial.slots() if s.role == constants.ROLE_WORKER]
    if asked is not None:
        if asked not in workers:
            raise LookupError(f"trial {trial.trial.name}: rank {asked} is not a worker; its worker ranks: {workers}")
        if asked not in trial.layers:
            raise LookupError(f"trial {trial.trial.name}: rank {asked} has no layers.json; ranks with one: "
                              f"{sorted(trial.layers) or 'none'}")
        return asked
    profiled = [rank for rank in workers if rank in trial.layers]
    if not profiled:
        raise LookupError(f"trial {trial.trial.name}: no worker rank has a layers.json: workers trace backward "
                          "after warm-up when RINGLEADER_TRACE_ITERATIONS > 0 (default 20)")
    return profiled[0]


def pick(trials: Sequence[results.TrialResult]) -> tuple[results.TrialResult, str]:
    """The trial whose profile models a ring when one must be chosen, and why it was: among those with a worker's
    layers.json, a RingAllReduce trial (its backward ran with the ring's hooks), then the fewest workers (the least
    communication competing with backward), then the first. LookupError when none has one."""
    profiled = [t for t in trials if any(rank in t.layers for rank in
                                         (s.rank for s in t.trial.slots() if s.role == constants.ROLE_WORKER))]
    if not profiled:
        raise LookupError("no trial has a worker's backward profile (layers.json): workers trace backward after "
                          "warm-up when RINGLEADER_TRACE_ITERATIONS > 0 (default 20)")
    rings = [t for t in profiled if variants.ARCHITECTURES[t.spec.architecture].buckets]
    chosen = min(rings or profiled, key=lambda t: (len(t.trial.worker_slots()), t.trial.index))
    return chosen, ("a RingAllReduce trial" if rings else "no RingAllReduce trial has a profile") + \
        ", the one with the fewest workers"


# ---------------------------------------------------------------------------------------------
# The profile file (docs/whatif.md)


def from_document(document: Any) -> tuple[Profile, float]:
    """(profile, t_batch) of a profile file's document:
    {"batchSeconds": t, "backwardSeconds": t, "gradients": [{"name": str, "bytes": n, "readySeconds": t}, ...]}."""
    if not isinstance(document, Mapping):
        raise ValueError("a profile must be a JSON object with batchSeconds, backwardSeconds and gradients")
    problems = []
    # JSON values, whatever the file holds: each is checked below before it is used.
    batch: Any = document.get("batchSeconds")
    backward: Any = document.get("backwardSeconds")
    if not recorded.is_number(batch) or not batch > 0:
        problems.append("`batchSeconds` (one worker's iteration time, seconds) must be a number greater than 0")
    if not recorded.is_number(backward) or backward < 0:
        problems.append("`backwardSeconds` (how long backward lasts, seconds) must be a number greater than or "
                        "equal to 0")
    entries = document.get("gradients")
    if not isinstance(entries, list) or not entries:
        problems.append("`gradients` must be a non-empty list of {name, bytes, readySeconds}")
        entries = []
    gradients = []
    for index, entry in enumerate(entries):
        if not isinstance(entry, Mapping):
            problems.append(f"`gradients[{index}]` must be an object {{name, bytes, readySeconds}}")
            continue
        size: Any = entry.get("bytes")
        ready: Any = entry.get("readySeconds")
        if not recorded.is_number(size) or size < 0:
            problems.append(f"`gradients[{index}].bytes` must be a number greater than or equal to 0")
        if not recorded.is_number(ready) or ready < 0:
            problems.append(f"`gradients[{index}].readySeconds` (seconds from the start of backward) must be a "
                            "number greater than or equal to 0")
        if not problems:
            gradients.append(Gradient(str(entry.get("name", f"gradient-{index}")), float(size), float(ready),
                                      _shape(entry)))
    if problems:
        raise ValueError("; ".join(problems))
    return Profile(tuple(gradients), float(backward)), float(batch)


def document(profile: Profile, batch_seconds: float) -> dict[str, Any]:
    """The profile file's document of (profile, t_batch): from_document reads it back."""
    return {"batchSeconds": batch_seconds, "backwardSeconds": profile.backward_seconds,
            "gradients": [{"name": g.name, "bytes": g.size_bytes, "readySeconds": g.ready_seconds}
                          | ({"shape": list(g.shape)} if g.shape else {}) for g in profile.gradients]}
