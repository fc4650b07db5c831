"""Means and 95 % confidence intervals (Student t) of repeated trials, and of the ratio of two means; used by reports.

Pure arithmetic on lists of floats, no numpy or scipy: the t quantile comes from the regularized
incomplete beta function (a continued fraction), inverted by bisection, exact to 1e-9.
"""

from __future__ import annotations

import dataclasses
import math
import statistics
from typing import Sequence

CONFIDENCE = 0.95


@dataclasses.dataclass(frozen=True)
class MeanInterval:
    """A mean with its confidence interval; low and high are None with fewer than two values."""

    mean: float
    low: float | None
    high: float | None
    count: int

    def wire(self) -> dict[str, float | int | None]:
        return {"mean": self.mean, "low": self.low, "high": self.high, "count": self.count}


def _incomplete_beta_fraction(a: float, b: float, x: float) -> float:
    # Lentz's continued fraction for I_x(a, b) (Numerical Recipes, betacf); converges fast for x < (a+1)/(a+b+2).
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    result = d
    for m in range(1, 300):
        for numerator in (m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
                          -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))):
            d = 1.0 + numerator * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + numerator / c
            c = c if abs(c) > tiny else tiny
            result *= c * d
        if abs(c * d - 1.0) < 1e-15:
            break
    return result


def incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function, for a, b > 0 and 0 <= x <= 1."""
    if x <= 0.0 or x >= 1.0:
        return 0.0 if x <= 0.0 else 1.0
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    if x < (a + 1.0) / (a + b + 2.0):
        return front * _incomplete_beta_fraction(a, b, x) / a
    return 1.0 - front * _incomplete_beta_fraction(b, a, 1.0 - x) / b


def t_cdf(t: float, degrees: float) -> float:
    """P(T <= t) for Student's t with `degrees` degrees of freedom (> 0, not necessarily whole: Welch's)."""
    tail = 0.5 * incomplete_beta(degrees / 2.0, 0.5, degrees / (degrees + t * t))
    return 1.0 - tail if t >= 0 else tail


def t_quantile(probability: float, degrees: float) -> float:
    """The t with P(T <= t) = probability, for 0.5 <= probability < 1: e.g. 12.706 for (0.975, 1)."""
    if not 0.5 <= probability < 1.0 or not degrees > 0:
        raise ValueError(f"t_quantile needs 0.5 <= probability < 1 and degrees > 0, got {probability}, {degrees}")
    low, high = 0.0, 1.0
    while t_cdf(high, degrees) < probability:
        high *= 2.0
    for _ in range(200):
        middle = (low + high) / 2.0
        low, high = (middle, high) if t_cdf(middle, degrees) < probability else (low, middle)
        if high - low < 1e-12:
            break
    return (low + high) / 2.0


def estimate(values: Sequence[float], confidence: float = CONFIDENCE) -> MeanInterval:
    """mean ± t(1 - (1 - confidence)/2, n - 1) * s / sqrt(n); no interval for a single value."""
    if not values:
        raise ValueError("estimate needs at least one value")
    mean = statistics.fmean(values)
    if len(values) < 2:
        return MeanInterval(mean, None, None, len(values))
    half = (t_quantile(1.0 - (1.0 - confidence) / 2.0, len(values) - 1) * statistics.stdev(values)
            / math.sqrt(len(values)))
    return MeanInterval(mean, mean - half, mean + half, len(values))


def ratio(numerator: Sequence[float], denominator: Sequence[float], confidence: float = CONFIDENCE) -> MeanInterval:
    """mean(numerator) / mean(denominator), with an interval from the delta method on the log of the ratio:
    log R ± t * sqrt(s_a²/(n_a m_a²) + s_b²/(n_b m_b²)), degrees of freedom by Welch-Satterthwaite.

    The interval is asymmetric around R, as a ratio's is; none unless both sides have two values or more."""
    if not numerator or not denominator:
        raise ValueError("ratio needs at least one value on each side")
    a, b = statistics.fmean(numerator), statistics.fmean(denominator)
    if not a > 0 or not b > 0:
        raise ValueError(f"ratio needs positive means, got {a} and {b}")
    value = a / b
    if len(numerator) < 2 or len(denominator) < 2:
        return MeanInterval(value, None, None, min(len(numerator), len(denominator)))
    parts = [statistics.variance(sample) / (len(sample) * mean * mean)
             for sample, mean in ((numerator, a), (denominator, b))]
    spread = sum(parts)
    if spread == 0:
        return MeanInterval(value, value, value, min(len(numerator), len(denominator)))
    degrees = spread ** 2 / sum(part ** 2 / (len(sample) - 1) for part, sample in zip(parts, (numerator, denominator))
                                if part > 0)
    half = t_quantile(1.0 - (1.0 - confidence) / 2.0, degrees) * math.sqrt(spread)
    return MeanInterval(value, value * math.exp(-half), value * math.exp(half), min(len(numerator), len(denominator)))


def batch_means(values: Sequence[float], batches: int) -> list[float]:
    """The means of `batches` contiguous, near-equal runs of `values` (the first ones one longer when uneven).

    Successive iterations are correlated (a busy second slows several in a row), so single iterations are no
    independent samples; means of long enough contiguous batches nearly are, which a t-interval needs."""
    if not 1 <= batches <= len(values):
        raise ValueError(f"batch_means needs 1 <= batches <= {len(values)} values, got {batches}")
    size, extra = divmod(len(values), batches)
    means, start = [], 0
    for index in range(batches):
        end = start + size + (1 if index < extra else 0)
        means.append(statistics.fmean(values[start:end]))
        start = end
    return means
