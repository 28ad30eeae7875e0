"""A fork server for the child processes the tests start over and over (issue 26).

Why: the MCP tests start the stdio test server (``mcp_test_server.py``) hundreds of times and
the fleet tests start dozens of ``state_worker.py`` processes; each start spent ~0.7 s of CPU
importing the MCP SDK, or toolbox and its state backends, before doing any work: the largest
part of the suite's CPU. A zygote imports those modules once per pytest run and forks a fresh
child per start, at the cost of a fork.

What a test starts is still one process per server or worker:
``python -I -S zygote_launcher.py SOCKET SCRIPT ARGS...`` (`Zygote.command`; the standard
library only, a few milliseconds). The launcher sends its stdin, stdout and stderr
(``SCM_RIGHTS``), its environment, working directory and command line over the zygote's unix
socket; the zygote forks a child that takes those descriptors as its own, switches to that
environment, directory and ``sys.argv`` and runs SCRIPT as ``__main__`` (``runpy``), as
``python SCRIPT ARGS...`` would. What stays real:

- the child is a separate OS process, talking over the very pipes (or sockets) its starter
  made, with its own store connections: the zygote only ever imported modules, it holds no
  connection, thread or event loop when it forks (`serve` refuses a preload that starts a
  thread), and closes its socket and bookkeeping in the child;
- the launcher ends as the child ends: its exit code, or killed by the same signal; so a
  server exiting mid-call or crashing is reaped by its starter like any child;
- SIGTERM and SIGINT sent to the launcher are passed on to the child (through a pidfd of it
  the zygote sends), so a starter's ``terminate()`` stops a server as gracefully as it would
  stop the server itself, and the launcher then ends as the child did;
- the child dies when the launcher dies, even by SIGKILL: it watches the launcher through a
  pidfd the zygote opened for it (from the socket's peer credentials) before forking; so a
  starter that kills the launcher (or its process group, as the MCP SDK does) kills the server;
- the launcher's command line names SCRIPT, so counting children by command line still works
  (``server_children()`` in providers/toolbox-mcp/tests/conftest.py looks for
  ``mcp_test_server``); the zygote's own command line names only the modules it preloads;
- a zygote that is gone fails every launch loudly (`ZYGOTE_GONE` on stderr and exit 70),
  never a hang; a zygote that died is not restarted behind the tests' back.

What differs from a fresh interpreter: of the ``PYTHON*`` variables only ``PYTHONPATH`` is
applied (to ``sys.path``), the others are the zygote's; what a preloaded module read from the
environment as it was imported is the zygote's (preload libraries that read it when used); the
hash seed is shared (``random`` is reseeded at fork by Python itself); and the exit skips the
interpreter's teardown (`_exit`): objects alive at the end are not finalized, as with
``os._exit`` (threads are joined, ``atexit`` functions run and the standard streams flushed).

`shared` starts one zygote per preload list per pytest process on first use; when pytest runs
workers (forked after collection, or pytest-xdist's) the process that starts them starts the
suite's three kinds for all of them first (`serve_workers`, from the root ``conftest.py``: one
set of imports instead of one per worker), and each worker attaches to them (a forked child
drops its parent's zygotes as its own: `_forget_inherited`). The root ``conftest.py`` stops a
process's own zygotes when its session finishes (the zygote also exits, killing what it still
runs, when its stdin closes, so a killed pytest process leaves nothing behind), and their
children's CPU is reaped into that process's like any child's.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import importlib
import json
import os
import runpy
import select
import selectors
import shlex
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

LAUNCHER = Path(__file__).with_name("zygote_launcher.py")
#: A file the zygote appends each child's CPU seconds (user + system) and script name to.
LOG = os.environ.get("TOOLBOX_ZYGOTE_LOG")
#: How long the zygote waits for a connected launcher's request before dropping it.
HANDSHAKE_TIMEOUT = 10.0


@dataclass
class _Request:
    """What a launcher asked for: run ``argv`` on ``fds`` (its stdin, stdout, stderr)."""

    argv: list[str]
    env: dict[str, str]
    cwd: str
    fds: list[int]
    launcher: int  # a pidfd of the launcher, watched by the child


@dataclass
class _Server:
    """The zygote's loop: accept launchers, fork their children, send back how each ended."""

    listener: socket.socket
    selector: selectors.BaseSelector = field(default_factory=selectors.PollSelector)
    # pidfd of a running child -> (its pid, the connection of its launcher)
    running: dict[int, tuple[int, socket.socket]] = field(default_factory=dict)
    names: dict[int, str] = field(default_factory=dict)  # pidfd -> the script's name, for LOG

    def run(self) -> _Request | None:
        """Serve until stdin closes (None); returns only in a forked child, with its request."""
        self.selector.register(self.listener, selectors.EVENT_READ, "accept")
        self.selector.register(0, selectors.EVENT_READ, "stop")
        while True:
            for key, _ in self.selector.select():
                if key.data == "stop":
                    self.stop()
                    return None
                if key.data == "accept":
                    conn, _ = self.listener.accept()
                    request = self.fork(conn)
                    if request is not None:
                        return request
                else:
                    self.reap(int(key.fd))

    def fork(self, conn: socket.socket) -> _Request | None:
        """Fork a child for the launcher on ``conn``; the child gets its request back."""
        request = self.receive(conn)
        if request is None:
            conn.close()  # the launcher sees end-of-file and fails loudly
            return None
        child = os.fork()
        if child == 0:
            self.forget(conn)
            return request
        for fd in [*request.fds, request.launcher]:
            os.close(fd)
        pidfd = os.pidfd_open(child)
        with contextlib.suppress(OSError):  # a launcher gone already: its child sees that and dies
            # The launcher passes SIGTERM and SIGINT on through this pidfd (no pid to be reused).
            socket.send_fds(conn, [b"started\n"], [pidfd])
        self.running[pidfd] = (child, conn)
        self.names[pidfd] = os.path.basename(request.argv[0])
        self.selector.register(pidfd, selectors.EVENT_READ, "child")
        return None

    def receive(self, conn: socket.socket) -> _Request | None:
        """The launcher's request and descriptors, or None if it is malformed or the peer left."""
        fds: list[int] = []
        conn.settimeout(HANDSHAKE_TIMEOUT)
        try:
            message, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
            if len(message) < 4 or len(fds) != 3:
                raise ValueError("a request is its length, its JSON and three descriptors")
            (length,) = struct.unpack("!I", message[:4])
            body = message[4:]
            while len(body) < length:
                chunk = conn.recv(length - len(body))
                if not chunk:
                    raise ValueError("the launcher left mid-request")
                body += chunk
            fields = json.loads(body)
            # The kernel's word for who is connected, not the request's.
            pid, _, _ = struct.unpack("3i", conn.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, 12))
            # Opened before the fork: the launcher is alive (blocked on this connection) now.
            launcher = os.pidfd_open(pid)
        except (OSError, ValueError) as exc:
            for fd in fds:
                os.close(fd)
            sys.stderr.write(f"zygote: a launch request was dropped: {exc}\n")
            return None
        conn.settimeout(None)
        return _Request(list(fields["argv"]), dict(fields["env"]), str(fields["cwd"]), fds, launcher)

    def reap(self, pidfd: int) -> None:
        """A child ended: tell its launcher how (exit code, or -signal) and forget it."""
        pid, conn = self.running.pop(pidfd)
        self.selector.unregister(pidfd)
        os.close(pidfd)
        _, status, usage = os.wait4(pid, 0)
        if LOG:  # what each child cost, to measure what is left (CONTRIBUTING.md)
            with open(LOG, "a", encoding="utf-8") as log:
                log.write(f"{usage.ru_utime + usage.ru_stime:.3f} {self.names.pop(pidfd)}\n")
        with contextlib.suppress(OSError):  # the launcher is gone; the child saw that and died
            conn.sendall(json.dumps({"code": os.waitstatus_to_exitcode(status)}).encode() + b"\n")
        conn.close()

    def forget(self, conn: socket.socket) -> None:
        """In a child: close what the zygote holds (its socket, the other children's pidfds)."""
        self.selector.close()
        self.listener.close()
        conn.close()
        for pidfd, (_, other) in self.running.items():
            os.close(pidfd)
            other.close()
        self.running.clear()
        self.names.clear()

    def stop(self) -> None:
        """Kill and reap what still runs (their launchers fail loudly)."""
        for pidfd in list(self.running):
            os.kill(self.running[pidfd][0], signal.SIGKILL)
            self.reap(pidfd)


