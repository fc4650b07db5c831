"""A network, measured by its own tools: each format read into the curves it printed, either curve pricing both
operations, the regimes of a curve found where the protocol changes, and the console lines (planning/network.py;
docs/plan.md, "The network")."""

from __future__ import annotations

import importlib.util
import json
import math
import pathlib

import pytest

from ringleader.models import cost_models
from ringleader.contract import keys
from ringleader.planning import network
from ringleader.planning.network import ALLREDUCE, POINT_TO_POINT, Curve, Level, MeasuredNetwork

ROOT = pathlib.Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "planning"
KIB, MIB = 2**10, 2**20


def line_curve(latency: float, bits: float, sizes: list[float], operation: str = POINT_TO_POINT,
               ranks: int = 2) -> Curve:
    return Curve(operation, ranks, tuple((s, latency + 8 * s / bits) for s in sizes), "made by a test")


POWERS = [float(2**i) for i in range(3, 29)]  # 8 B to 256 MiB


def assert_nic(nic: cost_models.Nic, bits_per_second: float, latency_seconds: float) -> None:
    assert (nic.bandwidth_bits_per_second, nic.latency_seconds) == (pytest.approx(bits_per_second),
                                                                    pytest.approx(latency_seconds))


# ---------------------------------------------------------------------------------------------
# nccl-tests


def test_nccl_all_reduce_perf_reads_the_out_of_place_time_of_each_size():
    level = network.read(EXAMPLES / "nccl-allreduce-across.txt").across
    curve = level.allreduce
    assert curve is not None and level.point_to_point is None
    assert (curve.operation, curve.ranks, len(curve.points)) == (ALLREDUCE, 16, 26)
    assert curve.points[0] == (8.0, pytest.approx(24.01e-6))
    # line 44: "1048576  262144  float  sum  -1  249.0  4.21  7.90  0  249.2 ...": column 6, in microseconds
    assert dict(curve.points)[1048576.0] == pytest.approx(249.0e-6)
    assert curve.source == "nccl-allreduce-across.txt: nccl-tests all_reduce_perf, 16 ranks on 4 hosts, out-of-place"


def test_nccl_across_nodes_has_its_ll_and_simple_regimes():
    segments = network.read(EXAMPLES / "nccl-allreduce-across.txt").across.allreduce.segments()
    assert [(s.first_bytes, s.last_bytes) for s in segments] == [(8, 128 * KIB), (256 * KIB, 256 * MIB)]
    ll, simple = segments
    assert ll.latency_seconds == pytest.approx(24e-6, rel=0.03)
    # generate.py's Simple: 65 us, bus 10.6 GB/s; the curve's own rate is the algorithm's, bus / (2(n-1)/n)
    assert simple.latency_seconds == pytest.approx(65e-6, rel=0.05)
    assert simple.bits_per_second * 2 * 15 / 16 == pytest.approx(8 * 10.6e9, rel=0.01)


def test_nccl_inside_a_node_has_ll_ll128_and_simple():
    segments = network.read(EXAMPLES / "nccl-allreduce-node.txt").across.allreduce.segments()
    assert [(s.first_bytes, s.last_bytes) for s in segments] == [
        (8, 64 * KIB), (128 * KIB, 4 * MIB), (8 * MIB, 256 * MIB)]
    assert segments[-1].bits_per_second * 2 * 3 / 4 == pytest.approx(8 * 180e9, rel=0.02)


