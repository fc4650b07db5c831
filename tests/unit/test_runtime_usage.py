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
    assert usage.cpus(tmp_path / "absent") == affinity


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