def _watch(launcher: int) -> None:
    """In a child: die with the launcher, as a process dies when it is killed."""
    poller = select.poll()
    poller.register(launcher, select.POLLIN)
    poller.poll()
    os.kill(os.getpid(), signal.SIGKILL)


def become(request: _Request) -> None:
    """In a child: take the launcher's descriptors, environment, directory and command line."""
    # The watcher blocks every signal (a thread inherits its starter's mask): a signal sent to
    # the child lands on its main thread, whose handlers run at once, as in a one-thread process.
    unmasked = signal.pthread_sigmask(signal.SIG_BLOCK, signal.valid_signals())
    try:
        threading.Thread(target=_watch, args=(request.launcher,), name="zygote-watch", daemon=True).start()
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, unmasked)
    for target, fd in enumerate(request.fds):
        os.dup2(fd, target)
        os.close(fd)
    os.chdir(request.cwd)
    os.environ.clear()
    os.environ.update(request.env)
    script = request.argv[0]
    sys.argv = list(request.argv)
    # The path a fresh ``python SCRIPT`` would have: its folder, the launcher's PYTHONPATH, then
    # the interpreter's own entries (the zygote's, less its folder and its PYTHONPATH).
    sys.path[:] = [os.path.dirname(os.path.abspath(script)), *_python_path(request.env), *_BASE_PATH]
    # Fresh standard streams over the new descriptors, buffered as at a normal start.
    encoding = sys.stdout.encoding
    sys.stdin = sys.__stdin__ = open(0, encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stdout = sys.__stdout__ = open(1, "w", encoding=encoding, closefd=False)  # noqa: SIM115
    sys.stderr = sys.__stderr__ = open(  # noqa: SIM115
        2, "w", encoding=encoding, errors="backslashreplace", closefd=False, buffering=1
    )


def _python_path(env: dict[str, str]) -> list[str]:
    return [entry for entry in env.get("PYTHONPATH", "").split(os.pathsep) if entry]


_BASE_PATH = [entry for entry in sys.path[1:] if entry not in _python_path(dict(os.environ))]


def serve(path: str, preload: Sequence[str]) -> _Request | None:
    """Import ``preload``, listen on ``path``, say ``ready`` on stdout, then serve (`_Server`)."""
    for name in preload:
        importlib.import_module(name)
    if threading.active_count() != 1:
        raise SystemExit(f"zygote: preloading {list(preload)} started a thread; a fork would copy it")
    # Out of the collector's sight: a collection in a child would touch, so copy, every page.
    gc.freeze()
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(128)
    os.write(1, b"ready\n")
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # the starter stops reading; nothing of ours goes there
    os.close(devnull)
    return _Server(listener).run()


class Zygote:
    """A zygote process preloading ``preload``; `command` is how a test starts a child of it."""

    def __init__(self, preload: Sequence[str]) -> None:
        self.directory: str | None = tempfile.mkdtemp(prefix="zygote-")
        self.socket = os.path.join(self.directory, "socket")
        self.process: subprocess.Popen[bytes] | None = subprocess.Popen(
            [sys.executable, __file__, self.socket, *preload], stdin=subprocess.PIPE, stdout=subprocess.PIPE
        )
        assert self.process.stdout is not None
        ready = self.process.stdout.readline()
        self.process.stdout.close()
        if ready != b"ready\n":
            self.stop()
            raise RuntimeError(f"the zygote preloading {list(preload)} did not start")

    @classmethod
    def attached(cls, socket: str) -> Zygote:
        """Another process's zygote listening on ``socket``: launched from, never stopped here."""
        zygote = cls.__new__(cls)
        zygote.directory, zygote.socket, zygote.process = None, socket, None
        return zygote

    def command(self, script: str | os.PathLike[str], *args: str) -> list[str]:
        """The command line of a child running ``python SCRIPT ARGS...``, forked by this zygote."""
        if self.process is not None and self.process.poll() is not None:
            raise RuntimeError(f"the zygote died (exit {self.process.returncode})")
        return [sys.executable, "-I", "-S", str(LAUNCHER), self.socket, str(script), *args]

    def stop(self, timeout: float = 30.0) -> None:
        """Close its stdin (it kills and reaps what still runs, then exits) and wait for it."""
        if self.process is None:  # attached: its owner stops it
            return
        if self.process.stdin is not None:
            self.process.stdin.close()
        try:
            self.process.wait(timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)


#: The ``toolbox`` console script of this environment, and what its commands import (also
#: lazily, as ``toolbox mcp serve`` runs).
TOOLBOX = Path(sys.executable).with_name("toolbox")
TOOLBOX_PRELOAD = (
    "toolbox.cli",
    "toolbox.mcp._stdio",
    "toolbox.mcp._server",
    "toolbox.audit.sinks._jsonl",
    "toolbox.cli._serve",
    "toolbox.cli._workers",  # `toolbox serve --workers` (imported there, not with the parser)
    "anyio._backends._asyncio",
    "uvicorn",
    # `toolbox serve`: the service and its console
    "toolbox.service",
    "fastapi.templating",
    # `toolbox kill` on the shared state stores
    "toolbox.state._redis_backend",
    "toolbox.state._sql_backend",
    "redis",
    "psycopg",
    "sqlalchemy.dialects.postgresql.psycopg",
    "sqlalchemy.dialects.sqlite.pysqlite",
    # The providers the commands discover through their entry points.
    "toolbox_fs.plugin",
    "toolbox_http.plugin",
    "toolbox_mcp.plugin",
    "toolbox_sandbox.plugin",
    "toolbox_sql.plugin",
)


def toolbox_command(*args: str) -> list[str]:
    """``toolbox ARGS...``: the console script, run by a child of the zygote preloading the CLI."""
    return shared(*TOOLBOX_PRELOAD).command(TOOLBOX, *args)


#: What an MCP server written with the SDK's `MCPServer` imports (also lazily, as it runs).
MCP_SERVER_PRELOAD = ("mcp.server.mcpserver", "mcp.types", "anyio._backends._asyncio", "rich.logging")


def python_executable(directory: Path, *preload: str) -> Path:
    """A ``python`` in ``directory`` that runs ``python SCRIPT.py ARGS...`` as a child of the
    zygote preloading ``preload``, and any other command line with this interpreter itself.

    For code that starts Python scripts with ``sys.executable`` (an example starting its MCP
    server): point ``sys.executable`` at it, and each script is forked instead of started cold.
    """
    *launch, _ = shared(*preload).command("SCRIPT")
    path = directory / "python"
    path.write_text(
        f'#!/bin/sh\ncase "$1" in *.py) exec {shlex.join(launch)} "$@" ;; esac\n'
        f'exec {shlex.quote(sys.executable)} "$@"\n',
        encoding="utf-8",
    )
    path.chmod(0o755)
    return path


_SHARED: dict[tuple[str, ...], Zygote] = {}
_LOCK = threading.Lock()
#: The zygotes started for the pytest workers: preload (one module per line) -> socket, as JSON;
#: the workers inherit the environment of the process that started them.
WORKERS_ENV = "TOOLBOX_TEST_ZYGOTES"


def shared(*preload: str) -> Zygote:
    """This process's zygote preloading ``preload``: the one started for every pytest worker
    (`serve_workers`), else its own, started on first use."""
    with _LOCK:
        zygote = _SHARED.get(preload)
        if zygote is None:
            socket = json.loads(os.environ.get(WORKERS_ENV, "{}")).get("\n".join(preload))
            if socket is not None:
                zygote = _SHARED[preload] = Zygote.attached(socket)
                return zygote
            if not _SHARED:
                atexit.register(stop_all)  # outside pytest; its session's end calls it first
            zygote = _SHARED[preload] = Zygote(preload)
        return zygote


#: A forked child's copies of its parent's zygotes, kept so they are never finalized here.
_INHERITED: list[Zygote] = []


def _forget_inherited() -> None:
    """In a forked child: the zygotes in `_SHARED` are the parent's to stop; it attaches to them."""
    _INHERITED.extend(_SHARED.values())
    for preload, zygote in _SHARED.items():
        _SHARED[preload] = Zygote.attached(zygote.socket)


os.register_at_fork(after_in_child=_forget_inherited)


def serve_workers(*preloads: Sequence[str]) -> None:
    """Before the pytest workers start (xdist's controller, or the process that forks them): one
    zygote per preload for all of them (each worker starting its own paid ~2.3 s of CPU for the
    same imports).

    A child still lives and dies with the launcher its test started (a child of the worker);
    the controller stops the zygotes when its session ends, after every worker's.
    """
    sockets = {"\n".join(preload): shared(*preload).socket for preload in preloads}
    os.environ[WORKERS_ENV] = json.dumps(sockets)


def stop_all() -> None:
    """Stop every zygote `shared` started (the root conftest.py calls it when the session ends)."""
    with _LOCK:
        for zygote in _SHARED.values():
            zygote.stop()
        _SHARED.clear()


def run(request: _Request) -> None:
    """In a child: run the script as ``__main__``, then exit as the interpreter would."""
    become(request)
    code, signal_number = 0, 0
    try:
        runpy.run_path(request.argv[0], run_name="__main__")
    except SystemExit as exc:
        code = exc.code if isinstance(exc.code, int) else 0 if exc.code is None else 1
        if not isinstance(exc.code, (int, type(None))):
            print(exc.code, file=sys.stderr)
    except KeyboardInterrupt:
        traceback.print_exc()
        signal_number = signal.SIGINT  # the interpreter dies of SIGINT then
    except BaseException:
        traceback.print_exc()
        code = 1
    _exit(code, signal_number)


def _exit(code: int, signal_number: int = 0) -> None:
    """Python's shutdown up to the point that matters, then the exit itself.

    The threads are joined, the ``atexit`` functions run and the standard streams flushed, as
    at any exit; tearing down every module and object is skipped: in a forked child it would
    touch (so copy) every page of the zygote's heap, ~0.2 s of CPU per child for nothing.
    """
    threading._shutdown()  # type: ignore[attr-defined]  # joins non-daemon threads, as at exit
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except OSError:
            code = code or 120  # what the interpreter exits with when the final flush fails
    if signal_number:
        signal.signal(signal_number, signal.SIG_DFL)
        os.kill(os.getpid(), signal_number)
    os._exit(code & 0xFF)  # as the status the kernel keeps


if __name__ == "__main__":
    child = serve(sys.argv[1], sys.argv[2:])
    if child is not None:
        run(child)