def nccl_text(rows: list[tuple[int, float]], test: str | None = "all_reduce_perf", ranks: int = 4,
              factor: float | None = None, comments: tuple[str, ...] = ()) -> str:
    """nccl-tests' layout for (size, out-of-place us) rows; busbw = algbw * factor (the test's, by default)."""
    factor = factor if factor is not None else (1.0 if test == "sendrecv_perf" else 2 * (ranks - 1) / ranks)
    lines = [f"# nccl-tests: {test}"] if test else []
    lines += [*comments, "# nThread 1 nGpus 1 minBytes 8 maxBytes 1048576 step: 2(factor) warmup iters: 5 iters: 20"]
    lines += [f"#  Rank {r:2d} Group  0 Pid  {100 + r} on  host-{r // 2} device  {r % 2} [0x07] NVIDIA H100"
              for r in range(ranks)]
    lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw  "
              " busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s) "
              " (GB/s)"]
    for size, microseconds in rows:
        algbw = size / (1e3 * microseconds)
        half = f"{microseconds:7.2f}  {algbw:6.2f}  {algbw * factor:6.2f}      0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {half}  {half}")
    lines += ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0", "#"]
    return "\n".join(lines) + "\n"


SENDRECV = [(8, 5.0), (1024, 5.2), (65536, 10.0), (1048576, 90.0)]


def test_nccl_sendrecv_perf_is_a_point_to_point_curve(tmp_path):
    path = tmp_path / "sendrecv.txt"
    path.write_text(nccl_text(SENDRECV, "sendrecv_perf", ranks=8))
    level = network.read(path).across
    assert level.allreduce is None
    curve = level.point_to_point
    assert (curve.operation, curve.ranks) == (POINT_TO_POINT, 2)
    assert curve.points == ((8.0, pytest.approx(5e-6)), (1024.0, pytest.approx(5.2e-6)),
                            (65536.0, pytest.approx(10e-6)), (1048576.0, pytest.approx(90e-6)))
    assert "sendrecv_perf, 8 ranks on 4 hosts" in curve.source


def test_an_unnamed_nccl_test_is_taken_as_all_reduce_perf_and_says_so(tmp_path):
    path = tmp_path / "results.log"  # the extension is no guide
    path.write_text(nccl_text(SENDRECV, test=None))
    curve = network.read(path).across.allreduce
    assert curve.ranks == 4 and "no line names the test: taken as all_reduce_perf" in curve.source


def test_a_description_s_tool_names_an_unnamed_nccl_test(tmp_path):
    (tmp_path / "results.log").write_text(nccl_text(SENDRECV, test=None, factor=1.0))
    (tmp_path / "net.yaml").write_text("acrossNodes: {file: results.log, tool: sendrecv_perf}\n")
    level = network.read(tmp_path / "net.yaml").across
    assert level.point_to_point is not None and level.allreduce is None


def test_nccl_tests_own_first_line_names_the_test_too(tmp_path):
    text = nccl_text(SENDRECV, test=None, factor=1.0).replace("# nThread", "# Collective test starting: "
                                                              "sendrecv_perf\n# nThread", 1)
    (tmp_path / "out.txt").write_text(text)
    assert network.read(tmp_path / "out.txt").across.point_to_point is not None


def test_runs_appended_give_each_size_its_median(tmp_path):
    first = nccl_text(SENDRECV)
    second = nccl_text([(8, 6.0), (1024, 5.4), (65536, 11.0), (1048576, 96.0)], test=None)
    third = nccl_text([(8, 9.0), (1024, 5.3), (65536, 10.5), (1048576, 93.0)], test=None)
    (tmp_path / "three.txt").write_text(first + second + third)
    points = dict(network.read(tmp_path / "three.txt").across.allreduce.points)
    assert points == {8.0: pytest.approx(6e-6), 1024.0: pytest.approx(5.3e-6), 65536.0: pytest.approx(10.5e-6),
                      1048576.0: pytest.approx(93e-6)}


def test_nccl_debug_lines_between_the_results_are_skipped(tmp_path):
    text = nccl_text(SENDRECV).replace("        1024", "host-0:100:100 [0] NCCL INFO Channel 00 : 0[0] -> 1[1]\n"
                                                      "        1024", 1)
    (tmp_path / "debug.txt").write_text(text)
    assert len(network.read(tmp_path / "debug.txt").across.allreduce.points) == 4


