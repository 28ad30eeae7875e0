"""The forked workers scripts/test runs the suite on (tests/toolbox_test_support/forked.py).

A run of its own, in a child pytest: every item reported exactly once, failures with their
captured output, a worker that dies mid-test failing that test (and only it), each worker with
its own tmp_path root, and ``--start-after`` refusing to start on a failed set-up.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

SUPPORT = Path(__file__).parent

SUITE = """
import os, signal, warnings
import pytest

@pytest.mark.parametrize("n", range(12))
def test_passes(n, tmp_path):
    (tmp_path / "mine").write_text(os.environ["TOOLBOX_TEST_WORKER"])

def test_fails_with_its_output():
    print("what the failing test printed")
    assert 1 == 2

def test_exits():
    os._exit(3)

def test_is_killed():
    os.kill(os.getpid(), signal.SIGKILL)

def test_warns():
    warnings.warn("a warning from a worker", DeprecationWarning)

def test_tmp_path_is_the_workers(tmp_path):
    assert tmp_path.parent.name == os.environ["TOOLBOX_TEST_WORKER"]
    assert tmp_path.parent.name.startswith("fw")
"""


def run(directory: Path, *args: str) -> subprocess.CompletedProcess[str]:
    # Only this run's options and plugins: not the ones this suite's own run was given, nor the
    # installed ones (hypothesis, langsmith, anyio, ... cost seconds of start-up, checking nothing).
    env = {**os.environ, "PYTHONPATH": str(SUPPORT), "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}
    env.pop("PYTEST_ADDOPTS", None)
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "toolbox_test_support.forked", "-p", "no:cacheprovider",
         "-rA", "-W", "default", "--basetemp", str(directory / "tmp"), *args],
        cwd=directory, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip


def test_every_item_reported_once_and_a_dying_worker_fails_only_its_test(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text(SUITE)
    result = run(tmp_path, "--forked-workers", "3")
    out = result.stdout
    assert result.returncode == 1, out + result.stderr
    outcomes = re.findall(r"^(PASSED|FAILED) test_suite\.py::(\S+)", out, re.MULTILINE)
    names = [name for _, name in outcomes]
    assert sorted(names) == sorted(
        [f"test_passes[{n}]" for n in range(12)]
        + ["test_fails_with_its_output", "test_exits", "test_is_killed", "test_warns"]
        + ["test_tmp_path_is_the_workers"]
    )
    failed = {name for outcome, name in outcomes if outcome == "FAILED"}
    assert failed == {"test_fails_with_its_output", "test_exits", "test_is_killed"}
    assert re.search(r"worker fw\d exited with status 3 while running this test", out)
    assert re.search(r"worker fw\d killed by signal 9 while running this test", out)
    assert "what the failing test printed" in out and "assert 1 == 2" in out
    assert "DeprecationWarning: a warning from a worker" in out
    assert "3 failed, 14 passed, 1 warning" in out
    # The 12 passing tests wrote into their workers' own roots; the dead workers' items went on.
    written = list((tmp_path / "tmp").glob("fw*/test_passes_*_0/mine"))
    assert len(written) == 12
    assert all(path.parent.parent.name == path.read_text() for path in written)


def test_start_after_refuses_a_failed_setup_before_any_test(tmp_path: Path) -> None:
    (tmp_path / "test_suite.py").write_text("def test_runs(tmp_path):\n    open('ran', 'w').close()\n")
    (tmp_path / "status").write_text("100\n")
    result = run(tmp_path, "--forked-workers", "2", "--start-after", "status")
    assert result.returncode == 3
    assert "status holds '100', not 0" in result.stdout + result.stderr
    assert not (tmp_path / "ran").exists()
    (tmp_path / "status").write_text("0\n")
    result = run(tmp_path, "--forked-workers", "2", "--start-after", "status")
    assert result.returncode == 0, result.stdout
    assert (tmp_path / "ran").exists()


LATE_CRASH = """
import os, time, warnings
from pathlib import Path

def wait_for(check):
    end = time.monotonic() + 60
    while not check():
        assert time.monotonic() < end
        time.sleep(0.01)

def test_a_dies_after_the_other_worker_is_gone():
    Path("a-started").touch()  # fw0 has been handed its next item (b) by now
    wait_for(lambda: Path("c-pid").exists())
    pid = int(Path("c-pid").read_text())
    wait_for(lambda: ended(pid))  # fw1 was told there is nothing left, and exited
    os._exit(3)

def ended(pid):
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] == "Z"
    except FileNotFoundError:
        return True

def test_b_was_handed_to_the_dead_worker():
    Path("b-ran-in").write_text(os.environ["TOOLBOX_TEST_WORKER"])

def test_c_runs_on_the_other_worker():
    wait_for(lambda: Path("a-started").exists())
    warnings.warn("recorded before the new worker is forked", UserWarning)
    Path("c-pid").write_text(str(os.getpid()))

def test_d_keeps_the_other_worker_from_stealing_b():
    pass
"""


def test_what_a_dead_worker_was_handed_runs_on_a_new_worker(tmp_path: Path) -> None:
    """fw0 dies holding b after fw1 was told there is nothing left: b runs on a new worker.

    Two workers share [a, b] and [c, d]: fw1 never runs out before c has seen a start, when fw0
    has been handed b (a worker asks for its next item before running the current one).
    """
    (tmp_path / "test_suite.py").write_text(LATE_CRASH)
    result = run(tmp_path, "--forked-workers", "2")
    assert result.returncode == 1, result.stdout + result.stderr
    # The warning once: the new worker, forked after it was recorded, does not send it again.
    assert "1 failed, 3 passed, 1 warning in" in result.stdout
    assert "FAILED test_suite.py::test_a_dies_after_the_other_worker_is_gone" in result.stdout
    assert "worker fw0 exited with status 3 while running this test" in result.stdout
    assert (tmp_path / "b-ran-in").read_text() == "fw2"
