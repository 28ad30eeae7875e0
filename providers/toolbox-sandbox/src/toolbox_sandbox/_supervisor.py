"""The supervisor: start bubblewrap, drain its output with caps, keep the clock, kill, reap.

It runs in the calling thread. bubblewrap is started in a new session with an
empty environment and no descriptors but the ones listed; stdout, stderr, the
export stream and bubblewrap's status are read together, each capped. When the
wall limit passes or a cap is exceeded, the whole process group is killed:
bubblewrap's init is in it, and when the init of a PID namespace dies the
kernel kills every process left in it, so nothing the code started (a daemon,
a zombie's children) outlives the call. The run is always reaped, with its
CPU time, before the function returns, whatever happened (even an exception in
the supervisor itself).
"""

from __future__ import annotations

import contextlib
import os
import re
import select
import signal
import subprocess
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import IO, final

from toolbox_sandbox._exports import MAX_NAME_BYTES
from toolbox_sandbox._limits import LimitName, Limits

__all__ = ["SETPRIV", "UNSHARE", "Finished", "Pipes", "supervise"]

#: util-linux's unshare, which starts bubblewrap as a run's fresh user (when toolbox is root): with
#: no namespace option it only drops the supplementary groups and sets the group and user ids.
UNSHARE = "/usr/bin/unshare"
#: util-linux's setpriv, used instead where unshare is missing (it looks the ids up through NSS
#: first, loading the host's NSS modules: about a millisecond more per run).
SETPRIV = "/usr/bin/setpriv"

_CHUNK = 65536
_STATUS_CAP = 64 * 1024
_KILL_GRACE = 2.0
_CHILD_PID = re.compile(rb'"child-pid"\s*:\s*(\d+)')


@final
@dataclass
class Finished:
    """What the supervisor saw of one run."""

    returncode: int | None
    stdout: bytes
    stderr: bytes
    stdout_truncated: bool
    stderr_truncated: bool
    exports: bytes
    status: bytes
    wall_seconds: float
    cpu_seconds: float
    killed_for: LimitName | None


@final
@dataclass
class Pipes:
    """The read ends the supervisor drains, and the child's write ends, which it closes (and
    removes from the list) once the child has them."""

    status_read: int
    export_read: int
    child_side: list[int] = field(default_factory=list)


@final
class _Stream:
    __slots__ = ("cap", "chunks", "kept", "limit", "truncated")

    def __init__(self, cap: int, limit: LimitName) -> None:
        self.cap, self.limit = cap, limit
        self.chunks: list[bytes] = []
        self.kept = 0
        self.truncated = False

    def add(self, data: bytes) -> bool:
        """Keep ``data`` up to the cap; False once the cap is exceeded."""
        room = self.cap - self.kept
        if len(data) > room:
            self.chunks.append(data[:room])
            self.kept = self.cap
            self.truncated = True
            return False
        self.chunks.append(data)
        self.kept += len(data)
        return True

    def value(self) -> bytes:
        return b"".join(self.chunks)


@final
class _Init:
    """The sandbox's init (PID 1 inside), held by a pidfd once bubblewrap names it: killing it ends
    the PID namespace, and bubblewrap, which waits for it, exits with every process's CPU time."""

    __slots__ = ("pidfd", "seen")

    def __init__(self) -> None:
        self.pidfd: int | None = None
        self.seen = b""

    def learn(self, status: bytes) -> None:
        if self.pidfd is not None:
            return
        self.seen += status
        match = _CHILD_PID.search(self.seen)
        if match is not None:
            with contextlib.suppress(OSError):
                self.pidfd = os.pidfd_open(int(match.group(1)))

    def kill(self) -> bool:
        if self.pidfd is None:
            return False
        try:
            signal.pidfd_send_signal(self.pidfd, signal.SIGKILL)
        except OSError:
            return False
        return True

    def close(self) -> None:
        if self.pidfd is not None:
            os.close(self.pidfd)
            self.pidfd = None


def _kill(pid: int, init: _Init) -> tuple[int, float]:
    """Kill the run and reap bubblewrap: through the init first (CPU time kept), else the group."""
    if init.kill():
        reaped = _reap(pid, time.monotonic() + _KILL_GRACE)
        if reaped is not None:
            return reaped
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    return status, usage.ru_utime + usage.ru_stime


def _reap(pid: int, deadline: float) -> tuple[int, float] | None:
    """Wait for ``pid`` until ``deadline``: its wait status and CPU seconds, or None if still running.

    The wait is on a pidfd (readable when the process ends), so an ended run is reaped at once.
    """
    with contextlib.suppress(ChildProcessError):
        found, status, usage = os.wait4(pid, os.WNOHANG)
        if found == pid:
            return status, usage.ru_utime + usage.ru_stime
    pidfd = os.pidfd_open(pid)
    try:
        select.select([pidfd], [], [], max(0.0, deadline - time.monotonic()))
        found, status, usage = os.wait4(pid, os.WNOHANG)
    finally:
        os.close(pidfd)
    return (status, usage.ru_utime + usage.ru_stime) if found == pid else None