def test_an_older_nccl_tests_layout_without_root_and_with_error_columns_reads(tmp_path):
    lines = ["# nccl-tests: all_reduce_perf", "#  Rank  0 Group  0 Pid  1 on a device  0 [0x07] V100",
             "#  Rank  1 Group  0 Pid  2 on b device  0 [0x07] V100",
             "#       size         count    type   redop     time   algbw   busbw  error     time   algbw   busbw  "
             "error",
             "#        (B)    (elements)                     (us)  (GB/s)  (GB/s)            (us)  (GB/s)  (GB/s)",
             "           8             2   float     sum    10.00    0.00    0.00  0e+00    10.00    0.00    0.00  "
             "0e+00",
             "     1048576        262144   float     sum   200.00    5.24    5.24  0e+00   200.00    5.24    5.24  "
             "0e+00",
             "# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 2.6"]
    (tmp_path / "old.txt").write_text("\n".join(lines) + "\n")
    curve = network.read(tmp_path / "old.txt").across.allreduce
    assert curve.ranks == 2 and curve.points == ((8.0, pytest.approx(10e-6)), (1048576.0, pytest.approx(200e-6)))


# ---------------------------------------------------------------------------------------------
# OSU micro-benchmarks


def test_osu_latency_is_one_way_and_skips_size_zero():
    curve = network.read(EXAMPLES / "osu_latency.txt").across.point_to_point
    assert curve.points[0] == (1.0, pytest.approx(1.25e-6))  # line 6; line 5's size 0 is skipped
    assert dict(curve.points)[16384.0] == pytest.approx(5.53e-6)  # line 20: the rendezvous step
    assert curve.source == "osu_latency.txt: OSU MPI Latency Test v7.3 (osu_latency), one way"


def test_osu_bw_is_bytes_over_its_bandwidth_in_megabytes_per_second():
    curve = network.read(EXAMPLES / "osu_bw.txt").across.point_to_point
    assert dict(curve.points)[1048576.0] == pytest.approx(1048576 / 11897.17e6)  # line 25: 11897.17 MB/s
    assert "no latency measured" in curve.source


def test_osu_bw_and_osu_latency_of_one_level_make_one_message_latency_plus_streamed_bytes():
    level = network.read(EXAMPLES / "network-osu.yaml").across
    assert dict(level.point_to_point.points)[8192.0] == pytest.approx(1.25e-6 + 8192 / 6744.40e6)
    assert "latency 1.25 us from osu_latency.txt" in level.point_to_point.source


def test_osu_allreduce_takes_its_ranks_from_the_description():
    curve = network.read(EXAMPLES / "network-osu.yaml").across.allreduce
    assert (curve.operation, curve.ranks) == (ALLREDUCE, 16)
    assert dict(curve.points)[1048576.0] == pytest.approx(203.86e-6)  # line 24
    assert len(curve.segments()) == 2  # recursive doubling to 8 KiB, then reduce-scatter and allgather


# ---------------------------------------------------------------------------------------------
# ringleader's own link probe


def probe_summary(shared_host: bool = False) -> dict:
    return {"iterations": 30, keys.LINK_PROBE: {
        keys.PROBE_SHARED_HOST: shared_host,
        keys.PROBE_POINT_TO_POINT: {keys.PROBE_RANKS: [0, 1], keys.PROBE_SUSTAINED_SECONDS: 0.2,
                                    keys.PROBE_SAMPLES: [[1024.0, 2e-5], [65536.0, 6e-5], [1048576.0, 9e-4],
                                                         [65536.0, 8e-5], [65536.0, 7e-5]]},
        keys.PROBE_COLLECTIVE: {keys.WORKERS: 4, keys.PROBE_SUSTAINED_SECONDS: 0.3,
                                keys.PROBE_SAMPLES: [[1024.0, 5e-5], [65536.0, 1.5e-4], [1048576.0, 2e-3]]}}}


def test_a_trials_summary_gives_the_probes_two_curves_medians_per_size(tmp_path):
    (tmp_path / "summary.json").write_text(json.dumps(probe_summary()))
    level = network.read(tmp_path / "summary.json").across
    assert level.point_to_point.points == ((1024.0, 2e-5), (65536.0, 7e-5), (1048576.0, 9e-4))
    assert (level.allreduce.ranks, level.allreduce.points[-1]) == (4, (1048576.0, 2e-3))
    assert "ringleader's link probe, one way" in level.point_to_point.source


