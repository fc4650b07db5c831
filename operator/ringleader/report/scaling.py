"""Scaling figures: throughput, speedup and efficiency against workers, communication against the cost models,
and the scaling factor against bandwidth beside the what-if model; used by report.py and findings.py.

Cost models (cost_models.py) need the model's size M and the link's bandwidth B. M is the sum of the
parameters' bytes in a rank's layers.json; without one, no model is drawn. B is spec.network.bandwidth
when the trials set one, else ASSUMED_BANDWIDTH, written on the figure; latency is taken as 0.
"""

from __future__ import annotations

import dataclasses
import math
import pathlib

import matplotlib.pyplot as pyplot

from ringleader.models import combinations, cost_models, profile, results, statistics, whatif
from ringleader.models.architectures import priced_comm_seconds
from ringleader.report import figures
from ringleader.contract import keys

WORKERS = "workers"
BANDWIDTH = "bandwidth"
ASSUMED_BANDWIDTH = 10e9
"""ASSUMED_BANDWIDTH in bits per second (10 Gbit/s, a common data-centre NIC) when spec.network.bandwidth is unset;
local runs over loopback are faster still, so their communication lies below this model."""


@dataclasses.dataclass(frozen=True)
class Point:
    """One worker count of a series: throughput, speedup and efficiency over the series' smallest count."""

    workers: int
    throughput: statistics.MeanInterval
    speedup: statistics.MeanInterval
    efficiency: statistics.MeanInterval
    comm_seconds: statistics.MeanInterval | None


def _scaled(estimate: statistics.MeanInterval, factor: float) -> statistics.MeanInterval:
    return statistics.MeanInterval(estimate.mean * factor, None if estimate.low is None else estimate.low * factor,
                               None if estimate.high is None else estimate.high * factor, estimate.count)


def scaling_series(result: results.SweepResult) -> dict[str, list[Point]]:
    """Per series (every varied axis but workers, e.g. "RingAllReduce"), its points by worker count; speedup
    and efficiency are relative to the series' smallest worker count, with intervals when repeated."""
    others = [axis for axis in combinations.varied_axes(result) if axis != WORKERS]
    series: dict[str, list[Point]] = {}
    for line in combinations.group(result, others):
        by_workers = combinations.group(results.SweepResult(result.experiment, line.trials), [WORKERS])
        measured = sorted(((int(c.parameters[WORKERS]), c, throughput) for c in by_workers
                           if (throughput := c.estimate(keys.THROUGHPUT)) is not None), key=lambda item: item[0])
        if len(measured) < 2:
            continue
        base_workers, base, _ = measured[0]
        points = []
        for workers, combination, throughput in measured:
            speedup = statistics.ratio(combination.values(keys.THROUGHPUT), base.values(keys.THROUGHPUT))
            points.append(Point(workers, throughput, speedup,
                                _scaled(speedup, base_workers / workers), combination.estimate(keys.COMM_SECONDS)))
        series[line.label] = points
    return series


def model_bytes(result: results.SweepResult) -> float | None:
    """M: the bytes of all parameters, from the first layers.json document found; None without one."""
    for trial in result.trials:
        for _, layers in sorted(trial.layers.items()):
            sizes = [p.get("bytes") for p in layers.get("parameters") or []]
            if sizes and all(isinstance(size, (int, float)) for size in sizes):
                return float(sum(sizes))
    return None


def link(result: results.SweepResult) -> tuple[cost_models.Nic, str]:
    """The link of the cost models and how it was chosen, in words for the figure."""
    rates = {trial.spec.network.bits_per_second() for trial in result.trials}
    rate = rates.pop() if len(rates) == 1 else None
    if rate is not None:
        return cost_models.Nic(rate), f"B = {rate / 1e9:g} Gbit/s (spec.network.bandwidth), latency 0"
    return cost_models.Nic(ASSUMED_BANDWIDTH), (f"B = {ASSUMED_BANDWIDTH / 1e9:g} Gbit/s assumed "
                                            "(spec.network.bandwidth unset or swept), latency 0")


def _errorbar(axes, xs, estimates, scale=1.0, **style) -> None:
    means = [scale * e.mean for e in estimates]
    below = [scale * (e.mean - e.low) if e.low is not None else 0.0 for e in estimates]
    above = [scale * (e.high - e.mean) if e.high is not None else 0.0 for e in estimates]
    axes.errorbar(xs, means, yerr=[below, above], capsize=3, marker="o", **style)


