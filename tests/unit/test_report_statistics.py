"""Confidence intervals of repeated trials, against values worked out by hand from t tables."""

from __future__ import annotations

import math

import pytest

from ringleader.models import statistics


@pytest.mark.parametrize("degrees, expected", [(1, 12.7062), (2, 4.3027), (3, 3.1824), (4, 2.7764), (9, 2.2622),
                                               (30, 2.0423), (1000, 1.9623)])
def test_the_t_quantile_matches_the_printed_table(degrees, expected):
    assert statistics.t_quantile(0.975, degrees) == pytest.approx(expected, abs=5e-5)


def test_the_t_distribution_is_symmetric_and_the_quantile_inverts_it():
    assert statistics.t_cdf(0.0, 5) == pytest.approx(0.5)
    assert statistics.t_cdf(-2.0, 5) == pytest.approx(1 - statistics.t_cdf(2.0, 5))
    assert statistics.t_cdf(statistics.t_quantile(0.9, 7.5), 7.5) == pytest.approx(0.9, abs=1e-9)


def test_an_estimate_is_the_mean_plus_minus_t_times_the_standard_error():
    # mean 2.5, s = sqrt(5/3) = 1.29099, s/sqrt(4) = 0.645497, t(0.975, 3) = 3.182446: half-width 2.054260
    estimate = statistics.estimate([1.0, 2.0, 3.0, 4.0])
    assert estimate.mean == 2.5 and estimate.count == 4
    assert estimate.low == pytest.approx(0.445740, abs=1e-6) and estimate.high == pytest.approx(4.554260, abs=1e-6)


def test_one_value_has_a_mean_and_no_interval():
    assert statistics.estimate([7.0]) == statistics.MeanInterval(7.0, None, None, 1)
    with pytest.raises(ValueError, match="at least one value"):
        statistics.estimate([])


def test_a_ratio_interval_is_asymmetric_and_uses_welchs_degrees_of_freedom():
    # 11 / 5.5 = 2; log-scale variances 2/(2*121) and 0.5/(2*30.25) are equal, so Welch's df = 2, t = 4.302653;
    # half-width on the log scale 4.302653 * sqrt(2 * 0.0082645) = 0.553172
    ratio = statistics.ratio([10.0, 12.0], [5.0, 6.0])
    assert ratio.mean == 2.0
    assert ratio.low == pytest.approx(2 * math.exp(-0.553172), abs=1e-5)
    assert ratio.high == pytest.approx(2 * math.exp(0.553172), abs=1e-5)
    assert ratio.high - ratio.mean > ratio.mean - ratio.low


def test_a_ratio_without_spread_or_repetitions_says_so():
    assert statistics.ratio([4.0, 4.0], [2.0, 2.0]) == statistics.MeanInterval(2.0, 2.0, 2.0, 2)
    assert statistics.ratio([4.0], [2.0, 3.0]).low is None
    with pytest.raises(ValueError, match="positive means"):
        statistics.ratio([0.0], [1.0])


def test_batch_means_split_contiguously_the_first_batches_one_longer():
    assert statistics.batch_means([1, 2, 3, 4, 5, 6, 7], 3) == [2.0, 4.5, 6.5]
    assert statistics.batch_means([2.0] * 4, 4) == [2.0] * 4
    with pytest.raises(ValueError):
        statistics.batch_means([1.0], 2)
