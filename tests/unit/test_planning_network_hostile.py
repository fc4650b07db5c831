"""Network files that are truncated, of the wrong tool, without units, out of order, NaN, negative or enormous: each is
refused by `network.read` with one NetworkError line naming the file, the line to blame (where one is) and the fix;
nothing else escapes, whatever the bytes (docs/plan.md, "The network", what is refused)."""

from __future__ import annotations

import dataclasses
import json
import os
import pathlib
import random
import shutil

import pytest

from ringleader.contract import keys
from ringleader.planning import network

EXAMPLES = pathlib.Path(__file__).resolve().parents[2] / "examples" / "planning"
ACROSS = (EXAMPLES / "nccl-allreduce-across.txt").read_text()
LATENCY = (EXAMPLES / "osu_latency.txt").read_text()
BANDWIDTH = (EXAMPLES / "osu_bw.txt").read_text()
ALLREDUCE = (EXAMPLES / "osu_allreduce.txt").read_text()
DIRECTORY, FIFO = "<a directory>", "<a FIFO>"


def line_of(text: str, needle: str) -> int:
    """The line (from 1) `needle` first appears on."""
    return text[:text.index(needle)].count("\n") + 1


def replaced(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


def nccl(rows: list[tuple[int, float]], test: str | None = "all_reduce_perf", ranks: int = 4,
         factor: float | None = None) -> str:
    """nccl-tests' layout for (size, microseconds) rows, algbw and busbw consistent with them."""
    factor = 2 * (ranks - 1) / ranks if factor is None else factor
    lines = [f"# nccl-tests: {test}"] if test else []
    lines += [f"#  Rank {r:2d} Group  0 Pid  {100 + r} on  host-{r // 2} device  {r % 2} [0x07] H100" for r in
              range(ranks)]
    lines += ["#       size         count      type   redop    root     time   algbw   busbw #wrong     time   algbw  "
              " busbw #wrong",
              "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)            (us)  (GB/s) "
              " (GB/s)"]
    for size, microseconds in rows:
        algbw = size / (1e3 * microseconds) if microseconds else 0.0
        half = f"{microseconds:7.2f}  {algbw:6.2f}  {algbw * factor:6.2f}      0"
        lines.append(f"{size:12d}  {size // 4:12d}     float     sum      -1  {half}  {half}")
    return "\n".join(lines + ["# Out of bounds values : 0 OK", "# Avg bus bandwidth    : 1.0"]) + "\n"


ROWS = [(8, 10.0), (1024, 12.0), (65536, 40.0), (1048576, 300.0)]


def summary(**probe) -> str:
    series = {keys.PROBE_SAMPLES: [[1024.0, 2e-5], [1048576.0, 9e-4]]}
    return json.dumps({keys.LINK_PROBE: {keys.PROBE_SHARED_HOST: False, keys.PROBE_POINT_TO_POINT: series, **probe}})


@dataclasses.dataclass(frozen=True)
class Case:
    files: dict[str, str | bytes]
    """files: written into the test's directory (DIRECTORY, FIFO: made so)."""
    fragment: str
    """fragment: what the refusal says."""
    line: int | None = None
    """line: the line it blames, None where no one line is to blame."""
    entry: str | None = None
    """entry: the file read (default: the first); blamed: the file the refusal names (default: entry)."""
    blamed: str | None = None


DESCRIBED = "acrossNodes:\n  file: a.txt\n"
TWO_TESTS = LATENCY + BANDWIDTH
CASES = {
    # Any file
    "missing": Case({}, "no such file", entry="nowhere.txt"),
    "empty": Case({"a.txt": ""}, "is empty"),
    "blank": Case({"a.txt": "  \n\t\n"}, "is empty"),
    "binary": Case({"a.bin": b"\x7fELF\x02\x01\x01\x00\x00\x00" + bytes(range(256))}, "is binary"),
    "not-utf-8": Case({"a.txt": b"# OSU MPI Latency Test v7.3\n# Size  Latency (us)\n1  1.2\xff\n"}, "not UTF-8", 3),
    "utf-16": Case({"a.yaml": "acrossNodes: {file: a.txt}\n".encode("utf-16")}, "is UTF-16 text"),
    "enormous": Case({"a.txt": "#" * (4 * 2**20 + 1)}, "larger than 4 MiB"),
    "a-directory-without-a-summary": Case({"trial": DIRECTORY}, "is a directory without summary.json"),
    "a-fifo": Case({"a.txt": FIFO}, "is not a regular file"),
    "comments-only": Case({"a.txt": "# measured on Tuesday\n# nothing else\n"}, "nothing but comments"),
    "a-csv": Case({"a.csv": "size,seconds\n8,1e-6\n16,2e-6\n"}, "not a format ringleader reads"),
    # nccl-tests
    "nccl-truncated": Case({"a.txt": ACROSS[:ACROSS.index("  8388608")]}, "ends before its run's footer",
                           line_of(ACROSS, "  4194304")),
    "nccl-cut-mid-line": Case({"a.txt": ACROSS[:ACROSS.index("  4194304") + 40]}, "where the header has 13",
                              line_of(ACROSS, "  4194304")),
    "nccl-times-in-ms": Case({"a.txt": replaced(ACROSS, "(us)", "(ms)")}, "time column is in (ms)",
                             line_of(ACROSS, "#        (B)")),
    "nccl-units-missing": Case({"a.txt": replaced(ACROSS, ACROSS.splitlines()[25] + "\n", "")},
                               "not followed by its units line", 26),
    "nccl-sizes-out-of-order": Case({"a.txt": replaced(ACROSS, "     1048576        262144",
                                                       "      524288        262144")},
                                    "not larger than the line above's 524288", line_of(ACROSS, "     1048576")),
    "nccl-nan-time": Case({"a.txt": replaced(ACROSS, "249.0", "  nan")}, "time 'nan' is not a number",
                          line_of(ACROSS, "249.0")),
    "nccl-infinite-time": Case({"a.txt": replaced(ACROSS, "249.0", "  inf")}, "'inf' is not a number",
                               line_of(ACROSS, "249.0")),
    "nccl-huge-exponent": Case({"a.txt": replaced(ACROSS, "249.0", "1e999")}, "is not finite",
                               line_of(ACROSS, "249.0")),
    "nccl-negative-time": Case({"a.txt": replaced(ACROSS, " 249.0", "-249.0")}, "is not positive",
                               line_of(ACROSS, "249.0")),
    "nccl-zero-time": Case({"a.txt": nccl([(8, 10.0), (1024, 0.0), (65536, 40.0)])}, "is not positive", 9),
    "nccl-time-falls-by-half": Case({"a.txt": nccl([(8, 10.0), (1024, 12.0), (65536, 40.0), (1048576, 15.0)])},
                                    "less than half the 40 us of size 65536 (line 10)", 11),
    "nccl-columns-mislabelled": Case({"a.txt": replaced(ACROSS, "249.0    4.21", "249.0    9.21")},
                                     "algbw 9.21 GB/s, but size over time is 4.211", line_of(ACROSS, "249.0")),
    "nccl-wrong-values": Case({"a.txt": replaced(ACROSS, "7.90      0", "7.90      3")}, "#wrong is 3",
                              line_of(ACROSS, "249.0")),
    "nccl-out-of-bounds": Case({"a.txt": replaced(ACROSS, "values : 0 OK", "values : 2 FAILED")},
                               "reports 2 out of bounds values", line_of(ACROSS, "# Out of bounds")),
    "nccl-all-gather": Case({"a.txt": replaced(ACROSS, "nccl-tests: all_reduce_perf", "nccl-tests: all_gather_perf")},
                            "all_gather_perf is not supported yet", 3),
    "nccl-two-tests-named": Case({"a.txt": nccl(ROWS).replace("# Out of", "# nccl-tests: sendrecv_perf\n# Out of")},
                                 "but line 1 named all_reduce_perf", 12),
    "nccl-another-tests-bus-factor": Case({"a.txt": nccl(ROWS, test=None, factor=0.75)},
                                          "(n-1)/n, as all_gather_perf", 10),
    "nccl-sendrecv-unnamed": Case({"a.txt": nccl(ROWS, test=None, factor=1.0)}, "name the test with a "
                                  "'# nccl-tests: sendrecv_perf' line", 10),
    "nccl-one-size": Case({"a.txt": nccl([(1048576, 300.0)])}, "1 message size measured", 8),
    "nccl-two-datatypes": Case({"a.txt": replaced(ACROSS, "1048576        262144     float",
                                                  "1048576        262144      half")},
                               "type, redop and root are half sum -1", line_of(ACROSS, "249.0")),
    "nccl-no-rank-lines": Case({"a.txt": "\n".join(l for l in nccl(ROWS).splitlines() if "Rank" not in l) + "\n"},
                               "no '# Rank ... on HOST device ...' lines"),
    "nccl-one-rank": Case({"a.txt": nccl(ROWS, ranks=1)}, "of one rank"),
    "nccl-headerless": Case({"a.txt": "# nccl-tests: all_reduce_perf\n" + "\n".join(ACROSS.splitlines()[25:])},
                            "a data line before nccl-tests' column header", 3),
    "nccl-size-beyond-a-pebibyte": Case({"a.txt": replaced(ACROSS, "         8             2",
                                                           "9999999999999999999             2")},
                                        "beyond 1 PiB", line_of(ACROSS, "         8             2")),
    "nccl-size-a-fraction": Case({"a.txt": replaced(ACROSS, "         8             2", "       8.5             2")},
                                 "is not a whole number of bytes", line_of(ACROSS, "         8             2")),
    "nccl-too-many-sizes": Case({"a.txt": nccl([(8 * i, 10.0 + i) for i in range(1, 1200)])},
                                "1199 message sizes, more than 1000"),
    # OSU micro-benchmarks
    "osu-allreduce-without-ranks": Case({"a.txt": ALLREDUCE}, "does not print how many ranks ran", 4),
    "osu-bibw": Case({"a.txt": replaced(BANDWIDTH, "MPI Bandwidth", "MPI Bi-Directional Bandwidth")},
                     "Bi-Directional Bandwidth Test is not supported yet", 3),
    "osu-alltoall": Case({"a.txt": replaced(ALLREDUCE, "Allreduce", "Alltoall")}, "not supported yet", 4),
    "osu-bandwidth-in-gigabytes": Case({"a.txt": replaced(BANDWIDTH, "(MB/s)", "(GB/s)")},
                                       "value column is in GB/s, not osu_bw's (MB/s)", 4),
    "osu-latency-without-its-unit": Case({"a.txt": replaced(LATENCY, "Latency (us)", "Latency")},
                                         "without its unit", 4),
    "osu-header-missing": Case({"a.txt": replaced(LATENCY, "# Size          Latency (us)\n", "")},
                               "before OSU's column header", 4),
    "osu-units-in-a-value": Case({"a.txt": replaced(LATENCY, "1.25\n", "1.25us\n")}, "'1.25us' is not a number", 6),
    "osu-truncated": Case({"a.txt": LATENCY.rstrip("\n")[:-3]}, "has no line end", LATENCY.count("\n")),
    "osu-a-column-more": Case({"a.txt": replaced(LATENCY, "1.25\n", "1.25     1000\n")},
                              "3 columns where the lines above have 2", 6),
    "osu-one-size": Case({"a.txt": "# OSU MPI Latency Test v7.3\n# Size  Latency (us)\n0  1.1\n1  1.2\n"},
                         "1 message size measured", 4),
    "osu-negative-size": Case({"a.txt": replaced(LATENCY, "\n4     ", "\n-4    ")}, "size -4 is negative", 8),
    "osu-sizes-repeat": Case({"a.txt": replaced(LATENCY, "\n4     ", "\n2     ")}, "not larger than the line above's 2",
                             8),
    "osu-two-tests": Case({"a.txt": TWO_TESTS}, "a second test (osu_bw) after line 3's osu_latency",
                          line_of(TWO_TESTS, "# OSU MPI Bandwidth")),
    # ringleader's link probe
    "json-of-another-kind": Case({"summary.json": '{"iterations": 3}'}, "without `linkProbe`"),
    "json-broken": Case({"summary.json": '{\n "linkProbe": {\n'}, "not valid JSON", 3),
    "json-nested-forever": Case({"summary.json": "[" * 200_000}, "not a JSON document ringleader reads"),
    "json-nan": Case({"summary.json": summary().replace("0.0009", "NaN")}, "NaN is not a number"),
    "probe-not-an-object": Case({"summary.json": json.dumps({keys.LINK_PROBE: None})}, "not an object", 1),
    "probe-samples-not-pairs": Case({"summary.json": summary().replace("[1024.0, 2e-05]", "[1024.0, 2e-05, 3]")},
                                    "samples`[0] is not [bytes, seconds]", 1),
    "probe-negative-seconds": Case({"summary.json": summary().replace("2e-05", "-2e-05")}, "is not positive", 1),
    "probe-workers-a-string": Case({"summary.json": summary(**{keys.PROBE_COLLECTIVE: {
        keys.WORKERS: "four", keys.PROBE_SAMPLES: [[8.0, 1e-5], [64.0, 2e-5]]}})}, "'four', not a count", 1),
    # The description
    "description-unknown-key": Case({"n.yaml": DESCRIBED + "insideNodes: {file: a.txt}\n"},
                                    "unknown key 'insideNodes': a description's keys are acrossNodes, insideNode", 3),
    "description-unknown-level-key": Case({"n.yaml": DESCRIBED + "  latency: 5\n"},
                                          "unknown key 'latency' in acrossNodes: its keys are file, files", 3),
    "description-names-a-missing-file": Case({"n.yaml": DESCRIBED}, "names a.txt, but there is no such file", 2),
    "description-names-a-description": Case({"n.yaml": DESCRIBED, "a.txt": "acrossNodes: {file: b.txt}\n"},
                                            "names a.txt, a network description itself", 2),
    "description-names-itself": Case({"n.yaml": "acrossNodes:\n  file: n.yaml\n"}, "a network description itself", 2),
    "description-without-across": Case({"n.yaml": "insideNode: {latencyMicroseconds: 1, bandwidthGbitPerSecond: 1}\n"},
                                       "no acrossNodes", 1),
    "description-measured-and-given": Case({"n.yaml": DESCRIBED + "  latencyMicroseconds: 5\n"},
                                           "gives latencyMicroseconds and file", 2),
    "description-negative-bandwidth": Case({"n.yaml": "acrossNodes:\n  latencyMicroseconds: 5\n"
                                                      "  bandwidthGbitPerSecond: -100\n"}, "must be above 0", 3),
    "description-bandwidth-a-string": Case({"n.yaml": "acrossNodes: {latencyMicroseconds: 5, "
                                                      "bandwidthGbitPerSecond: 100G}\n"}, "is '100G', not a number", 1),
    "description-bandwidth-in-bits": Case({"n.yaml": "acrossNodes: {latencyMicroseconds: 5, "
                                                     "bandwidthGbitPerSecond: 100000000000}\n"}, "at most 100000", 1),
    "description-latency-alone": Case({"n.yaml": "acrossNodes:\n  latencyMicroseconds: 5\n"},
                                      "gives no bandwidthGbitPerSecond", 1),
    "description-unknown-tool": Case({"n.yaml": DESCRIBED + "  tool: alltoall_perf\n", "a.txt": ACROSS},
                                     "tool is 'alltoall_perf'", 3),
    "description-tool-of-another-format": Case({"n.yaml": DESCRIBED + "  tool: osu_latency\n", "a.txt": ACROSS},
                                               "this is nccl-tests output, but the description's tool is "
                                               "'osu_latency'", None, blamed="a.txt"),
    "description-ranks-disagree": Case({"n.yaml": DESCRIBED + "  ranks: 8\n", "a.txt": ACROSS},
                                       "16 '# Rank' lines, but the description says ranks: 8", blamed="a.txt"),
    "description-ranks-one": Case({"n.yaml": DESCRIBED + "  ranks: 1\n", "a.txt": ACROSS}, "ranks is 1", 3),
    "description-not-yaml": Case({"n.yaml": "acrossNodes: {file: a.txt\ninsideNode: x\n"}, "not valid YAML", 2),
    "description-duplicate-key": Case({"n.yaml": DESCRIBED + "acrossNodes: {file: b.txt}\n"}, "duplicate key", 3),
    "description-two-allreduce-curves": Case({"n.yaml": "acrossNodes:\n  files: [a.txt, b.txt]\n  ranks: 16\n",
                                              "a.txt": ACROSS, "b.txt": ALLREDUCE}, "has 2 allreduce curves", 1),
    "description-two-documents": Case({"n.yaml": DESCRIBED + "---\n" + DESCRIBED}, "holds 2 YAML documents"),
    "description-level-not-a-mapping": Case({"n.yaml": "acrossNodes: a.txt\n"}, "acrossNodes is 'a.txt', not a "
                                            "mapping", 1),
    "description-no-files": Case({"n.yaml": "acrossNodes: {files: []}\n"}, "a list of 1 to 4 paths", 1),
    "description-a-file-not-a-path": Case({"n.yaml": "acrossNodes: {files: [a.txt, 3]}\n", "a.txt": ACROSS},
                                          "is 3: a path", 1),
    "description-alias-bomb": Case({"n.yaml": "a: &a [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
        f"{c}: &{c} [*{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}, *{p}]\n" for p, c in zip("abcdef", "bcdefg"))
        + "acrossNodes: *g\n"}, "more than 50000 values", 5),
    "description-enormous": Case({"n.yaml": "acrossNodes: {file: a.txt}\n" + "# padding\n" * 8000},
                                 "larger than 64 KiB"),
    "description-names-a-broken-file": Case({"n.yaml": DESCRIBED, "a.txt": replaced(ACROSS, "(us)", "(ms)")},
                                            "(named at {dir}/n.yaml:2)", line_of(ACROSS, "#        (B)"),
                                            blamed="a.txt"),
    "description-names-an-empty-directory": Case({"n.yaml": DESCRIBED, "a.txt": DIRECTORY},
                                                 "is a directory without summary.json", blamed="a.txt"),
}