def _drain(streams: dict[int, _Stream], status_fd: int, init: _Init, deadline: float) -> LimitName | None:
    """Read every stream until all end; the limit that made it stop early, if one did.

    A plain ``poll`` (no ``selectors`` object, no epoll descriptor): a run wakes it a handful of
    times, and each wake-up is on the call's path.
    """
    poller = select.poll()
    for fd in streams:
        poller.register(fd, select.POLLIN)
    left_open = len(streams)
    while left_open:
        left = deadline - time.monotonic()
        if left <= 0:
            return "wall_time"
        for fd, _ in poller.poll(left * 1000):  # milliseconds, rounded up
            data = os.read(fd, _CHUNK)
            if not data:  # the end of the stream (POLLHUP reads as empty)
                poller.unregister(fd)
                left_open -= 1
                continue
            if fd == status_fd:
                init.learn(data)
            if not streams[fd].add(data):
                return streams[fd].limit
    return None


def supervise(
    command: Sequence[str],
    *,
    stdin_fd: int,
    pass_fds: Sequence[int],
    pipes: Pipes,
    identity: tuple[int, int] | None,
    limits: Limits,
) -> Finished:
    """Run ``command`` to its end or its limit and return what it produced."""
    started = time.monotonic()
    deadline = started + limits.wall_seconds
    argv, switch = _as_user(command, identity)
    try:
        process = subprocess.Popen(  # noqa: S603 - an argv list, built by _command
            argv,
            stdin=stdin_fd,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env={},
            close_fds=True,
            pass_fds=tuple(pass_fds),
            start_new_session=True,
            user=None if switch is None else switch[0],
            group=None if switch is None else switch[1],
            extra_groups=None if switch is None else [],
        )
    finally:
        # Only the child may hold the write ends: the streams end when the sandbox does.
        for fd in pipes.child_side:
            os.close(fd)
        pipes.child_side.clear()
    stdout, stderr = _pipe(process.stdout), _pipe(process.stderr)
    streams = {
        stdout: _Stream(limits.output_bytes, "output"),
        stderr: _Stream(limits.output_bytes, "output"),
        pipes.export_read: _Stream(_export_cap(limits), "exports"),
        pipes.status_read: _Stream(_STATUS_CAP, "output"),
    }
    killed_for: LimitName | None = None
    reaped: tuple[int, float] | None = None
    init = _Init()
    try:
        killed_for = _drain(streams, pipes.status_read, init, deadline)
        if killed_for is None:
            reaped = _reap(process.pid, deadline)
            if reaped is None:
                killed_for = "wall_time"
    finally:
        if reaped is None:
            reaped = _kill(process.pid, init)
        init.close()
        process.returncode = os.waitstatus_to_exitcode(reaped[0])
        for pipe in (process.stdout, process.stderr):
            if pipe is not None:
                pipe.close()
    out, err = streams[stdout], streams[stderr]
    return Finished(
        returncode=None if killed_for is not None else process.returncode,
        stdout=out.value(),
        stderr=err.value(),
        stdout_truncated=out.truncated,
        stderr_truncated=err.truncated,
        exports=streams[pipes.export_read].value(),
        status=streams[pipes.status_read].value(),
        wall_seconds=time.monotonic() - started,
        cpu_seconds=reaped[1],
        killed_for=killed_for,
    )


def _as_user(
    command: Sequence[str], identity: tuple[int, int] | None
) -> tuple[list[str], tuple[int, int] | None]:
    """The argv that starts ``command`` as ``identity``, and the ids Popen must switch to itself.

    util-linux's ``unshare`` (or ``setpriv``) switches in the child: Popen then starts it with
    vfork, where switching ids itself would make it copy the whole (large) calling process with
    fork. Either program sets the real, effective and saved ids and leaves no supplementary group.
    """
    if identity is None:
        return list(command), None
    uid, gid = identity
    if os.access(UNSHARE, os.X_OK):
        return [UNSHARE, f"--setgid={gid}", f"--setuid={uid}", "--", *command], None
    if os.access(SETPRIV, os.X_OK):
        return [SETPRIV, f"--reuid={uid}", f"--regid={gid}", "--clear-groups", "--", *command], None
    return list(command), identity


def _pipe(stream: IO[bytes] | None) -> int:
    if stream is None:  # pragma: no cover - stdout and stderr are always pipes here
        raise RuntimeError("expected a pipe")
    return stream.fileno()


def _export_cap(limits: Limits) -> int:
    # The content, plus each file's record header (type, name length, name, size), plus the markers.
    return limits.export_bytes + limits.export_files * (1 + 2 + MAX_NAME_BYTES + 8) + 16