def test_a_trial_directory_is_read_through_its_summary(tmp_path):
    trial = tmp_path / "trial-0"
    trial.mkdir()
    (trial / "summary.json").write_text(json.dumps(probe_summary(shared_host=True)))
    found = network.read(trial)
    assert found.across.allreduce.ranks == 4
    assert "trial-0/summary.json" in found.across.said() and "loopback" in found.across.allreduce.source


# ---------------------------------------------------------------------------------------------
# Given by numbers


def test_a_level_given_by_latency_and_bandwidth_is_one_regime():
    found = network.read(EXAMPLES / "network-given.yaml")
    across = found.across
    assert len(across.point_to_point.segments()) == 1
    assert_nic(across.nic(1e6), 100e9, 5e-6)
    assert across.message_seconds(1e6) == pytest.approx(5e-6 + 8e6 / 100e9)
    assert_nic(found.inside.nic(10.0), 1200e9, 2e-6)


# ---------------------------------------------------------------------------------------------
# Either curve prices both operations


def test_from_an_allreduce_curve_one_message_is_one_of_the_rings_2_n_minus_1_steps():
    level = network.read(EXAMPLES / "nccl-allreduce-across.txt").across
    measured = level.allreduce
    assert level.message_seconds(65536) == pytest.approx(measured.seconds(16 * 65536) / 30)


def test_an_allreduce_among_the_ranks_measured_is_the_measured_curve():
    level = network.read(EXAMPLES / "nccl-allreduce-across.txt").across
    assert level.allreduce_seconds(1048576, 16) == pytest.approx(249.0e-6)


def test_an_allreduce_among_other_ranks_reads_the_curve_at_the_chunk_that_crosses():
    level = network.read(EXAMPLES / "nccl-allreduce-across.txt").across
    measured = level.allreduce
    # 32 ranks: chunks of S/32, read where the 16-rank curve's chunk was that size, 31 steps of 15's
    assert level.allreduce_seconds(64 * MIB, 32) == pytest.approx(measured.seconds(32 * MIB) * 31 / 15)
    assert level.allreduce_seconds(64 * MIB, 8) == pytest.approx(measured.seconds(128 * MIB) * 7 / 15)
    assert level.allreduce_seconds(64 * MIB, 1) == 0.0


def test_from_a_point_to_point_curve_an_allreduce_is_2_n_minus_1_messages_of_s_over_n():
    level = Level(network.ACROSS_NODES, line_curve(5e-6, 100e9, POWERS), None)
    assert level.allreduce_seconds(64 * MIB, 16) == pytest.approx(30 * (5e-6 + 8 * 4 * MIB / 100e9))
    assert level.allreduce_seconds(64 * MIB, 16) == pytest.approx(
        cost_models.ring_comm_seconds(16, 64 * MIB, cost_models.Nic(100e9, 5e-6)))


def test_each_operation_is_priced_from_its_own_curve_where_the_level_has_both():
    level = network.read(EXAMPLES / "network-osu.yaml").across
    assert level.message_seconds(8192) == pytest.approx(level.point_to_point.seconds(8192))
    assert level.allreduce_seconds(8192, 16) == pytest.approx(level.allreduce.seconds(8192))
    assert level.nic(8192) == level.nic(8192, POINT_TO_POINT) != level.nic(8192, ALLREDUCE)


# ---------------------------------------------------------------------------------------------
# The measured curve, piecewise


def test_seconds_follow_the_medians_between_sizes_the_smallest_below_and_the_last_rate_beyond():
    curve = line_curve(10e-6, 10e9, [1024, 2048, 4096])
    (s1, t1), (s2, t2) = curve.points[:2]
    assert curve.seconds(1536) == pytest.approx((t1 + t2) / 2)
    assert curve.seconds(1) == curve.seconds(0) == t1
    assert curve.seconds(8192) == pytest.approx(curve.points[-1][1] + 8 * 4096 / 10e9)


