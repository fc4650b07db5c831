"""The one link every architecture's prediction is priced on, fitted from what a trial's ranks measured at its start.

Called by models/prediction.py. The probe (runtime/linkprobe.py; the trial summary's `linkProbe`) timed
messages and allreduces of several sizes before training; each series is fitted here to t(S) = a + b*S: a
probe of sustained trains (its series say `sustainedSeconds`) by cost_models.fit_sustained, whose slope comes
from the sizes beyond a shaper's burst; an older probe's fastest single messages by cost_models.fit_comm_cost
(a median of slopes), as they always were, so that old records predict what they did:

    point-to-point   one way, half a ping-pong: latency a and bandwidth B = 8/b, what a parameter server's and a
                     peer's messages cost (cost_models.Nic)
    collective       one allreduce of the trial's workers, as measured: what each of a ring's buckets costs

An emulated cap (spec.network.bandwidth, enforced by the runtime) is not timed: the runtime's rule is that
bytes cross no faster than it (runtime/nic.py), and the models apply that rule to the measured link.
Every trial of a sweep probes the same way, so each prices an architecture on the same link whichever
architecture it ran. The link's kind (emulated, enforced, loopback, network) is what the validated error
bands are kept per (models/validation.py).
"""

from __future__ import annotations

import dataclasses
from typing import Any, Mapping

from ringleader.models import cost_models
from ringleader.api.spec import ExperimentSpec
from ringleader.contract import keys

EMULATED = "emulated"
"""EMULATED: spec.network.bandwidth, emulated by the runtime (nic.py) on every rank."""
ENFORCED = "enforced"
"""ENFORCED: spec.network.bandwidth, enforced by the cluster's network (pod bandwidth annotations)."""
LOOPBACK = "loopback"
"""LOOPBACK: no cap, every rank on one machine (`ringleader run`): the link is the loopback and the shared CPU."""
NETWORK = "network"
"""NETWORK: no cap, ranks on their own machines (pods)."""


@dataclasses.dataclass(frozen=True)
class Calibration:
    """The link the models use, and how it was found."""

    link: cost_models.Nic
    """link is the point-to-point fit, with the emulated cap if any: a parameter server's and a peer's messages
    cost a + 8S/min(B, cap) each."""
    collective: cost_models.CommCost | None
    """collective is the fitted allreduce of `workers` (None with one worker): a ring bucket of S bytes costs
    a + b*S, or under an emulated cap at least the ring's 2(N-1)/N * 8S/cap."""
    workers: int
    kind: str
    """kind is EMULATED, ENFORCED, LOOPBACK or NETWORK."""
    fit: str
    """fit says, in words, what was fitted from what."""

    def allreduce_seconds(self, size_bytes: float) -> float:
        """One allreduce of `size_bytes` among the trial's workers; 0 with one worker (nothing crosses the network).
        Under an emulated cap it lasts at least the ring's 2(N-1)/N * 8S/cap from its launch (runtime/ring.py paces
        it so), the measured time hidden under that when shorter."""
        measured = self.measured_allreduce_seconds(size_bytes)
        if self.collective is None or not self.link.cap_bits_per_second:
            return measured
        paced = 2.0 * (self.workers - 1) / self.workers * cost_models.BITS_PER_BYTE * size_bytes
        return max(measured, paced / self.link.cap_bits_per_second)

    def measured_allreduce_seconds(self, size_bytes: float) -> float:
        """The allreduce as the probe measured it, no cap applied; 0 with one worker."""
        return 0.0 if self.collective is None else max(0.0, self.collective.seconds(size_bytes))


def kind(spec: ExperimentSpec, shared_host: bool) -> str:
    if spec.network.bandwidth is not None:
        return EMULATED if spec.network.emulated_bits_per_second() else ENFORCED
    return LOOPBACK if shared_host else NETWORK