def write(directory: pathlib.Path, files: dict[str, str | bytes]) -> None:
    for name, content in files.items():
        path = directory / name
        if content == DIRECTORY:
            path.mkdir()
        elif content == FIFO:
            os.mkfifo(path)
        elif isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content)


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_hostile_network_file_is_refused_in_one_line_naming_the_file_and_the_line(name, tmp_path):
    case = CASES[name]
    write(tmp_path, case.files)
    entry = case.entry or next(iter(case.files))
    blamed = str(tmp_path / (case.blamed or entry))
    with pytest.raises(network.NetworkError) as refused:
        network.read(tmp_path / entry)
    said = str(refused.value)
    assert "\n" not in said and "Traceback" not in said
    assert case.fragment.format(dir=tmp_path) in said
    assert said.startswith(f"{blamed}:{case.line}: " if case.line else f"{blamed}: "), said
    assert refused.value.__cause__ is None or isinstance(refused.value.__cause__, network.NetworkError)


def test_there_are_at_least_25_hostile_files():
    assert len(CASES) >= 25


def examples_in(directory: pathlib.Path) -> list[pathlib.Path]:
    for path in EXAMPLES.iterdir():
        shutil.copy(path, directory / path.name)
    return sorted(p for p in directory.iterdir() if p.suffix in (".txt", ".yaml"))


