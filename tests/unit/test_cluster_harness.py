"""A cluster script that fails says why where its failure is reported (cluster/lib.sh, cluster/harness.py).

The scripts run under `set -e`, which exits without a word; the e2e fixtures see only an exit code, and CI's log
keeps the end of the output. These run real bash on the real lib.sh and harness, with no cluster.
"""

from __future__ import annotations

import importlib.util
import pathlib
import subprocess

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
LIB = ROOT / "cluster" / "lib.sh"


def _script(tmp_path, body: str) -> subprocess.CompletedProcess[str]:
    script = tmp_path / "step.sh"
    script.write_text(f'. "{LIB}"\n{body}\n')
    return subprocess.run(["bash", str(script)], capture_output=True, text=True, timeout=60,
                          env={"PATH": "/usr/bin:/bin", "HOME": str(tmp_path),
                               "RINGLEADER_CLUSTER_RUN": str(tmp_path / "run")})


def test_a_failing_command_is_named_with_its_line(tmp_path):
    done = _script(tmp_path, "true\nls /no/such/directory\necho not reached")
    assert done.returncode != 0
    assert "ERROR: exit 2 at step.sh:3: ls /no/such/directory" in done.stderr
    assert "not reached" not in done.stdout


def test_a_failure_inside_a_function_is_named_where_it_happened(tmp_path):
    done = _script(tmp_path, "step() {\n  false\n}\nstep")
    assert done.returncode == 1
    assert "ERROR: exit 1 at step.sh:3: false" in done.stderr


def test_a_failure_the_script_handles_is_not_reported(tmp_path):
    done = _script(tmp_path, "if ! false; then echo handled; fi\nfalse || true\n[[ -e /no/such ]] && echo never\n"
                             "echo end")
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["handled", "end"]
    assert "ERROR" not in done.stderr


def test_a_wait_that_times_out_shows_what_its_last_try_said(tmp_path):
    done = _script(tmp_path, "wait_for 'the answer' 1 bash -c 'echo the server said no >&2; exit 3'")
    assert done.returncode == 1
    assert "timeout after 1s waiting for the answer; the last try said:" in done.stderr
    assert "the server said no" in done.stderr


@pytest.fixture
def harness(monkeypatch, tmp_path):
    monkeypatch.setenv("RINGLEADER_CLUSTER_RUN", str(tmp_path / "run"))
    spec = importlib.util.spec_from_file_location("harness", ROOT / "cluster" / "harness.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_harness_error_ends_on_the_scripts_last_lines(harness, tmp_path, capfd):
    with pytest.raises(RuntimeError) as failed:
        harness._run("status.sh", timeout=60)  # no cluster in this run dir
    message = str(failed.value)
    assert message.startswith("status.sh failed with exit code 1")
    assert f"cluster is down (no {tmp_path / 'run' / 'kubeconfig'})" in message
    assert "cluster is down" in capfd.readouterr().err  # passed on as it came, too


def test_the_harness_passes_a_scripts_output_on_when_it_succeeds(harness, tmp_path, capfd):
    harness._run("status.sh", "--kubeconfig", timeout=60)
    assert str(tmp_path / "run" / "kubeconfig") in capfd.readouterr().err