def scaling(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Throughput, speedup and efficiency against workers, one line per series."""
    if WORKERS not in result.axes:
        return None
    series = scaling_series(result)
    if not series:
        return None
    figure, panels = pyplot.subplots(1, 3, figsize=(13.0, 4.2))
    for index, (name, points) in enumerate(series.items()):
        xs = [p.workers for p in points]
        style = {"color": figures.colour(index), "label": name}
        _errorbar(panels[0], xs, [p.throughput for p in points], **style)
        _errorbar(panels[1], xs, [p.speedup for p in points], **style)
        _errorbar(panels[2], xs, [p.efficiency for p in points], **style)
    every = sorted({p.workers for points in series.values() for p in points})
    panels[1].plot(every, [w / every[0] for w in every], "k:", linewidth=1, label="linear")
    panels[2].axhline(1.0, color="k", linestyle=":", linewidth=1)
    for panel, unit in zip(panels, ("throughput (samples/s)", "speedup", "efficiency")):
        panel.set_xlabel("workers")
        panel.set_ylabel(unit)
        panel.set_xticks(every)
    panels[1].legend(fontsize=7)
    figure.suptitle("Scaling with workers (error bars: 95 % CI over repetitions, where repeated)", fontsize=10)
    path = figures.save(figure, directory, "scaling")
    return figures.Figure("scaling", "Scaling with workers",
                          "three line charts against workers per series: throughput, speedup and efficiency",
                          "Speedup is throughput over that of the series' smallest worker count; efficiency is speedup "
                          "over the ratio of worker counts (1 = linear scaling, dotted). Intervals of speedup come "
                          "from the delta method on the ratio of means.", path)


MODEL_DASHES = ("--", ":", "-.")
MODEL_MARKERS = ("o", "s", "^")


def communication(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Measured communication seconds per worker iteration against workers, with the cost models drawn over."""
    if WORKERS not in result.axes:
        return None
    series = {name: [p for p in points if p.comm_seconds is not None]
              for name, points in scaling_series(result).items()}
    series = {name: points for name, points in series.items() if points}
    if not series:
        return None
    size = model_bytes(result)
    chosen, described = link(result)
    figure, axes = pyplot.subplots(figsize=(7.5, 4.6))
    every = sorted({p.workers for points in series.values() for p in points})
    for index, (name, points) in enumerate(series.items()):
        _errorbar(axes, [p.workers for p in points], [p.comm_seconds for p in points], scale=1000.0,
                  color=figures.colour(index), label=f"{name} (measured)")
    drawn = []
    if size is not None:
        architectures = dict.fromkeys(t.spec.architecture for t in result.trials)
        servers = max(t.spec.parameter_servers.replicas for t in result.trials)
        for index, architecture in enumerate(architectures):
            xs = list(range(every[0], every[-1] + 1))
            ys = [1000 * priced_comm_seconds(architecture, n, size, chosen, servers) for n in xs]
            # Two models may nearly coincide (peer-to-peer and the ring at few workers): each line has its own dash
            # pattern and hollow marker, so that neither hides the other.
            axes.plot(xs, ys, linestyle=MODEL_DASHES[index % len(MODEL_DASHES)],
                      marker=MODEL_MARKERS[index % len(MODEL_MARKERS)], markerfacecolor="none", markersize=7 - index,
                      color=figures.colour(len(series) + index), label=f"{architecture.value} (model, as predict)")
            drawn.append(architecture.value)
    axes.set_xlabel("workers")
    axes.set_ylabel("mean communication per worker iteration (ms)")
    axes.set_xticks(every)
    if size is None:
        note = "no cost model: the model's size M needs a rank's layers.json, which this source lacks"
    else:
        note = f"model: M = {size / 1e6:.3g} MB (layers.json), {described}"
    axes.set_title(f"Mean communication per worker iteration against workers\n{note}", fontsize=9)
    axes.legend(fontsize=7)
    path = figures.save(figure, directory, "communication")
    return figures.Figure("communication", "Communication against the cost models",
                          "line chart: measured mean communication milliseconds per worker iteration against workers"
                          + (", with the cost models of " + ", ".join(drawn) + " dashed" if drawn else ""),
                          "Measured: mean communication time per worker iteration after warm-up. Dashed: the cost "
                          "models as `ringleader predict` prices them (parameter server max((N+1)M/(kB), 2M/B), "
                          "its NIC "
                          "sending and receiving at once; peer-to-peer 2(N-1)M/(NB); ring 2(N-1)M/(NB)) with "
                          f"{note.removeprefix('model: ')}. Measured far above its model means the exchange is not "
                          "bandwidth-bound (latency, serialization, CPU contention).", path)


# -- bandwidth ------------------------------------------------------------------------------

@dataclasses.dataclass(frozen=True)
class WhatIfCurve:
    """Study 3's what-if scaling factors for one profiled trial, at the given bandwidths."""

    trial: str
    workers: int
    points: list[tuple[float, float]]
    """points are (bits per second, scaling factor)."""
    method: str = ""
    """method is the compression the trial measured and the curve prices (collectives.measured); '' uncompressed."""


def bandwidth_lines(result: results.SweepResult) -> list[combinations.Combination]:
    """The series of a bandwidth sweep: its trials grouped by every varied axis but bandwidth (e.g. compression)."""
    return combinations.group(result, [axis for axis in combinations.varied_axes(result) if axis != BANDWIDTH])


def measured_scaling_factor(trial: results.TrialResult) -> float | None:
    """A trial's SF in the model's terms (whatif.measured_scaling_factor) of its lowest worker rank with records;
    the summary's compute share of iteration time where no records were read."""
    ranks = [s.rank for s in trial.trial.worker_slots() if trial.records.get(s.rank)]
    try:
        return whatif.measured_scaling_factor(trial.records[ranks[0]])
    except (IndexError, ValueError, TypeError):  # no records, or no measured worker iteration in them
        return combinations.number(trial, keys.COMPUTE_FRACTION)


def bandwidth_series(result: results.SweepResult) -> dict[str, list[tuple[float, statistics.MeanInterval]]]:
    """Per series (bandwidth_lines), the measured scaling factor (measured_scaling_factor, over repetitions) at
    each bandwidth, in bits per second, slowest first."""
    series = {}
    for line in bandwidth_lines(result):
        points = []
        for combination in combinations.group(results.SweepResult(result.experiment, line.trials), [BANDWIDTH]):
            estimate = combination.estimate(
                lambda t: measured_scaling_factor(t) if t.status == combinations.FINISHED else None)
            rate = combination.trials[0].trial.spec.network.bits_per_second()
            if estimate is not None and rate is not None:  # a sweep without a bandwidth axis has no rate
                points.append((float(rate), estimate))
        if points:
            series[line.label] = sorted(points, key=lambda point: point[0])
    return series


def whatif_curve(trials: list[results.TrialResult], bandwidths: list[float]) -> WhatIfCurve | str:
    """The what-if model at `bandwidths` from the finished trial and rank `ringleader whatif` would take of `trials`
    (profile.pick, profile.worker_rank), priced as it ran (whatif.basis: its buckets, compression, codec, floor
    and wait), or why not."""
    try:
        trial, _ = profile.pick([t for t in trials if t.status == combinations.FINISHED])
        basis = whatif.basis(trial, profile.worker_rank(trial))
    except (LookupError, ValueError, KeyError):
        return ("no what-if curve: it needs a worker's layers.json and records of a finished trial, which this "
                "source lacks")
    points = [(rate, whatif.scaling_factor(basis.batch_seconds, whatif.simulate(
        basis.profile, basis.workers, rate, basis.wire or 1.0, batch_seconds=basis.batch_seconds,
        bucketing=basis.bucketing, floor=basis.floor, wait_seconds=basis.wait_seconds).overhead_seconds))
        for rate in bandwidths]
    return WhatIfCurve(trial.trial.name, basis.workers, points, basis.wire.label if basis.wire else "")


def network(result: results.SweepResult, directory: pathlib.Path) -> figures.Figure | None:
    """Measured scaling factor against bandwidth per series, each with the what-if model's curve from one of its
    own trials (a compressed series' priced at the ratio, rounds and codec it measured)."""
    if BANDWIDTH not in result.axes:
        return None
    series = bandwidth_series(result)
    if not series:
        return None
    rates = [rate for points in series.values() for rate, _ in points]
    low, high = math.log10(min(rates) / 2), math.log10(max(rates) * 2)
    grid = [10 ** (low + (high - low) * i / 40) for i in range(41)]
    lines = {line.label: line.trials for line in bandwidth_lines(result)}
    figure, axes = pyplot.subplots(figsize=(10.0, 4.6))
    drawn, missing = [], ""
    for index, (name, points) in enumerate(series.items()):
        colour = figures.colour(index)
        _errorbar(axes, [rate for rate, _ in points], [estimate for _, estimate in points], color=colour,
                  label=f"{name} (measured)")
        curve = whatif_curve(lines[name], grid)
        if isinstance(curve, WhatIfCurve):
            axes.plot([r for r, _ in curve.points], [sf for _, sf in curve.points], "--", color=colour,
                      label=f"{name} (what-if, {curve.trial}'s profile, N={curve.workers})")
            drawn.append(curve.trial)
        else:
            missing = curve
    note = ("what-if model of each series from one of its trials' layers.json" if drawn else "") + \
        ("; " if drawn and missing else "") + missing
    axes.set_xscale("log")
    axes.set_ylim(0, 1.05)
    axes.set_xlabel("bandwidth (bits/s)")
    axes.set_ylabel("scaling factor")
    axes.set_title(f"Scaling factor against bandwidth\n{note}", fontsize=9)
    axes.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))  # beside the axes: the curves fill them
    path = figures.save(figure, directory, "network")
    return figures.Figure("network", "Scaling factor against bandwidth",
                          "line chart: measured scaling factor against bandwidth per series"
                          + (", with the what-if model's curve of each series dashed in its colour" if drawn else ""),
                          "Measured scaling factor: t_batch (a worker's median iteration outside communication, "
                          "waiting and codec) over its median iteration after warm-up, the model's own terms (the "
                          "compute share of iteration time where records were not read); 1 = the network costs "
                          "nothing. Dashed: the what-if model of each series at each bandwidth, from one of its "
                          "trials: the ring's buckets allreduced while backward runs, a compression's rounds at "
                          "the ratio it measured, its codec time and the wait for the slowest worker"
                          + (f" ({', '.join(drawn)})" if drawn else "") + (f"; {missing}" if missing else "") + ".",
                          path)