def read_or_refuse(path: pathlib.Path) -> bool:
    """True when `path` reads, False when NetworkError refuses it; any other exception fails the test."""
    try:
        network.read(path)
    except network.NetworkError as error:
        assert "\n" not in str(error)
        return False
    return True


def test_every_truncation_of_every_example_reads_or_is_refused_with_network_error(tmp_path):
    for path in examples_in(tmp_path):
        whole = path.read_bytes()
        for cut in range(0, len(whole), 47):
            path.write_bytes(whole[:cut])
            read = read_or_refuse(path)
            if path.name.startswith("nccl") and read:  # cut before its footer, nccl-tests output is always refused
                assert b"# Avg bus bandwidth" in whole[:cut], (path.name, cut)
        path.write_bytes(whole)


def test_files_mangled_at_random_read_or_are_refused_with_network_error(tmp_path):
    chosen = random.Random(49)
    alphabet = "0123456789.-+eE#:()[]{} \t\nxX/\\\"'&*!|>"
    for path in examples_in(tmp_path):
        whole = path.read_text()
        for _ in range(60):
            text = list(whole)
            for _ in range(chosen.randint(1, 4)):
                at = chosen.randrange(len(text))
                action = chosen.random()
                if action < 0.5:
                    text[at] = chosen.choice(alphabet)
                elif action < 0.75:
                    del text[at:at + chosen.randint(1, 40)]
                else:
                    text.insert(at, chosen.choice(alphabet) * chosen.randint(1, 3))
            path.write_text("".join(text))
            read_or_refuse(path)
        path.write_text(whole)
