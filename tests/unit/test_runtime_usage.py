"""What a rank's process used, from the kernel's counters: CPU time over wall time, peak memory, the CPUs it may use."""

from __future__ import annotations

import importlib.metadata
import os
import platform

import pytest

from ringleader.contract import keys
from ringleader.runtime import usage


def test_a_busy_process_measures_its_own_cpu_time_and_memory():
    meter = usage.Meter()
    held = bytearray(64 << 20)  # 64 MiB touched: resident, so the peak is at least that
    for index in range(0, len(held), 4096):
        held[index] = 1
    sum(i * i for i in range(2_000_000))  # CPU time of this thread

    used = meter.measure(threads=3)

    assert used[keys.CPU_SECONDS] > 0 and used[keys.WALL_SECONDS] > 0
    assert used[keys.CPU_UTILIZATION] == used[keys.CPU_SECONDS] / used[keys.WALL_SECONDS]
    assert used[keys.PEAK_RSS_BYTES] >= len(held)
    assert used[keys.THREADS] == 3 and used[keys.HOST] == os.uname().nodename
    assert used[keys.CPUS] == usage.cpus()
    assert used[keys.LOAD_PER_CPU] == pytest.approx(os.getloadavg()[0] / os.cpu_count(), abs=0.5)  # the machine's
    # The versions it ran with: an operator's sweep run names those of its pods by them.
    assert used[keys.PYTHON] == platform.python_version()
    assert (used[keys.RINGLEADER], used[keys.TORCH]) == tuple(map(importlib.metadata.version, ("ringleader", "torch")))


@pytest.mark.parametrize("text, expected", [("max 100000\n", None), ("150000 100000\n", 1.5), ("garbage", None)])
def test_a_cgroup_quota_caps_the_cpus_and_no_quota_leaves_the_affinity(tmp_path, text, expected):
    cpu_max = tmp_path / "cpu.max"
    cpu_max.write_text(text)
    affinity = float(len(os.sched_getaffinity(0)))
    assert usage.cpus(cpu_max) == (min(affinity, expected) if expected else affinity)
    assert usage.cpus(tmp_path / "absent", tmp_path / "absent") == affinity


@pytest.mark.parametrize("quota, expected", [("-1", None), ("25000", 0.25)])
def test_a_cgroup_v1_quota_caps_the_cpus_where_there_is_no_cgroup_v2(tmp_path, quota, expected):
    (tmp_path / "cpu.cfs_quota_us").write_text(quota + "\n")
    (tmp_path / "cpu.cfs_period_us").write_text("100000\n")
    affinity = float(len(os.sched_getaffinity(0)))
    assert usage.cpus(tmp_path / "absent", tmp_path) == (expected or affinity)


def test_the_meter_restarts_at_the_first_record_after_warm_up_so_start_up_is_not_counted(tmp_path):
    from ringleader.contract import records

    recorder = records.RankRecorder(tmp_path, "t", 0, warmup_iterations=2)
    meter = usage.Meter()
    made = meter.since
    recorder.on_first_measured = meter.restart
    recorder.log_iteration(0, {keys.TIME_ITERATION: 0.5})
    recorder.log_iteration(1, {keys.TIME_ITERATION: 0.5})
    assert meter.since is made  # warm-up: still measuring from the start
    recorder.log_iteration(2, {keys.TIME_ITERATION: 0.01})
    restarted = meter.since
    assert restarted is not made and restarted.wall_seconds >= made.wall_seconds
    recorder.log_iteration(3, {keys.TIME_ITERATION: 0.01})
    recorder.close()
    assert meter.since is restarted  # once


V1_STAT = "nr_periods 40\nnr_throttled 12\nthrottled_time {ns}\nnr_bursts 0\nburst_time 0\n"
V2_STAT = ("usage_usec 900000\nuser_usec 800000\nsystem_usec 100000\n"
           "nr_periods 40\nnr_throttled 12\nthrottled_usec {us}\n")


def test_the_cgroups_throttled_time_is_read_from_cgroup_v2_or_v1_whichever_is_there(tmp_path):
    v2, v1 = tmp_path / "v2.stat", tmp_path / "v1.stat"
    v1.write_text(V1_STAT.format(ns=250_000_000))
    candidates = [(v2, "throttled_usec", 1e-6), (v1, "throttled_time", 1e-9)]
    found = usage.Throttling.find(candidates)
    assert found is not None and found.path == v1 and found.seconds() == pytest.approx(0.25)
    v2.write_text(V2_STAT.format(us=1_500_000))
    assert usage.Throttling.find(candidates).seconds() == pytest.approx(1.5)  # v2 first, where it is


def test_without_a_readable_cpu_stat_nothing_is_recorded_and_nothing_fails(tmp_path):
    (tmp_path / "cpu.stat").write_text("usage_usec 5\n")  # cgroup v2 without the cpu controller: no throttled field
    assert usage.Throttling.find([(tmp_path / "cpu.stat", "throttled_usec", 1e-6),
                                  (tmp_path / "absent", "throttled_time", 1e-9)]) is None
    metrics: dict[str, float] = {}
    usage.Counters(None).throttled_since_last(metrics)
    assert keys.CPU_THROTTLED not in metrics


def test_each_iteration_records_the_throttled_time_since_the_last(tmp_path):
    stat = tmp_path / "cpu.stat"
    stat.write_text(V1_STAT.format(ns=1_000_000_000))
    counters = usage.Counters(usage.Throttling(stat, "throttled_time", 1e-9))
    stat.write_text(V1_STAT.format(ns=1_030_000_000))  # throttled 30 ms during the first iteration
    first: dict[str, float] = {}
    counters.throttled_since_last(first)
    second: dict[str, float] = {}
    counters.throttled_since_last(second)  # not throttled since
    assert first[keys.CPU_THROTTLED] == pytest.approx(0.030) and second[keys.CPU_THROTTLED] == 0.0


def test_the_cpu_time_spent_communicating_counts_every_thread_of_the_process():
    import threading

    def spin() -> None:
        sum(i * i for i in range(1_500_000))

    metrics: dict[str, float] = {}
    with usage.Counters(None).communicating(metrics):
        helper = threading.Thread(target=spin)  # as gloo's threads do the transfer while the caller waits
        helper.start()
        helper.join()
    idle: dict[str, float] = {}
    with usage.Counters(None).communicating(idle):
        pass
    assert metrics[keys.CPU_COMM] > 10 * idle[keys.CPU_COMM]