def stepped() -> Curve:
    """Eager to 64 KiB (10 us, 10 Gbit/s), then rendezvous (50 us, 40 Gbit/s): the time steps up at 128 KiB."""
    eager = [(s, 10e-6 + 8 * s / 10e9) for s in POWERS if s <= 64 * KIB]
    rendezvous = [(s, 50e-6 + 8 * s / 40e9) for s in POWERS if s > 64 * KIB]
    return Curve(POINT_TO_POINT, 2, tuple(eager + rendezvous), "a stepped curve")


def test_a_curve_that_steps_is_two_regimes_each_with_its_own_latency_and_rate():
    eager, rendezvous = stepped().segments()
    assert (eager.first_bytes, eager.last_bytes, rendezvous.first_bytes) == (8, 64 * KIB, 128 * KIB)
    assert eager.latency_seconds == pytest.approx(10e-6) and eager.bits_per_second == pytest.approx(10e9)
    assert rendezvous.latency_seconds == pytest.approx(50e-6) and rendezvous.bits_per_second == pytest.approx(40e9)


def test_one_straight_line_is_one_regime_even_with_a_few_per_cent_of_noise():
    noisy = Curve(POINT_TO_POINT, 2, tuple((s, (3e-6 + 8 * s / 25e9) * (1 + 0.03 * math.sin(i)))
                                           for i, s in enumerate(POWERS)), "noisy")
    (only,) = noisy.segments()
    assert only.bits_per_second == pytest.approx(25e9, rel=0.05)


def test_a_last_size_alone_after_a_step_keeps_the_rate_before_it():
    points = [(s, 10e-6 + 8 * s / 10e9) for s in POWERS[:10]] + [(POWERS[10], 100e-6)]
    *_, last = Curve(POINT_TO_POINT, 2, tuple(points), "a step at the end").segments()
    assert (last.first_bytes, last.last_bytes, last.bits_per_second) == (POWERS[10], POWERS[10], pytest.approx(10e9))
    assert last.seconds(POWERS[10]) == pytest.approx(100e-6)


def test_a_curve_whose_largest_sizes_do_not_grow_has_no_rate_to_read():
    with pytest.raises(ValueError, match="does not grow"):
        Curve(POINT_TO_POINT, 2, ((8.0, 5e-6), (16.0, 5e-6), (32.0, 5e-6)), "flat")


def test_nic_gives_the_regime_the_message_falls_in():
    level = Level(network.ACROSS_NODES, stepped(), None)
    assert_nic(level.nic(4 * KIB), 10e9, 10e-6)
    assert_nic(level.nic(1 * MIB), 40e9, 50e-6)
    assert level.nic(1) == level.nic(4 * KIB)  # below the smallest: the first regime
    assert level.nic(1e12) == level.nic(1 * MIB)  # beyond the largest: the last
    assert level.nic(100 * KIB) == level.nic(1 * MIB)  # between 64 and 128 KiB: the nearer, on a log scale
    assert (level.latency_seconds, level.sustained_bits_per_second) == (pytest.approx(10e-6), pytest.approx(40e9))


def test_nic_of_an_allreduce_curve_is_one_ring_step_at_the_bus_rate():
    level = network.read(EXAMPLES / "nccl-allreduce-across.txt").across
    simple = level.allreduce.segments()[-1]
    nic = level.nic(1 * MIB)
    assert nic.bandwidth_bits_per_second == pytest.approx(simple.bits_per_second * 2 * 15 / 16)
    assert nic.latency_seconds == pytest.approx(simple.latency_seconds / 30)
    # the ring model on that link, among the ranks measured, is the measured regime
    assert cost_models.ring_comm_seconds(16, 64 * MIB, level.nic(4 * MIB)) == pytest.approx(
        simple.seconds(64 * MIB))


