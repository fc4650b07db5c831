"""Network counters: rates from samples (hand values), the files they are read from, the link rate, the sampler."""

import pathlib
import socket
import threading
import time

import pytest

from ringleader.runtime import netcounters
from ringleader.runtime.netcounters import Sample


def samples(*rows: tuple[float, int, int]) -> list[Sample]:
    return [Sample(at, rx, tx) for at, rx, tx in rows]


def test_the_rate_runs_from_the_last_sample_before_the_start_to_the_last_before_the_end():
    kept = samples((0.0, 0, 0), (0.1, 500, 1000), (0.2, 1500, 3000), (0.3, 1600, 3200), (0.4, 2000, 4000))
    # [0.15, 0.35]: from the sample at 0.1 to the one at 0.3, 0.2 s: tx 2200 bytes, rx 1100 bytes
    assert netcounters.rates(kept, 0.15, 0.35) == pytest.approx((11000.0, 5500.0))
    # starting before the first sample: from the first
    assert netcounters.rates(kept, -1.0, 0.2) == pytest.approx((15000.0, 7500.0))


def test_an_iteration_shorter_than_a_period_gets_the_rate_of_the_latest_period():
    kept = samples((0.0, 0, 0), (0.1, 100, 200), (0.2, 300, 1000))
    # [0.12, 0.18] has no sample inside: the period 0.1 .. 0.2 it lies in
    assert netcounters.rates(kept, 0.12, 0.18) == pytest.approx((8000.0, 2000.0))
    # [0.21, 0.25] began after the last sample: the last period, 0.1 .. 0.2
    assert netcounters.rates(kept, 0.21, 0.25) == pytest.approx((8000.0, 2000.0))


def test_no_rate_without_two_samples():
    assert netcounters.rates([], 0.0, 1.0) is None
    assert netcounters.rates(samples((0.0, 5, 5)), 0.0, 1.0) is None


def fake_interface(root: pathlib.Path, name: str, rx: str, tx: str, speed: str | None) -> None:
    statistics = root / name / "statistics"
    statistics.mkdir(parents=True)
    (statistics / "rx_bytes").write_text(rx + "\n")
    (statistics / "tx_bytes").write_text(tx + "\n")
    if speed is not None:
        (root / name / "speed").write_text(speed + "\n")


def test_counters_and_speed_are_read_from_sysfs_and_missing_ones_are_none(tmp_path):
    fake_interface(tmp_path, "eth0", "1234", "5678", "10000")
    fake_interface(tmp_path, "veth1", "1", "2", "-1")
    fake_interface(tmp_path, "lo", "1", "2", None)
    assert netcounters.read_counters("eth0", tmp_path) == (1234, 5678)
    assert netcounters.read_counters("eth9", tmp_path) is None
    assert netcounters.nominal_bits_per_second("eth0", tmp_path) == 10e9
    assert netcounters.nominal_bits_per_second("veth1", tmp_path) is None
    assert netcounters.nominal_bits_per_second("lo", tmp_path) is None


def test_the_link_rate_is_the_cap_times_the_ranks_sharing_it_else_the_interface_speed(tmp_path):
    fake_interface(tmp_path, "eth0", "0", "0", "1000")
    fake_interface(tmp_path, "lo", "0", "0", None)
    assert netcounters.link_bits_per_second("lo", 100e6, 3, tmp_path) == 300e6
    assert netcounters.link_bits_per_second("eth0", 100e6, 1, tmp_path) == 100e6
    assert netcounters.link_bits_per_second("eth0", None, 1, tmp_path) == 1e9
    assert netcounters.link_bits_per_second("lo", None, 3, tmp_path) is None


def test_an_unreadable_interface_gives_no_sampler_and_one_log_line(tmp_path):
    said = []
    assert netcounters.Sampler.open("eth0", tmp_path, log=said.append) is None
    assert len(said) == 1 and "cannot be read" in said[0] and "eth0" in said[0]


def test_a_pod_measures_the_interface_of_its_default_route(tmp_path):
    table = tmp_path / "route"
    table.write_text("Iface\tDestination\tGateway \tFlags\n"
                     "net1\t0010A8C0\t00000000\t0001\n"
                     "eth0\t00000000\t0100F40A\t0003\n")
    assert netcounters.pod_interface(table) == "eth0"
    table.write_text("Iface\tDestination\tGateway \tFlags\nnet1\t0010A8C0\t00000000\t0001\n")
    assert netcounters.pod_interface(table) == "eth0"  # no default route: the usual name
    assert netcounters.pod_interface(tmp_path / "absent") == "eth0"
    table.write_text("Iface\tDestination\nens5\t00000000\n")
    assert netcounters.pod_interface(table) == "ens5"


def test_the_loopback_is_labelled_shared():
    assert "shared" in netcounters.describe("lo")
    assert netcounters.describe("eth0") == "eth0"


def drain(receiver: socket.socket) -> None:
    while receiver.recv(1 << 20):
        pass


def test_the_sampler_measures_loopback_traffic_and_stops(tmp_path):
    """A real sampler on the real loopback: 4 MiB sent to ourselves show in its tx rate."""
    sampler = netcounters.Sampler.open("lo", log=pytest.fail)
    assert sampler is not None
    server = socket.create_server(("127.0.0.1", 0))
    sender = socket.create_connection(server.getsockname(), timeout=5)
    receiver, _ = server.accept()
    receiver.settimeout(5)
    drained = threading.Thread(target=drain, args=(receiver,), daemon=True)
    drained.start()
    try:
        sampler.start()
        start = time.perf_counter()
        time.sleep(0.15)
        sender.sendall(b"x" * (4 << 20))
        time.sleep(0.3)
        end = time.perf_counter()
        tx, rx = sampler.rates(start, end)
    finally:
        sampler.stop()
        sender.close()
        drained.join(5)  # the receiver reads to the end of the stream
        receiver.close()
        server.close()
    assert not sampler._thread.is_alive()
    # 4 MiB over at most the window the samples span (end - start plus one period on either side)
    assert tx >= (4 << 20) / (end - start + 2 * netcounters.SAMPLE_SECONDS)
    assert rx == pytest.approx(tx, rel=0.05)  # the loopback receives what it sends (rx and tx are two reads)
