"""The report's findings: a few sentences of numbers that answer which setup was fastest, by how much, and why.

Used by report.py (the top of report.html and of the sweep run's MLflow description). Every sentence
states measured numbers, with a 95 % confidence interval where the sweep has repetitions.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Mapping

from ringleader.models import combinations, placement_notes, results, statistics
from ringleader.report import convergence, scaling, tables
from ringleader.models.contention import crowded
from ringleader.contract import keys
from ringleader.contract import records as records_

PLACEMENT = "placement"  # the sweep axis (api/trial.py AXIS_PATHS)
MAX_COMPARISONS = 12
"""MAX_COMPARISONS bounds the "A: 1.6x the throughput of B" sentences: a big sweep's full list is in the table."""
SINGLE_RUN_MARGIN = 0.10
"""How far apart two setups measured once each must be before one is named faster: their within-run interval
must clear parity by this much, because what the machine did between the runs is in no within-run interval.
Separate runs of the same pair of setups on the shared 2-core machine spread this much around their median
(docs/performance.md: ring against DDP, 6 separate-run pairs, 1.060-1.267 around 1.133)."""
BATCHES = 10
"""Batch means per rank for a within-run interval: few enough that each batch spans several iterations."""
MIN_BATCH_ITERATIONS = 2


@dataclasses.dataclass(frozen=True)
class Finding:
    """One finding: its sentence, and the numbers behind it for report.json."""

    text: str
    kind: str
    """fastest, comparison, communication, target, loss, network, contention, incomplete or failure."""
    subjects: tuple[str, ...] = ()
    metric: str | None = None
    ratio: float | None = None
    low: float | None = None
    high: float | None = None
    basis: str | None = None
    """Where the interval comes from: "repetitions", "within-run" (batch means of one run each), or None."""
    distinguishable: bool | None = None
    """Whether the interval excludes parity (for single runs, by SINGLE_RUN_MARGIN); None where nothing is compared."""
    compared: frozenset[str] = frozenset()
    """The trials a comparison set against each other (both sides): two findings over the same trials say one thing."""

    def wire(self) -> dict[str, Any]:
        return {"text": self.text, "kind": self.kind, "subjects": list(self.subjects), "metric": self.metric,
                "ratio": self.ratio, "low": self.low, "high": self.high, "basis": self.basis,
                "distinguishable": self.distinguishable}


@dataclasses.dataclass(frozen=True)
class Comparison:
    """One combination's throughput over another's, with the interval the data allow and what it settles."""

    ratio: statistics.MeanInterval
    basis: str | None
    distinguishable: bool
    contended: bool = False
    """Some of the trials' ranks shared CPUs: their timings move between runs by more than a run shows."""
    placement_caveat: str | None = None
    """Their placements put different shares of bytes across nodes (placement_notes.caveat): said with any verdict."""
    traffic: str | None = None
    """What each sent across pods and nodes, where that differs (placement_notes.traffic_note): said with any
    verdict."""

    def interval(self) -> str:
        """"95 % CI 1.03-1.66 within runs", or "" without an interval."""
        if self.ratio.low is None:
            return ""
        within = " within runs" if self.basis == "within-run" else ""
        return f"95 % CI {self.ratio.low:.2f}-{self.ratio.high:.2f}{within}"

    @property
    def within_drift(self) -> bool:
        """Apart within the runs, yet not by more than runs apart differ by: a lead, not yet a winner."""
        low, high = self.ratio.low, self.ratio.high
        return (not self.distinguishable and self.basis == "within-run" and low is not None and high is not None
                and (low > 1.0 or high < 1.0))

    def drift_clause(self) -> str:
        if self.contended:
            return ("but their ranks shared CPUs (CPU contention, below), and such timings move between runs by more "
                    "than one run shows: sweep.repetitions of 3 or more would tell")
        return (f"not beyond the {100 * SINGLE_RUN_MARGIN:.0f} % runs apart differ by: sweep.repetitions of 3 or more "
                "would confirm it")

    def finding(self, text: str, kind: str, subjects: tuple[str, ...],
                compared: frozenset[str] = frozenset()) -> Finding:
        for clause in (self.traffic, self.placement_caveat):
            if clause:
                text = f"{text[:-1]}; {clause}."
        return Finding(text, kind, subjects, keys.THROUGHPUT, self.ratio.mean, self.ratio.low, self.ratio.high,
                       self.basis, self.distinguishable, compared)

    def settle(self) -> str:
        """What would tell the two apart."""
        if self.basis == "within-run":
            return (f"runs apart also differ by what the machine did in between (about {100 * SINGLE_RUN_MARGIN:.0f} "
                    "%): sweep.repetitions of 3 or more would tell")
        if self.basis == "repetitions":
            return "more repetitions or iterations would narrow the interval"
        return "too few iterations for an interval: more iterations, or sweep.repetitions, would tell"