def fit(samples: list[list[float]], what: str, sustained: bool = False) -> tuple[cost_models.CommCost, int]:
    """t(S) = a + b*S through `samples` ([bytes, seconds]) and how many sizes were left out as inside a burst.
    `sustained` (a probe of trains): cost_models.fit_sustained. Else (an older probe) fit_comm_cost, whose a fitted
    below 0 (noise on small messages) is taken as 0 and b refitted through the origin. ValueError when time does not
    grow with size."""
    pairs = [(float(s), float(t)) for s, t in samples if s > 0 and t > 0]
    if len({s for s, _ in pairs}) < 2:
        raise ValueError(f"the {what} probe has fewer than 2 message sizes: latency and bandwidth cannot be told apart")
    inside = 0
    if sustained:
        found = cost_models.fit_sustained(pairs)
        cost, inside = found.cost, found.inside_burst
    else:
        cost = cost_models.fit_comm_cost(pairs)
        if cost.a_seconds < 0:
            cost = cost_models.CommCost(0.0, sum(s * t for s, t in pairs) / sum(s * s for s, _ in pairs))
    if not cost.b_seconds_per_byte > 0:
        raise ValueError(f"the {what} probe's time does not grow with message size (a loaded machine's noise): "
                         f"no bandwidth to fit ({', '.join(f'{s / 1024:g} KiB {1e3 * t:.3f} ms' for s, t in pairs)})")
    return cost, inside


def _fit_series(series: Mapping[str, Any], what: str) -> tuple[cost_models.CommCost, str]:
    """One probed series' fit and, in words, how it was probed and what the fit left out."""
    sustained = series.get(keys.PROBE_SUSTAINED_SECONDS)
    cost, inside = fit(series[keys.PROBE_SAMPLES], what, sustained is not None)
    sizes = len(series[keys.PROBE_SAMPLES])
    if sustained is None:
        return cost, f"the fastest single messages of {sizes} sizes (an older probe: a shaper's burst can bend it)"
    said = f"median of trains, {sizes} sizes, the largest sustained {1e3 * float(sustained):.0f} ms"
    return cost, said + (f", the {inside} smallest left out as inside a burst" if inside else "")


def calibrate(probe: Mapping[str, Any] | None, spec: ExperimentSpec) -> Calibration:
    """The Calibration of a trial's `linkProbe` document. ValueError saying why when it cannot be fitted (no probe:
    a trial recorded before ringleader probed its link, or one rank alone)."""
    if not probe or not probe.get(keys.PROBE_POINT_TO_POINT):
        raise ValueError("the trial recorded no link probe (summary.json `linkProbe`: a trial of one rank, or "
                         "recorded by a ringleader that did not probe its link): no link to price the models on")
    point, probed = _fit_series(probe[keys.PROBE_POINT_TO_POINT], "point-to-point")
    cap = spec.network.emulated_bits_per_second()
    link = cost_models.Nic(cost_models.BITS_PER_BYTE / point.b_seconds_per_byte, point.a_seconds, cap)
    said = (f"point-to-point: latency {1e6 * link.latency_seconds:.1f} us, "
            f"{link.bandwidth_bits_per_second / 1e9:.4g} Gbit/s")
    collective, workers = None, 1
    if probe.get(keys.PROBE_COLLECTIVE):
        workers = int(probe[keys.PROBE_COLLECTIVE][keys.WORKERS])
        collective, _ = _fit_series(probe[keys.PROBE_COLLECTIVE], "allreduce")
        bus = 2.0 * (workers - 1) / workers * cost_models.BITS_PER_BYTE / collective.b_seconds_per_byte
        said += (f"; allreduce of {workers}: {1e6 * collective.a_seconds:.1f} us + "
                 f"bus {bus / 1e9:.4g} Gbit/s")
    if cap:
        said += f"; the emulated cap {cap / 1e9:.4g} Gbit/s where slower"
    return Calibration(link, collective, workers, kind(spec, bool(probe.get(keys.PROBE_SHARED_HOST))),
                       f"{said} (probed at the trial's start: {probed})")
