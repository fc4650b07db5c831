"""The ring's buckets on two real gloo ranks: gradients stay views of the buckets, and equal a reference allreduce."""

import pathlib

import pytest

import gloo_pair

pytestmark = pytest.mark.integration

RANK_SCRIPT = pathlib.Path(__file__).with_name("ring_buckets_rank.py")


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    output = tmp_path_factory.mktemp("ring-buckets")
    return gloo_pair.run(RANK_SCRIPT, output, timeout_seconds=90)


def test_buckets_close_at_the_bucket_size_in_backward_order(reports):
    # 512-byte buckets (the 1 MiB first-bucket cap is larger): head (4+128 floats), unused, rank0_head, then
    # body's second layer (32+1024) and its first (32+256), with one arrival stamp per rank after it.
    for report in reports:
        assert report["bucketBytes"] == [528, 528, 528, 4224, 1152 + 2 * 4]


def test_averaged_gradients_and_weights_equal_a_reference_allreduce(reports):
    for report in reports:
        for iteration in report["iterations"]:
            assert iteration["gradientDifference"] <= 1e-6, iteration
            assert iteration["weightDifference"] <= 1e-6, iteration


def test_gradients_stay_views_of_the_buckets_even_after_being_set_to_none(reports):
    for report in reports:
        assert all(iteration["gradientsAreBucketViews"] for iteration in report["iterations"])


def test_a_parameter_one_rank_skipped_gets_the_average_and_one_nobody_used_gets_zero(reports):
    for report in reports:
        for iteration in report["iterations"]:
            assert iteration["unusedGradientIsZero"]
            assert iteration["rank0HeadGradient"] > 0  # rank 1 never used it: half of rank 0's gradient
    assert [i["rank0HeadGradient"] for i in reports[0]["iterations"]] == \
           [i["rank0HeadGradient"] for i in reports[1]["iterations"]]


def test_every_rank_gets_every_ranks_arrival_stamp_with_the_last_bucket(reports):
    # Each rank writes the seconds since the ring last finished communicating into its own slot; the others hold
    # zeros, so after the allreduce both ranks hold both stamps, each a positive duration.
    stamps = [[iteration["arrivalStamps"] for iteration in report["iterations"]] for report in reports]
    assert stamps[0] == stamps[1]
    assert all(len(pair) == 2 and all(0 < stamp < 60 for stamp in pair) for pair in stamps[0]), stamps[0]