def _usage(trial: results.TrialResult) -> Mapping[str, Any] | None:
    return trial.summary.usage if trial.summary else None


def within_run_batches(result: results.TrialResult) -> list[float]:
    """A finished trial's throughput (samples/s, all workers) in BATCHES contiguous batches of its iterations
    after warm-up: batch k sums every worker's samples over its time in its own k-th batch. [] when the
    workers recorded too few iterations for two batches each."""
    if result.status != combinations.FINISHED:
        return []
    per_rank = [times for times in map(_measured_iterations, result.records.values()) if times]
    batches = min([BATCHES] + [len(times) // MIN_BATCH_ITERATIONS for times in per_rank]) if per_rank else 0
    if batches < 2:
        return []
    samples = result.spec.model.batch_size
    totals = [0.0] * batches
    for times in per_rank:
        for k, mean in enumerate(statistics.batch_means(times, batches)):
            totals[k] += samples / mean
    return totals


def _measured_iterations(records: list[dict]) -> list[float]:
    """A rank's worker iteration times after warm-up (a server rank has none)."""
    return [float(r[keys.TIME_ITERATION]) for r in records if records_.is_worker_record(r) and not r.get(keys.WARMUP)
            and isinstance(r.get(keys.TIME_ITERATION), (int, float)) and r[keys.TIME_ITERATION] > 0]


def compare(better: combinations.Combination, other: combinations.Combination) -> Comparison:
    """better's throughput over other's: across repetitions where both have two or more, else within the runs
    (batch means), where parity must be cleared by SINGLE_RUN_MARGIN to tell them apart. Single runs whose ranks
    shared CPUs name no winner: contended timings drift between runs by more than a run's own spread (on 2 busy
    cores, the same file's two runs put one paradigm 1.8x ahead, then 1.4x behind). Two setups whose placements put
    different shares of their bytes across nodes are compared with that caveat (placement_notes.caveat), and two that
    sent different bytes across pods or nodes say how much (placement_notes.traffic_note): what crossed a NIC, not only
    where."""
    repeated = better.values(keys.THROUGHPUT), other.values(keys.THROUGHPUT)
    contended = any(crowded(_usage(trial)) for group in (better, other) for trial in group.trials)
    if min(map(len, repeated)) >= 2:
        estimate, basis, margin = statistics.ratio(*repeated), "repetitions", 0.0
    else:
        pooled = [[b for t in group.trials for b in within_run_batches(t)] for group in (better, other)]
        if min(map(len, pooled)) >= 2:
            estimate, basis = statistics.ratio(pooled[0], pooled[1]), "within-run"
            margin = math.inf if contended else SINGLE_RUN_MARGIN
        else:
            estimate, basis, margin = statistics.ratio(*repeated), None, 0.0
    low, high = estimate.low, estimate.high
    separated = low is not None and high is not None and (low > 1.0 + margin or high < 1.0 / (1.0 + margin))
    # Unless placement is what the two differ in, a different share of bytes across nodes qualifies the verdict.
    placed = None if better.parameters.get(PLACEMENT) != other.parameters.get(PLACEMENT) else placement_notes.caveat(
        _name(better), [t.summary for t in better.trials], _name(other), [t.summary for t in other.trials])
    traffic = placement_notes.traffic_note(_name(better), [t.summary for t in better.trials], _name(other),
                                           [t.summary for t in other.trials])
    return Comparison(estimate, basis, separated, contended and basis == "within-run", placed, traffic)


def interval(estimate: statistics.MeanInterval, digits: int = 2) -> str:
    """" (95 % CI 1.41-1.86)", or "" without an interval."""
    if estimate.low is None or estimate.high is None:
        return ""
    return f" (95 % CI {estimate.low:.{digits}f}-{estimate.high:.{digits}f})"


def _name(combination: combinations.Combination) -> str:
    """The combination's label, or its one trial's name when the sweep varies nothing."""
    if len(combination.trials) == 1:
        trial = combination.trials[0].trial
        return f"{trial.name} ({combination.label})" if combination.parameters else trial.name
    return combination.label


def fastest(groups: list[combinations.Combination]) -> list[Finding]:
    """The fastest combination, named only when it is told apart from the runner-up; else that it is not."""
    measured = sorted(((estimate, group) for group in groups
                       if (estimate := group.estimate(keys.THROUGHPUT)) is not None),
                      key=lambda item: item[0].mean, reverse=True)
    if not measured:
        return []
    throughput, best = measured[0]
    p50 = best.estimate(keys.P50)
    spread = ""
    if throughput.low is not None and throughput.high is not None:
        spread = f" (95 % CI {throughput.low:.1f}-{throughput.high:.1f}, {throughput.count} repetitions)"
    text = f"Fastest: {_name(best)}: {throughput.mean:.1f} samples/s{spread}"
    if p50 is not None:
        text += f", iteration p50 {1000 * p50.mean:.1f} ms"
    if len(measured) == 1:  # nothing to be fastest against: the numbers, without a verdict
        text = text.replace("Fastest: ", "Only measured: ", 1)
        return [Finding(text + "; no other setup finished to compare it with.", "fastest", (best.label,),
                        keys.THROUGHPUT)]
    runner_up = measured[1][1]
    versus = compare(best, runner_up)
    subjects, compared = (best.label, runner_up.label), _trials_of(best, runner_up)
    if versus.distinguishable:
        return [versus.finding(text + f"; {versus.ratio.mean:.2f}x the runner-up, {_name(runner_up)} "
                               f"({versus.interval()}).", "fastest", subjects, compared)]
    if versus.within_drift:
        return [versus.finding(f"No clear fastest: {_name(best)} leads {_name(runner_up)} by {_ratio_words(versus)}, "
                               f"{versus.drift_clause()}.", "fastest", subjects, compared)]
    return [versus.finding(f"No clear fastest: {_name(best)} and {_name(runner_up)} cannot be told apart: "
                           f"{_ratio_words(versus)}; {versus.settle()}.", "fastest", subjects, compared)]


def _trials_of(*groups: combinations.Combination) -> frozenset[str]:
    return frozenset(t.trial.name for group in groups for t in group.trials)


def comparisons(result: results.SweepResult) -> list[Finding]:
    """Per varied axis and setting of the other axes: the best value's throughput over each other value's."""
    axes = combinations.varied_axes(result)
    sentences = []
    for axis in axes:
        others = [other for other in axes if other != axis]
        for context in combinations.group(result, others):
            values = [(c, c.values(keys.THROUGHPUT))
                      for c in combinations.group(results.SweepResult(result.experiment, context.trials), [axis])]
            values = [(c, v) for c, v in values if v]
            if len(values) < 2:
                continue
            best, _ = max(values, key=lambda item: sum(item[1]) / len(item[1]))
            where = f" at {context.label}" if context.parameters else ""
            for other, _ in values:
                if other is not best:
                    sentences.append(_comparison(best, other, where))
    if len(sentences) > MAX_COMPARISONS:
        rest = len(sentences) - MAX_COMPARISONS
        sentences = sentences[:MAX_COMPARISONS] + [Finding(f"({rest} more comparisons: see the table.)", "comparison")]
    return sentences


def _comparison(best: combinations.Combination, other: combinations.Combination, where: str) -> Finding:
    versus = compare(best, other)
    if versus.distinguishable:
        text = f"{best.label}: {versus.ratio.mean:.2f}x the throughput of {other.label}{where} ({versus.interval()})."
    elif versus.within_drift:
        text = (f"{best.label}: {versus.ratio.mean:.2f}x the throughput of {other.label}{where} "
                f"({versus.interval()}), {versus.drift_clause()}.")
    else:
        text = f"{best.label} and {other.label}{where}: not told apart, {_ratio_words(versus)}."
    return versus.finding(text, "comparison", (best.label, other.label), _trials_of(best, other))


def _ratio_words(versus: Comparison) -> str:
    return f"{versus.ratio.mean:.2f}x" + (f", {versus.interval()}" if versus.interval() else " from one value each")


def communication(groups: list[combinations.Combination]) -> list[Finding]:
    """The largest and smallest share of iteration time in communication, with waiting beside it."""
    shares = [(share, group) for group in groups if (share := group.estimate(keys.COMM_FRACTION)) is not None]
    if not shares:
        return []

    def said(item) -> str:
        share, group = item
        wait = group.estimate(keys.WAIT_FRACTION)
        waiting = f", waiting {100 * wait.mean:.0f} %" if wait is not None else ""
        return f"{100 * share.mean:.0f} % of iteration time for {_name(group)}{waiting}"

    high = max(shares, key=lambda item: item[0].mean)
    low = min(shares, key=lambda item: item[0].mean)
    if high is low:
        return [Finding(f"Communication is {said(high)}.", "communication", (high[1].label,), keys.COMM_FRACTION)]
    return [Finding(f"Communication is {said(high)}; {said(low)}.", "communication", (high[1].label, low[1].label),
                    keys.COMM_FRACTION)]


def time_to_loss(result: results.SweepResult) -> list[Finding]:
    if convergence.PARADIGM not in result.axes:
        return []
    goal = convergence.target(result)
    if goal is None:
        return []
    parts = []
    for group in combinations.group(result):
        times = [goal.seconds.get(t.trial.name) for t in group.trials if t.trial.name in goal.seconds]
        if times:
            parts.append(_seconds_to_goal(group.label, times)[0])
    return [Finding(f"Time to loss {goal.loss:.4g} (the final loss of {goal.trial}): " + "; ".join(parts) + ".",
                    "loss")]


def _seconds_to_goal(name: str, times: list) -> tuple[str, statistics.MeanInterval | None]:
    """A combination's seconds to a goal over its repetitions (None: never reached) in words, and their estimate."""
    reached = [float(t) for t in times if t is not None]
    if not reached:
        return f"{name} never", None
    estimate = statistics.estimate(reached)
    missed = f" ({len(times) - len(reached)} of {len(times)} never)" if len(reached) < len(times) else ""
    return f"{name} {estimate.mean:.1f} s{interval(estimate, 1)}{missed}", estimate


def _goal(result: results.SweepResult) -> str | None:
    """What `model.target` the sweep's trials are timed to, in words; None when they set none."""
    return tables.goal_words(convergence.file_target(result))


def time_to_target(result: results.SweepResult) -> list[Finding]:
    """Seconds to `model.target` per combination (targetSeconds of the summaries), and which got there first when
    the repetitions say so: the answer a time-to-accuracy comparison (BSP against stale paradigms) is run for.
    A time to target moves by tens of percent from run to run, so one run each names no first."""
    goal = _goal(result)
    if goal is None:
        return []
    parts, reached_by = [], []
    for group in combinations.group(result):
        name = group.label or _name(group)
        times = [t.summary.evaluation.target_seconds for t in group.trials if t.summary]
        if not times:
            continue
        part, estimate = _seconds_to_goal(name, times)
        parts.append(part)
        if estimate is not None:
            reached_by.append((estimate.mean, name, estimate))
    if not parts:
        return []
    reached_by.sort(key=lambda entry: entry[:2])
    order = tuple(name for _, name, _ in reached_by)
    text = f"Time to {goal}: " + "; ".join(parts) + "."
    if len(reached_by) < 2:
        return [Finding(text, "target", order, keys.TARGET_SECONDS)]
    (_, first, best), (_, second, runner_up) = reached_by[:2]
    ratio = runner_up.mean / best.mean if best.mean > 0 else None
    if best.high is not None and runner_up.low is not None:
        separated = best.high < runner_up.low
        verdict = (f" First: {first}." if separated else
                   f" No clear first: {first} and {second} overlap; more repetitions would settle it.")
        basis = "repetitions"
    else:
        separated, basis = False, None
        verdict = (f" Earliest in this run: {first}, but one run each cannot say how sure: a time to target moves "
                   f"from run to run; set sweep.repetitions (3 or more) to know.")
    return [Finding(text + verdict, "target", order, keys.TARGET_SECONDS, ratio=ratio, basis=basis,
                    distinguishable=separated)]


def network(result: results.SweepResult) -> list[Finding]:
    if scaling.BANDWIDTH not in result.axes:
        return []
    sentences = []
    lines = {line.label: line.trials for line in scaling.bandwidth_lines(result)}
    for name, points in scaling.bandwidth_series(result).items():
        (slow, at_slow), (fast, at_fast) = points[0], points[-1]
        curve = scaling.whatif_curve(lines[name], [slow, fast])
        model = ""
        if isinstance(curve, scaling.WhatIfCurve):
            model = f"; the what-if model says {curve.points[0][1]:.2f} and {curve.points[1][1]:.2f}"
        label = "" if name == "all trials" else f"{name}: "
        sentences.append(Finding(f"{label}scaling factor {at_slow.mean:.2f} at {slow / 1e9:g} Gbit/s and "
                                 f"{at_fast.mean:.2f} at {fast / 1e9:g} Gbit/s (measured){model}.", "network", (name,)))
    return sentences


def contention(result: results.SweepResult) -> list[Finding]:
    """Trials whose ranks had more threads than their machine's CPUs (usage in the summary, runtime/usage.py): ranks
    sharing a laptop's cores, or a pod whose CPU limit is below a core. Their times include waiting for a CPU,
    which says as much about the machine as about the setup."""
    starved = [(t.trial.name, said) for t in result.trials if (said := crowded(_usage(t)))]
    if not starved:
        return []
    parts = "; ".join(f"{name}: {said}" for name, said in starved)
    return [Finding(f"CPU contention: {parts}. Their timings are contended: they include waiting for a CPU, so "
                    "compare them only with trials that shared the CPUs alike, or give each rank CPUs of its own "
                    "(fewer ranks per machine, or a cluster).", "contention", tuple(name for name, _ in starved))]


def failures(result: results.SweepResult) -> list[Finding]:
    return [Finding(f"{t.trial.name} {t.status}" + (f": {t.message}" if t.message else "") + ".", "failure",
                    (t.trial.name,)) for t in result.trials if t.status != combinations.FINISHED]


def incomplete(result: results.SweepResult) -> list[Finding]:
    """First of all, what the comparisons leave out: trials that never ran, and trials that did not finish."""
    ran = {t.trial.name for t in result.trials}
    missing = [name for name in result.planned if name not in ran]
    unfinished = [t for t in result.trials if t.status != combinations.FINISHED]
    if not missing and not unfinished:
        return []
    total = len(result.planned) or len(result.trials)
    parts = []
    if missing:
        parts.append(f"{len(missing)} of {total} trials never ran ({', '.join(missing)})")
    if unfinished:
        parts.append(f"{len(unfinished)} did not finish "
                     f"({', '.join(f'{t.trial.name} {t.status}' for t in unfinished)})")
    return [Finding(f"Incomplete: {'; '.join(parts)}. What follows compares only the trials that finished.",
                    "incomplete", tuple(missing) + tuple(t.trial.name for t in unfinished))]


def findings(result: results.SweepResult) -> list[Finding]:
    """Every finding once, ordered by what it settles: what is missing; the answers the data settle (time to the
    target, the fastest, each comparison told apart) and what qualifies them (contention); where the time goes;
    then, once each, what the data do not settle and what would; the rest. One sentence says so when no trial
    finished."""
    groups = combinations.group(result)
    found = fastest(groups)
    if not found:
        return [Finding(f"No finished trial has a summary (summary.json): nothing to compare "
                        f"({len(result.trials)} trials).", "incomplete")] + failures(result)
    settled, unsettled, more = [], [], []
    for finding in found + comparisons(result):
        if not finding.subjects:  # "(n more comparisons: see the table.)"
            more.append(finding)
        elif finding.kind == "comparison" and finding.compared and finding.compared == found[0].compared:
            continue  # the fastest and its runner-up (the same trials) are compared once, in the fastest's sentence
        elif finding.distinguishable is False:
            unsettled.append(finding)
        else:
            settled.append(finding)
    if not settled:  # nothing is settled: that is the answer, said first
        settled, unsettled = unsettled[:1], unsettled[1:]
    # With a target, time to it is what the sweep was run for: it leads, before throughput.
    # Contention qualifies the answer: it follows it, never leads over it.
    return (incomplete(result) + time_to_target(result) + settled + contention(result) + communication(groups)
            + unsettled + more + time_to_loss(result) + network(result) + failures(result))
