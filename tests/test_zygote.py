"""The tests' fork server (tests/zygote.py): a launched child behaves as a child of the launcher.

Each test starts its own zygote (preloading only ``json``), so killing or stopping it touches
no other test; waits are bounded polls.
"""

from __future__ import annotations

import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import zygote

PROBE = """
import json, os, sys, time
print(json.dumps({"pid": os.getpid(), "ppid": os.getppid(), "argv": sys.argv, "cwd": os.getcwd(),
                  "env": dict(os.environ), "line": sys.stdin.readline()}), flush=True)
if os.environ.get("SLEEP"):
    time.sleep(float(os.environ["SLEEP"]))
"""


@pytest.fixture
def own() -> Iterator[zygote.Zygote]:
    made = zygote.Zygote(("json",))
    yield made
    made.stop()


@pytest.fixture
def probe(tmp_path: Path) -> Path:
    path = tmp_path / "probe.py"
    path.write_text(PROBE, encoding="utf-8")
    return path


def script(tmp_path: Path, code: str) -> Path:
    path = tmp_path / "script.py"
    path.write_text(code, encoding="utf-8")
    return path


def launch_sleeping_probe(owner: zygote.Zygote, probe: Path) -> tuple[subprocess.Popen[str], int]:
    """A launcher of ``probe`` (told to sleep ten minutes) and its child's pid, once it runs."""
    launcher = subprocess.Popen(
        owner.command(probe),
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={"SLEEP": "600"},
    )
    assert launcher.stdin is not None and launcher.stdout is not None
    launcher.stdin.write("go\n")
    launcher.stdin.flush()
    return launcher, json.loads(launcher.stdout.readline())["pid"]


def children_of(pid: int) -> list[int]:
    found = []
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                stat = (entry / "stat").read_text()
            except OSError:
                continue
            if int(stat.rpartition(")")[2].split()[1]) == pid:
                found.append(int(entry.name))
    return found


def gone(pid: int, limit: float = 15.0) -> bool:
    """Poll (bounded) until no process ``pid`` exists (zombies included)."""
    end = time.monotonic() + limit
    while Path(f"/proc/{pid}").exists() and time.monotonic() < end:
        time.sleep(0.02)
    return not Path(f"/proc/{pid}").exists()


def dead(pid: int, limit: float = 15.0) -> bool:
    """Poll (bounded) until process ``pid`` has ended: gone, or a zombie.

    For an orphan, whose zombie only init reaps, and at init's own pace (over a second in
    some containers): that wait says nothing about the process.
    """
    end = time.monotonic() + limit
    while not _ended(pid) and time.monotonic() < end:
        time.sleep(0.02)
    return _ended(pid)


