"""The ring's buckets on two real gloo ranks: gradients stay views of the buckets, and equal a reference allreduce."""

import json
import os
import pathlib
import subprocess
import sys

import pytest

from loopback import free_port

pytestmark = pytest.mark.integration

RANK_SCRIPT = pathlib.Path(__file__).with_name("ring_buckets_rank.py")
SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[3] / "operator"


@pytest.fixture(scope="module")
def reports(tmp_path_factory):
    output = tmp_path_factory.mktemp("ring-buckets")
    environ = {**os.environ, "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1", "MASTER_PORT": str(free_port()),
               "GLOO_SOCKET_IFNAME": "lo", "OMP_NUM_THREADS": "1",
               "PYTHONPATH": os.pathsep.join(filter(None, [str(SOURCE_ROOT), os.environ.get("PYTHONPATH")]))}
    ranks = [subprocess.Popen([sys.executable, str(RANK_SCRIPT), str(output)], env={**environ, "RANK": str(rank)},
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, start_new_session=True)
             for rank in (0, 1)]
    try:
        logs = [process.communicate(timeout=90)[0] for process in ranks]
    finally:
        for process in ranks:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
    assert [process.returncode for process in ranks] == [0, 0], logs
    return [json.loads((output / f"rank-{rank}.json").read_text()) for rank in (0, 1)]


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
