"""Hostile experiment files: every one ends in exit 1 and one line per problem naming the file (under a
parser's refusal, the file's line and a caret), with no traceback, in bounded time and memory, echoing at
most a few hundred characters of itself.

The corpus is generated: too large, alias bombs, deep nesting, too many values, not UTF-8, binary, paths
that are no file, huge numbers, values the API server refuses (strings for integers, duplicate keys),
broken YAML and echo traps. One process validates them all, timing each file, and one more does it again
as where libyaml is not installed; a few more run the command on standard input and through render and run.
Time is CPU time and memory the process's own peak RSS, so that a busy machine cannot fail the test.
"""

from __future__ import annotations

import codecs
import dataclasses
import gzip
import json
import os
import pathlib
import random
import re
import socket
import subprocess
import sys
import tempfile
import time

import pytest
import yaml

from ringleader.api import loading, reading

SOURCE_ROOT = pathlib.Path(__file__).resolve().parents[2] / "operator"
MIB = 2**20
CAP = reading.MAX_BYTES
CPU_SECONDS = 5.0
"""The promise: under 5 s per file whatever the input (the slowest takes under 1 s here), counted in CPU time,
which a busy machine inflates (shared caches and cores) far less than it stretches the clock."""
PYTHON_PARSER_CPU_SECONDS = 12.0
"""Without libyaml, PyYAML's own parser: about 4x slower, its slowest file 4.2 s of CPU on an idle machine."""
MAX_RSS_MIB = 500
HANG_SECONDS = 120
FIFO_WAIT_SECONDS = 1.0
"""Wall-clock guard of each child process: far above the CPU bound, only to end a hang."""

BASE = """\
apiVersion: ringleader.dev/v1alpha1
kind: DistributedTrainingExperiment
metadata: {name: hostile}
spec:
  workers: {replicas: 2}
"""


def experiment(spec_lines: str) -> str:
    """BASE with more lines under `spec:` (each indented by two spaces)."""
    return BASE + "".join(f"  {line}\n" for line in spec_lines.splitlines())


@dataclasses.dataclass
class Case:
    name: str
    content: bytes | None
    """None: the path is made by `make` instead (directories, links)."""
    expected: str | re.Pattern
    """What the one problem line says: ringleader's own words, or a pattern where the library parsing the
    YAML words the problem (then only the place and the input it quotes are asserted: a new PyYAML may
    word it otherwise)."""
    spec_problems: int = 0
    """0: the file is refused whole, in one line '<file>: <problem>'; N: '<file>: invalid' and N problem lines."""

    def says(self, problem: str) -> bool:
        if isinstance(self.expected, re.Pattern):
            return self.expected.search(problem) is not None
        return self.expected in problem


EXCERPT_LINE = re.compile(r"^  +\d* \| ")
"""A line of the excerpt under a parser's refusal: "  26 |    iterations: [5", then "     |    ^"."""


def refusal(err: str) -> tuple[str, list[str]]:
    """A refused file's one problem line, and the excerpt lines under it (none, or a line and its caret, or two)."""
    first, *excerpt = err.splitlines()
    assert len(excerpt) in (0, 2, 4) and all(EXCERPT_LINE.match(line) for line in excerpt), err[:600]
    assert all(len(line) <= 120 for line in excerpt), excerpt
    return first, excerpt


def _yaml_error(quoted: str, line: int) -> re.Pattern:
    """A parser's refusal: ours says it is not valid YAML and where; the library says what, quoting `quoted`."""
    return re.compile(f"^not valid YAML: .*{re.escape(quoted)}.* at line {line}, column \\d+")


def metadata(lines: str) -> str:
    """BASE with more lines under `metadata:`, beside its name."""
    return BASE.replace("metadata: {name: hostile}\n", "metadata:\n  name: hostile\n"
                        + "".join(f"  {line}\n" for line in lines.splitlines()))


def _text(name: str, text: str, expected: str | re.Pattern, spec_problems: int = 0) -> Case:
    return Case(name, text.encode(), expected, spec_problems)