def _ended(pid: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return True  # reaped
    return stat.rpartition(")")[2].split()[0] == "Z"


def test_the_child_gets_the_launchers_pipes_environment_directory_and_arguments(
    own: zygote.Zygote, probe: Path, tmp_path: Path
) -> None:
    launched = subprocess.run(
        own.command(probe, "one", "two words"),
        input="hello\n",
        capture_output=True,
        text=True,
        env={"ONLY": "this"},
        cwd=tmp_path,
        timeout=60,
        check=False,
    )
    assert launched.returncode == 0, launched.stderr
    seen = json.loads(launched.stdout)
    assert seen["argv"] == [str(probe), "one", "two words"]
    assert seen["cwd"] == str(tmp_path)
    # Exactly what `env` gave (LC_CTYPE: any Python child coerces the C locale, PEP 538).
    assert set(seen["env"]) - {"LC_CTYPE"} == {"ONLY"} and seen["env"]["ONLY"] == "this"
    assert seen["line"] == "hello\n"
    assert seen["ppid"] == own.process.pid  # forked by the zygote, not executed by the launcher


def test_the_launchers_pythonpath_is_on_the_childs_path(own: zygote.Zygote, tmp_path: Path) -> None:
    site = tmp_path / "site"
    site.mkdir()
    (site / "only_on_that_path.py").write_text("WHERE = 'site'\n", encoding="utf-8")
    code = "import sys, only_on_that_path; print(only_on_that_path.WHERE, sys.path.index(sys.argv[1]))"
    launched = subprocess.run(
        own.command(script(tmp_path, code), str(site)),
        capture_output=True,
        text=True,
        env={"PYTHONPATH": str(site)},
        timeout=60,
        check=False,
    )
    assert launched.returncode == 0, launched.stderr
    assert launched.stdout.split() == ["site", "1"]  # after the script's folder, as at a start


@pytest.mark.parametrize(
    ("code", "status", "stderr"),
    [
        ("import sys; sys.exit(7)", 7, ""),
        ("import sys; sys.exit(-1)", 255, ""),
        ("raise ValueError('broken')", 1, "ValueError: broken"),
        ("import sys; sys.exit('a message')", 1, "a message"),
        ("import os, signal; os.kill(os.getpid(), signal.SIGTERM)", -signal.SIGTERM, ""),
        ("import sys; sys.stdout.write('unflushed'); sys.exit(0)", 0, ""),
    ],
)
def test_the_launcher_ends_as_its_child_ended(
    own: zygote.Zygote, tmp_path: Path, code: str, status: int, stderr: str
) -> None:
    launched = subprocess.run(
        own.command(script(tmp_path, code)), capture_output=True, text=True, timeout=60, check=False
    )
    assert launched.returncode == status
    assert stderr in launched.stderr
    if "unflushed" in code:
        assert launched.stdout == "unflushed"  # the exit flushes, as the interpreter's would


def test_a_launcher_killed_by_sigkill_leaves_no_child(own: zygote.Zygote, probe: Path) -> None:
    launcher, child = launch_sleeping_probe(own, probe)
    assert children_of(own.process.pid) == [child]
    launcher.kill()
    assert launcher.wait(60) == -signal.SIGKILL
    assert gone(child)
    assert children_of(own.process.pid) == []
    launcher.communicate(timeout=60)  # closes its pipes


STOPPABLE = """
import os, signal, sys
signal.signal(signal.SIGINT, signal.default_int_handler)  # a starter in the background ignores it
signal.signal(signal.SIGTERM, lambda *_: (os.write(1, b"stopping\\n"), sys.exit(3)))
os.write(1, b"ready\\n")
while True:
    signal.pause()
"""


@pytest.mark.parametrize(
    ("sent", "status", "said"),
    [
        (signal.SIGTERM, 3, "stopping\n"),  # the child's own handler: a graceful stop
        (signal.SIGINT, -signal.SIGINT, ""),  # KeyboardInterrupt, then death by SIGINT
    ],
)
def test_a_signal_to_the_launcher_stops_the_child_as_the_child_decides(
    own: zygote.Zygote, tmp_path: Path, sent: signal.Signals, status: int, said: str
) -> None:
    launcher = subprocess.Popen(
        own.command(script(tmp_path, STOPPABLE)), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    assert launcher.stdout is not None
    assert launcher.stdout.readline() == "ready\n"  # running, with its handler in place
    [child] = children_of(own.process.pid)
    for task in Path(f"/proc/{child}/task").iterdir():  # only the main thread takes signals
        described = (task / "status").read_text()
        blocked = int(
            next(line for line in described.splitlines() if line.startswith("SigBlk:")).split()[1], 16
        )
        assert (blocked & (1 << (sent - 1)) == 0) == (task.name == str(child)), described
    launcher.send_signal(sent)
    out, err = launcher.communicate(timeout=60)
    assert launcher.returncode == status, err
    assert out == said
    assert children_of(own.process.pid) == []


def test_a_signal_before_the_childs_pidfd_reaches_the_launcher_is_passed_on(tmp_path: Path) -> None:
    # The child can run (its "ready" read, a signal sent for it) before the zygote's answer with
    # its pidfd reaches the launcher. Forced here: a zygote of the test's own answers only after
    # the signal, for a child the test started, to a launcher that inherited SIGTERM ignored
    # (a starter that ignores it): the signal is held, then passed on, never lost.
    path = str(tmp_path / "socket")
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(1)
    stoppable = script(tmp_path, STOPPABLE)
    child = subprocess.Popen([sys.executable, str(stoppable)], stdout=subprocess.PIPE, text=True)
    assert child.stdout is not None and child.stdout.readline() == "ready\n"
    command = shlex.join([sys.executable, "-I", "-S", str(zygote.LAUNCHER), path, "script.py"])
    launcher = subprocess.Popen(
        ["sh", "-c", f"trap '' TERM; exec {command}"], stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL
    )
    conn, _ = listener.accept()
    _, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)  # its request: it waits for the pidfd now
    for fd in fds:
        os.close(fd)
    launcher.send_signal(signal.SIGTERM)
    pidfd = os.pidfd_open(child.pid)
    socket.send_fds(conn, [b"started\n"], [pidfd])
    os.close(pidfd)
    assert child.wait(60) == 3
    assert child.stdout.read() == "stopping\n"
    conn.sendall(json.dumps({"code": 3}).encode() + b"\n")
    assert launcher.wait(60) == 3
    conn.close()
    listener.close()
    child.stdout.close()


def test_concurrent_launches_each_get_their_own_child(own: zygote.Zygote, probe: Path) -> None:
    results: dict[int, dict[str, object]] = {}

    def launch(n: int) -> None:
        done = subprocess.run(
            own.command(probe, str(n)),
            input=f"{n}\n",
            capture_output=True,
            text=True,
            timeout=120,
            check=True,
        )
        results[n] = json.loads(done.stdout)

    threads = [threading.Thread(target=launch, args=(n,)) for n in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(results) == list(range(8))
    assert all(r["argv"] == [str(probe), str(n)] and r["line"] == f"{n}\n" for n, r in results.items())
    assert len({r["pid"] for r in results.values()}) == 8
    assert children_of(own.process.pid) == []  # every child reaped


def test_a_dead_zygote_fails_launches_loudly_and_takes_its_children_along(probe: Path) -> None:
    dying = zygote.Zygote(("json",))
    try:
        running, child = launch_sleeping_probe(dying, probe)
        dying.process.kill()
        dying.process.wait(60)
        # The launch in flight fails (no hang), and its child dies with its launcher (an orphan
        # now: its zombie is init's to reap).
        _, err = running.communicate(timeout=60)
        assert running.returncode == 70
        assert "went away before the child's exit status" in err
        assert dead(child)
        # A new launch fails at once: the test asking for one, and a launcher started anyway.
        with pytest.raises(RuntimeError, match="the zygote died"):
            dying.command(probe)
        late = [sys.executable, "-I", "-S", str(zygote.LAUNCHER), dying.socket, str(probe)]
        refused = subprocess.run(late, capture_output=True, text=True, timeout=60, check=False)
        assert refused.returncode == 70
        assert "cannot be reached" in refused.stderr
    finally:
        dying.stop()


def test_stopping_the_zygote_kills_what_it_still_runs(probe: Path) -> None:
    stopped = zygote.Zygote(("json",))
    launcher, child = launch_sleeping_probe(stopped, probe)
    stopped.stop()
    assert stopped.process.returncode == 0
    assert launcher.wait(60) == -signal.SIGKILL  # as the child ended
    assert gone(child)
    launcher.communicate(timeout=60)  # closes its pipes


def test_a_preload_that_starts_a_thread_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "starts_a_thread.py").write_text(
        "import threading, time\nthreading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n",
        encoding="utf-8",
    )
    monkeypatch.setenv("PYTHONPATH", str(tmp_path))
    with pytest.raises(RuntimeError, match="did not start"):
        zygote.Zygote(("starts_a_thread",))


def test_shared_zygotes_are_one_per_preload_list() -> None:
    assert zygote.shared("json") is zygote.shared("json")
    assert zygote.shared("json") is not zygote.shared("json", "csv")
    assert os.path.exists(zygote.shared("json").socket)