def test_a_regime_fitted_with_a_negative_latency_gives_a_nic_of_latency_zero():
    ramp = Curve(POINT_TO_POINT, 2, ((1e6, 1e-4), (2e6, 2.5e-4), (4e6, 5.5e-4)), "a rate ramping up")
    assert ramp.segments()[0].latency_seconds < 0
    assert Level(network.ACROSS_NODES, ramp, None).nic(2e6).latency_seconds == 0.0


# ---------------------------------------------------------------------------------------------
# Levels and what they say


def test_a_description_of_two_levels_gives_both():
    found = network.read(EXAMPLES / "network.yaml")
    assert found.across.name == "across nodes" and found.inside.name == "inside a node"
    assert found.across.allreduce.ranks == 16 and found.inside.allreduce.ranks == 4
    assert found.across.line_rate_bits_per_second == 100e9 and found.inside.line_rate_bits_per_second is None
    assert found.inside_or_across is found.inside


def test_one_level_prices_the_ranks_of_a_node_as_across_nodes_and_says_so():
    found = network.read(EXAMPLES / "network-osu.yaml")
    assert found.inside is None and found.inside_or_across is found.across
    assert found.said().splitlines()[-1] == "  inside a node: not given; priced as across nodes"


def test_a_tool_output_named_directly_is_one_level_across_nodes():
    found = network.read(EXAMPLES / "nccl-allreduce-node.txt")
    assert (found.across.name, found.inside, found.source) == ("across nodes", None,
                                                              str(EXAMPLES / "nccl-allreduce-node.txt"))


def test_a_level_says_its_latency_sustained_rate_share_of_the_line_regimes_and_source():
    said = network.read(EXAMPLES / "network.yaml").across.said()
    assert said == ("across nodes: latency 0.801 us, sustained 84.92 Gbit/s (85 % of its 100 Gbit/s line), 2 regimes; "
                    "from nccl-allreduce-across.txt: nccl-tests all_reduce_perf, 16 ranks on 4 hosts, out-of-place")


def test_a_network_says_its_file_then_a_line_per_level():
    lines = network.read(EXAMPLES / "network.yaml").said().splitlines()
    assert len(lines) == 3 and lines[0] == f"network {EXAMPLES / 'network.yaml'}:"
    assert lines[2].startswith("  inside a node: latency") and "3 regimes" in lines[2]


def test_a_network_is_plain_data():
    found = network.read(EXAMPLES / "network-given.yaml")
    assert found == network.read(EXAMPLES / "network-given.yaml") and isinstance(found, MeasuredNetwork)


# ---------------------------------------------------------------------------------------------
# The example files


def test_the_example_files_are_what_generate_py_writes_and_say_they_are_synthetic():
    spec = importlib.util.spec_from_file_location("generate", EXAMPLES / "generate.py")
    generate = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(generate)
    for name, text in generate.files().items():
        assert (EXAMPLES / name).read_text() == text, f"{name}: run python examples/planning/generate.py"
        assert text.startswith("# Synthetic, not measured")
    for description in EXAMPLES.glob("*.yaml"):
        assert "synthetic" in description.read_text().lower() or "given" in description.read_text()


@pytest.mark.parametrize("name", sorted(p.name for p in EXAMPLES.iterdir() if p.suffix in (".txt", ".yaml")
                                        and p.name != "osu_allreduce.txt"))
def test_every_example_reads(name):
    assert network.read(EXAMPLES / name).said()


def test_the_plan_page_shows_what_the_example_network_says(monkeypatch):
    monkeypatch.chdir(ROOT)
    page = (ROOT / "docs" / "plan.md").read_text()
    assert network.read("examples/planning/network.yaml").said() in page


def test_a_curve_takes_any_sequence_of_pairs_and_keeps_floats():
    curve = Curve(POINT_TO_POINT, 2, [[8, 1e-6], [16, 2e-6]], "lists")  # type: ignore[arg-type]
    assert curve.points == ((8.0, 1e-6), (16.0, 2e-6))