def _laughs(levels: int, width: int, mapping: bool = False) -> str:
    lines = [f"l0: &l0 [{', '.join(['lol'] * width)}]"]
    for level in range(1, levels):
        if mapping:
            items = ", ".join(f"k{i}: *l{level - 1}" for i in range(width))
            lines.append(f"l{level}: &l{level} {{{items}}}")
        else:
            lines.append(f"l{level}: &l{level} [{', '.join([f'*l{level - 1}'] * width)}]")
    return "\n".join(lines) + "\n"


def corpus() -> list[Case]:
    rng = random.Random(8)
    larger = "is larger than 3 MiB"
    values = f"more than {loading.MAX_VALUES} values (aliases expanded)"
    deeper = f"nested deeper than {loading.MAX_DEPTH} levels"
    not_utf8 = "is not UTF-8 text"
    binary = "is binary (a NUL byte at offset"
    long_number = "a number of"
    duplicate = "duplicate key"
    cases = [
        # Size: the API server's own limit, checked before anything is parsed.
        Case("size-spaces", b" " * (CAP + 1), larger),
        Case("size-comment", (BASE + "#" + "x" * CAP).encode(), larger),
        Case("size-one-string", b"a: " + b"x" * CAP, larger),
        Case("size-keys", "".join(f"k{i}: {i}\n" for i in range(400_000)).encode(), larger),
        Case("size-nul", b"\0" * (CAP + 1), larger),
        Case("size-list", b"[" + b"1," * (CAP // 2 + 1) + b"1]", larger),
        # Values: under 3 MiB, yet far more than any experiment.
        _text("values-keys", "".join(f"k{i}: {i}\n" for i in range(150_000)), values),
        _text("values-flat-list", "[" + "1," * 1_400_000 + "1]", values),
        _text("values-documents", "---\n" * 700_000, values),
        _text("values-empty-maps", "- {}\n" * 500_000, values),
        _text("values-labels", experiment("scheduling:\n  nodeSelector:\n" + "".join(
            f"    k{i}: v\n" for i in range(60_000))), values),
        # Alias expansion: each alias costs what it expands to.
        _text("alias-billion-laughs", _laughs(9, 9), values),
        _text("alias-laughs-mappings", _laughs(9, 9, mapping=True), values),
        _text("alias-doubling-chain", _laughs(40, 2), values),
        _text("alias-wide", "a: &a [" + ", ".join(["1"] * 1000) + "]\nb: [" + ", ".join(["*a"] * 100) + "]\n", values),
        _text("alias-merge-keys", "a: &a {" + ", ".join(f"k{i}: [1, 2, 3]" for i in range(2000)) + "}\n"
              + "".join(f"m{i}: {{<<: *a}}\n" for i in range(20)), values),
        _text("alias-in-spec", experiment("tracking: &t {uri: " + "x" * 10 + "}\n") + _laughs(9, 9), values),
        _text("alias-recursive-list", "a: &a [1, *a]\n", "inside the node it names"),
        _text("alias-recursive-map", "a: &a {b: {c: *a}}\n", "inside the node it names"),
        _text("alias-deepens", "a: &a " + "[" * 60 + "]" * 60 + "\nb: " + "[" * 60 + "*a" + "]" * 60 + "\n", deeper),
        # Nesting: refused as it is read, before any recursion.
        _text("deep-flow-lists", "[" * 100_000 + "]" * 100_000, deeper),
        _text("deep-flow-maps", "{a: " * 50_000 + "}" * 50_000, deeper),
        _text("deep-unclosed", "[" * 1_000_000, deeper),
        _text("deep-block-lists", "".join(" " * i + "-\n" for i in range(200)), deeper),
        _text("deep-block-maps", "".join(" " * i + "a:\n" for i in range(300)), deeper),
        _text("deep-in-spec", experiment("model: " + "[" * 200 + "]" * 200), deeper),
        # Encodings: UTF-8 only, as the API server reads it.
        Case("utf8-latin1", BASE.replace("hostile", "h\xe9").encode("latin-1"), f"{not_utf8}: byte 0xe9 on line 3"),
        Case("utf8-bad-continuation", BASE.encode() + b"  image: \xc3\x28\n", f"{not_utf8}: byte 0xc3 on line 6"),
        Case("utf8-overlong", b"a: \xc0\xaf\n", f"{not_utf8}: byte 0xc0 on line 1"),
        Case("utf8-surrogate", b"a: \xed\xa0\x80\n", f"{not_utf8}: byte 0xed on line 1"),
        Case("utf8-truncated", b"a: \xe2\x82", f"{not_utf8}: byte 0xe2 on line 1"),
        Case("utf8-cp1252-quotes", b"a: \x93quoted\x94\n", f"{not_utf8}: byte 0x93 on line 1"),
        Case("utf16-le", codecs.BOM_UTF16_LE + BASE.encode("utf-16-le"), "is UTF-16 text: save it as UTF-8"),
        Case("utf16-be", codecs.BOM_UTF16_BE + BASE.encode("utf-16-be"), "is UTF-16 text: save it as UTF-8"),
        Case("utf32-le", codecs.BOM_UTF32_LE + BASE.encode("utf-32-le"), "is UTF-32 text: save it as UTF-8"),
        Case("utf16-without-mark", BASE.encode("utf-16-le"), f"{binary} 1)"),
        # Binary.
        Case("binary-random", bytes(rng.randrange(256) for _ in range(4096)), binary),
        Case("binary-png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR" + bytes(64), binary),
        Case("binary-gzip", gzip.compress(BASE.encode(), mtime=0), f"{binary} 3)"),
        Case("binary-elf", b"\x7fELF\x02\x01\x01" + bytes(57), binary),
        Case("binary-nul-inside", (BASE + "  image: a\0b\n").encode(), binary),
        Case("binary-random-no-nul", bytes(rng.randrange(128, 256) for _ in range(4096)), not_utf8),
        # Characters YAML refuses.
        _text("char-control", "a: \x01\n",
              "not valid YAML: the character U+0001 at line 1, column 4 is not allowed in YAML"),
        _text("char-delete", "a: \x7f\n",
              "not valid YAML: the character U+007F at line 1, column 4 is not allowed in YAML"),
        _text("char-after-accents", "\u00e9: \u00e9\nb: \x7f\n",  # libyaml counts bytes; the place is in characters
              "not valid YAML: the character U+007F at line 2, column 4 is not allowed in YAML"),
        _text("char-noncharacter", "a: \ufffe\n",
              "not valid YAML: the character U+FFFE at line 1, column 4 is not allowed in YAML"),
        # Paths that are no experiment file.
        Case("path-directory", None, "is a directory: name an experiment file in it"),
        Case("path-missing", None, "file not found"),
        Case("path-broken-link", None, "file not found"),
        Case("path-link-loop", None, "cannot be read: Too many levels of symbolic links"),
        # Not a regular file: opening a FIFO waits for a writer, a device may never end.
        Case("path-fifo", None, f"a FIFO that did not reach its end within {FIFO_WAIT_SECONDS:g} s (0 bytes read): "
                                "is anything writing to it?"),
        Case("path-socket", None, "is not a regular file or a FIFO (a socket): name an experiment file"),
        Case("path-device", None, "is not a regular file or a FIFO (a character device): name an experiment file"),
        Case("path-empty", b"", "holds 0 YAML documents: an experiment file holds exactly one"),
        Case("path-only-comments", b"# nothing\n# here\n", "holds 0 YAML documents"),
        # Numbers: no field takes a long one; the bounds refuse what the runtime cannot use.
        _text("number-5000-digits", experiment("model: {iterations: " + "9" * 5000 + "}"),
              f"{long_number} 5000 characters at line 6"),
        _text("number-negative", experiment("model: {iterations: -" + "9" * 5000 + "}"), f"{long_number} 5001"),
        _text("number-hex", "a: 0x" + "f" * 200 + "\n", f"{long_number} 202"),
        _text("number-sexagesimal", experiment("model: {iterations: 1" + ":59" * 40_000 + "}"),
              "`spec.model.iterations` must be a valid integer (got '1:59:59:", 1),  # a string, as kubectl reads it
        _text("number-long-float", "a: 1." + "0" * 5000 + "\n", f"{long_number} 5002"),
        _text("number-key", "? " + "9" * 5000 + "\n: a\n", f"{long_number} 5000"),
        _text("number-deadline-1e20", experiment("runPolicy: {activeDeadlineSeconds: 100000000000000000000}"),
              "`spec.runPolicy.activeDeadlineSeconds` must be less than or equal to 2147483647", 1),
        _text("number-deadline-float", experiment("runPolicy: {activeDeadlineSeconds: 1.0e+20}"),
              "`spec.runPolicy.activeDeadlineSeconds` must be a valid integer (got 1e+20)", 1),
        _text("number-deadline-string", experiment("runPolicy: {activeDeadlineSeconds: 1e20}"),
              "`spec.runPolicy.activeDeadlineSeconds` must be a valid integer (got '1e20')", 1),
        _text("number-ttl", experiment("runPolicy: {ttlSecondsAfterFinished: 9223372036854775807}"),
              "`spec.runPolicy.ttlSecondsAfterFinished` must be less than or equal to 2147483647", 1),
        _text("number-infinite-rate", experiment("model: {optimizer: {learningRate: .inf}}"),
              "`spec.model.optimizer.learningRate` must be less than or equal to 10 (got inf)", 1),
        _text("number-nan-rate", experiment("model: {optimizer: {learningRate: .nan}}"),
              "`spec.model.optimizer.learningRate` must be less than or equal to 10 (got nan)", 1),
        # What the API server refuses: strings for integers and booleans, booleans for integers.
        _text("strict-string-integer", experiment('model: {iterations: "30"}'),
              "`spec.model.iterations` must be a valid integer (got '30')", 1),
        _text("strict-boolean-integer", BASE.replace("replicas: 2", "replicas: true"),
              "`spec.workers.replicas` must be a valid integer (got True)", 1),
        _text("strict-float-integer", experiment("model: {batchSize: 32.0}"),
              "`spec.model.batchSize` must be a valid integer (got 32.0)", 1),
        _text("strict-string-boolean", experiment('runPolicy: {suspend: "true"}'),
              "`spec.runPolicy.suspend` must be a valid boolean (got 'true')", 1),
        _text("strict-integer-boolean", experiment("runPolicy: {suspend: 1}"),
              "`spec.runPolicy.suspend` must be a valid boolean (got 1)", 1),
        _text("strict-string-number", experiment('model: {optimizer: {learningRate: "0.1"}}'),
              "`spec.model.optimizer.learningRate` must be a valid number (got '0.1')", 1),
        # Scalars as kubectl types them (YAML 1.1 as go-yaml reads it): no base 60, `y` and `n` are booleans.
        _text("strict-base-60-integer", experiment("model: {iterations: 1:00}"),
              "`spec.model.iterations` must be a valid integer (got '1:00')", 1),
        _text("strict-base-60-number", experiment("model: {optimizer: {learningRate: 0:0.5}}"),
              "`spec.model.optimizer.learningRate` must be a valid number (got '0:0.5')", 1),
        _text("strict-y-string", experiment("scheduling: {schedulerName: y}"),
              "`spec.scheduling.schedulerName` must be a valid string (got True)", 1),
        # Duplicate keys, which the API server refuses and a YAML library silently collapses.
        _text("duplicate-top-level", BASE + "kind: Other\n", f"{duplicate} 'kind' at line 6, column 1: also at line 2"),
        _text("duplicate-nested", BASE + "  workers: {replicas: 3}\n", f"{duplicate} 'workers' at line 6, column 3"),
        _text("duplicate-flow", experiment("model: {iterations: 10, iterations: 20}"), f"{duplicate} 'iterations'"),
        _text("duplicate-quoted", experiment('"model": {}\nmodel: {}'), f"{duplicate} 'model' at line 7"),
        _text("duplicate-far-apart", BASE + "\n" * 1000 + "metadata: {name: other}\n", "also at line 3"),
        # Labels, annotations and names the API server refuses, in the experiment or in the pods it makes.
        _text("label-megabyte", metadata(f"labels:\n  ? {'k' * MIB}\n  : {'v' * MIB}"),
              f"`metadata.labels` key '{'k' * 60}... ({MIB + 2} chars) must be a label key: ", 2),
        _text("label-key-newline", experiment('scheduling: {nodeSelector: {"disk\\ntype": ssd}}'),
              "`spec.scheduling.nodeSelector` key 'disk\\ntype' must be a label key: ", 1),
        _text("label-key-two-slashes",
              BASE.replace("replicas: 2}",
                           "replicas: 2, groups: [{name: a, replicas: 2, nodeSelector: {a/b/c: x}}]}"),
              "`spec.workers.groups.0.nodeSelector` key 'a/b/c' must be a label key: ", 1),
        _text("label-key-long-prefix", experiment(f"scheduling: {{nodeSelector: {{{'a' * 254}/gpu: x}}}}"),
              "`spec.scheduling.nodeSelector` key 'aaaa", 1),
        _text("label-value-nul", experiment('scheduling: {nodeSelector: {disk: "ssd\\0"}}'),
              "`spec.scheduling.nodeSelector.disk` must be a label value: ", 1),
        _text("label-value-line-separator", experiment('scheduling: {nodeSelector: {disk: "ssd\\L"}}'),
              "`spec.scheduling.nodeSelector.disk` must be a label value: ", 1),
        _text("label-value-long", experiment(f"scheduling: {{nodeSelector: {{disk: {'s' * 64}}}}}"),
              "`spec.scheduling.nodeSelector.disk` must have at most 63 characters", 1),
        _text("annotation-300-kib", metadata(f"annotations: {{a: {'x' * 300 * 1024}}}"),
              "`metadata.annotations` must hold at most 262144 bytes, keys and values together, as the API server "
              "counts them (got 307201)", 1),
        _text("annotation-key-newline", metadata('annotations: {"a\\nb": x}'),
              "`metadata.annotations` key 'a\\nb' must be an annotation key: ", 1),
        _text("name-scheduler-newline", experiment('scheduling: {schedulerName: "volcano\\n"}'),
              "`spec.scheduling.schedulerName` must be a DNS subdomain: ", 1),
        _text("name-priority-class-newline", experiment('scheduling: {priorityClassName: "high\\nlow"}'),
              "`spec.scheduling.priorityClassName` must be a DNS subdomain: ", 1),
        _text("name-toleration-key-newline",
              experiment('scheduling: {tolerations: [{key: "gpu\\n", operator: Exists}]}'),
              "`spec.scheduling.tolerations.0.key` must be a label key: ", 1),
        _text("name-toleration-value-newline", experiment('scheduling: {tolerations: [{key: gpu, value: "a\\nb"}]}'),
              "`spec.scheduling.tolerations.0.value` must be a label value: ", 1),
        # Broken YAML, on one line with its position.
        _text("yaml-tab", "a:\n\tb: 1\n", _yaml_error("", 2)),
        _text("yaml-unclosed", "spec: [unclosed\n", "not valid YAML: "),
        _text("yaml-python-tag", "a: !!python/object/apply:os.system [echo]\n", _yaml_error("python/object/apply", 1)),
        _text("yaml-local-tag", "a: !mine x\n", _yaml_error("'!mine'", 1)),
        _text("yaml-undefined-alias", "a: *nowhere\n", _yaml_error("'nowhere'", 1)),
        _text("yaml-unhashable-key", "? [a, b]\n: c\n", _yaml_error("", 1)),
        # Echo traps: the input is quoted, never repeated at length.
        _text("echo-undefined-alias", "a: *" + "x" * MIB + "\n", "not valid YAML: "),
        _text("echo-unknown-key", experiment("? " + "y" * MIB + "\n: 1"), "is not a field of this object", 1),
        _text("echo-long-value", experiment("image: " + "z" * (2 * MIB)), "`spec.image` must have at most 512", 1),
        _text("echo-long-tag", "a: !" + "t" * MIB + " x\n", "not valid YAML: "),
        _text("echo-many-typos", experiment("\n".join(f"typo{i}: 1" for i in range(5000))),
              "is not a field of this object", 21),
        # Documents that are no experiment.
        _text("shape-list", "- a\n- b\n", "the document must be a mapping", 1),
        _text("shape-scalar", "hello\n", "the document must be a mapping", 1),
        _text("shape-two-documents", BASE + "---\n" + BASE, "holds 2 YAML documents"),
    ]
    return cases


def make(case: Case, directory) -> str:
    path = directory / f"{case.name}.yaml"
    if case.content is not None:
        path.write_bytes(case.content)
    elif case.name == "path-directory":
        path.mkdir()
    elif case.name == "path-broken-link":
        path.symlink_to(directory / "nowhere")
    elif case.name == "path-link-loop":
        path.symlink_to(path)
    elif case.name == "path-fifo":
        os.mkfifo(path)
    elif case.name == "path-socket":
        with socket.socket(socket.AF_UNIX) as server:
            server.bind(str(path))
    elif case.name == "path-device":
        path.symlink_to(os.devnull)
    return str(path)


CASES = corpus()

# Each file validated alone in one process (the command's own main), its time taken; argv[1] is the parser:
# "libyaml", or "python" as where libyaml is not installed.
DRIVER = """\
import contextlib, io, json, sys, time, traceback
if sys.argv[1] == "python":
    sys.modules["yaml._yaml"] = None
from ringleader import cli
from ringleader.api import loading, reading
reading.FIFO_WAIT_SECONDS = %r  # a FIFO nobody writes to: the bound, shortened for the corpus
print(json.dumps({"parser": loading._Parser.__name__}), flush=True)
for path in sys.argv[2:]:
    out, err = io.StringIO(), io.StringIO()
    cpu, wall = time.process_time(), time.monotonic()
    try:
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = cli.main(["validate", path])
    except BaseException:
        code = None
        err.write(traceback.format_exc())
    print(json.dumps({"path": path, "code": code, "out": out.getvalue(), "err": err.getvalue(),
                      "cpu": time.process_time() - cpu, "wall": time.monotonic() - wall}), flush=True)
"""


DRIVER = DRIVER % FIFO_WAIT_SECONDS

# What the `ringleader` console script runs, for run_child.
CLI = "from ringleader.cli import main; sys.exit(main())"
# Run first in every child: at exit, the process's own peak RSS (VmHWM) goes to the file named by argv[1].
# Not ru_maxrss: the kernel counts in it the image of the process that forked the child (this pytest).
PEAK_REPORTER = """\
import atexit, sys
_report = sys.argv.pop(1)
def _write_peak():
    with open("/proc/self/status") as status, open(_report, "w") as out:
        out.write(next(line for line in status if line.startswith("VmHWM:")).split()[1])
atexit.register(_write_peak)
"""


def run_child(code: str, args: list[str], stdin: bytes = b"") -> tuple[int, str, str, float, float]:
    """(exit status, stdout, stderr, CPU seconds, peak RSS in MiB) of `python -c code args` in a child process."""
    environ = {**os.environ, "PYTHONPATH": str(SOURCE_ROOT)}
    with tempfile.TemporaryDirectory() as scratch:
        scratch = pathlib.Path(scratch)
        (scratch / "in").write_bytes(stdin)
        with open(scratch / "in", "rb") as given, open(scratch / "out", "wb") as out, \
                open(scratch / "err", "wb") as err:
            child = subprocess.Popen([sys.executable, "-c", PEAK_REPORTER + code, str(scratch / "peak"), *args],
                                     stdin=given, stdout=out, stderr=err, env=environ)
        deadline = time.monotonic() + HANG_SECONDS
        while True:
            pid, status, usage = os.wait4(child.pid, os.WNOHANG)  # its own CPU time, counted by the kernel
            if pid:
                break
            if time.monotonic() > deadline:
                child.kill()
                os.wait4(child.pid, 0)
                pytest.fail(f"{args} did not end within {HANG_SECONDS} s")
            time.sleep(0.02)
        child.returncode = os.waitstatus_to_exitcode(status)  # reaped here: Popen must not wait for it
        return (child.returncode, (scratch / "out").read_text(), (scratch / "err").read_text(),
                usage.ru_utime + usage.ru_stime, int((scratch / "peak").read_text()) / 1024)


def test_the_corpus_covers_every_category_with_at_least_60_files():
    categories = {case.name.split("-")[0] for case in CASES}
    assert len(CASES) >= 60
    assert {"size", "values", "alias", "deep", "utf8", "utf16", "binary", "path", "number", "strict",
            "duplicate", "label", "annotation", "name", "yaml", "echo"} <= categories


def validate_each(paths: dict[str, Case], parser: str) -> dict[str, dict]:
    """Each case's result, by case name, from one driver process; its peak RSS is every file's bound."""
    started = time.monotonic()
    code, out, err, cpu, rss = run_child(DRIVER, [parser, *paths])
    assert code == 0, err
    [used, *lines] = [json.loads(line) for line in out.splitlines()]
    results = {paths[result["path"]].name: {**result, "rss": rss} for result in lines}
    assert len(results) == len(paths)
    slowest = max(results.values(), key=lambda result: result["cpu"])
    print(f"\n{len(paths)} hostile files through {used['parser']} in {time.monotonic() - started:.1f} s "
          f"({cpu:.1f} s CPU, peak RSS {rss:.0f} MiB); slowest {pathlib.Path(slowest['path']).name}: "
          f"{slowest['cpu']:.2f} s CPU, {slowest['wall']:.2f} s")
    return results


@pytest.fixture(scope="module")
def hostile_files(tmp_path_factory) -> dict[str, Case]:
    directory = tmp_path_factory.mktemp("hostile")
    return {make(case, directory): case for case in CASES}


@pytest.fixture(scope="module")
def validated(hostile_files) -> dict[str, dict]:
    return validate_each(hostile_files, "libyaml")


@pytest.mark.parametrize("case", CASES, ids=[case.name for case in CASES])
def test_a_hostile_file_is_refused_in_one_line_per_problem_without_traceback(case, validated):
    result = validated[case.name]
    path, lines = result["path"], result["err"].splitlines()
    assert result["out"] == "" and result["code"] == 1, result["out"][:500] or result["err"][:500]
    if case.spec_problems == 0:
        first, _ = refusal(result["err"])
        assert first.startswith(f"{path}: "), lines[:3]
        problem = first[len(path) + 2:]
        assert case.says(problem), problem
        assert len(problem) <= loading.SHOWN
    else:
        assert lines[0] == f"{path}: invalid"
        assert len(lines) == 1 + case.spec_problems and all(line.startswith("  - ") for line in lines[1:]), lines
        assert case.says(lines[1]), lines[1]
        assert all(len(line) <= 320 for line in lines[1:])
    assert result["cpu"] < CPU_SECONDS, f"{result['cpu']:.1f} s CPU"
    assert result["rss"] < MAX_RSS_MIB


def test_without_libyaml_every_file_is_refused_the_same_way_in_bounded_time_and_memory(hostile_files, validated):
    for name, result in validate_each(hostile_files, "python").items():
        assert (result["code"], result["out"]) == (1, ""), f"{name}: {result['out'][:500]}"
        assert len(result["err"].splitlines()) == len(validated[name]["err"].splitlines()), (
            name, result["err"][:600], validated[name]["err"][:600])
        assert result["cpu"] < PYTHON_PARSER_CPU_SECONDS and result["rss"] < MAX_RSS_MIB, name


def test_a_depth_refused_by_the_parser_itself_is_said_in_ringleaders_words():
    # libyaml (PyYAML >= 6.0.4) refuses 1000 levels while reading ahead, before the composer counts 100.
    mark = yaml.Mark("f.yaml", 0, 0, 1000, None, None)
    refusal = yaml.parser.ParserError(None, None, "exceeded maximum nesting depth", mark)
    assert loading._describe(refusal) == (f"nested deeper than {loading.MAX_DEPTH} levels at line 1, column 1001: "
                                          "an experiment needs fewer than 10")


def test_libyaml_parses_where_installed():
    assert yaml.__with_libyaml__, "install PyYAML with libyaml: it parses a 3 MiB file in milliseconds"
    assert loading._Parser is yaml.cyaml.CParser


def test_the_worst_files_are_refused_by_the_real_command_on_standard_input_in_bounded_time_and_memory():
    worst = {"alias-billion-laughs": "", "values-flat-list": "", "deep-unclosed": "", "size-spaces": "",
             "binary-random": "", "number-5000-digits": ""}
    cases = {case.name: case for case in CASES if case.name in worst}
    for name, case in cases.items():
        code, out, err, cpu, rss = run_child(CLI, ["validate", "-"], case.content)
        assert (code, out) == (1, ""), out[:300]
        first, _ = refusal(err)
        assert first.startswith("<stdin>: ") and case.says(first[len('<stdin>: '):]), err[:300]
        assert cpu < CPU_SECONDS and rss < MAX_RSS_MIB, f"{name}: {cpu:.1f} s CPU, {rss:.0f} MiB"


def test_a_valid_experiment_on_standard_input_validates():
    code, out, err, _, _ = run_child(CLI, ["validate", "-"], BASE.encode())
    assert (code, err) == (0, "")
    assert out.splitlines()[0] == "<stdin>: valid, 1 trial"


def test_a_file_just_under_the_cap_with_anchors_and_merge_keys_is_taken(tmp_path):
    body = BASE.replace("{replicas: 2}", "{replicas: 2, resources: &r {cpu: '1'}}") + (
        "  parameterServers: {resources: *r}\n  model: {<<: {batchSize: 8}, iterations: 10}\n")
    path = tmp_path / "large.yaml"
    path.write_text("#" * (CAP - len(body) - 1) + "\n" + body)
    assert path.stat().st_size == CAP
    code, out, err, cpu, _ = run_child(CLI, ["validate", str(path)])
    assert (code, err) == (0, ""), out
    assert cpu < CPU_SECONDS


@pytest.mark.parametrize("command, status", [("render", 1), ("run", 1)])
def test_render_and_run_read_files_through_the_same_loader(command, status):
    bomb = next(case for case in CASES if case.name == "alias-billion-laughs")
    code, out, err, cpu, rss = run_child(CLI, [command, "-"], bomb.content)
    assert (code, out) == (status, "")
    first, _ = refusal(err)
    assert first.startswith("<stdin>: ") and bomb.says(first[len('<stdin>: '):]), err[:300]
    assert cpu < CPU_SECONDS and rss < MAX_RSS_MIB


def test_the_files_example_of_the_api_docs_is_what_validate_prints(tmp_path, monkeypatch):
    docs = (SOURCE_ROOT.parent / "docs" / "api.md").read_text()
    [block] = re.findall(r"```console\n\$ ringleader validate laughs.yaml notes.yaml twice.yaml strings.yaml\n(.*?)```",
                         docs, re.S)
    (tmp_path / "laughs.yaml").write_text(_laughs(9, 9))
    (tmp_path / "notes.yaml").write_bytes(codecs.BOM_UTF16_LE + BASE.encode("utf-16-le"))
    (tmp_path / "twice.yaml").write_text(BASE + "  workers: {replicas: 4}\n")
    (tmp_path / "strings.yaml").write_text(experiment(
        'model: {iterations: "30"}\nrunPolicy: {activeDeadlineSeconds: 100000000000000000000}'))
    monkeypatch.chdir(tmp_path)
    code, out, err, _, _ = run_child(CLI, ["validate", "laughs.yaml", "notes.yaml", "twice.yaml",
                                      "strings.yaml"])
    assert (code, out, err) == (1, "", block)  # problems go to stderr
