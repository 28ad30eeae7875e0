"""One sandboxed run, from validated inputs to a `SandboxResult`.

Inputs travel as sealed memory files (``memfd``): the code, stdin and each
input file; bubblewrap copies the code and files into the sandbox while it
builds it, and the code reads stdin from a descriptor it cannot write to.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import os
import signal
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal, final

from toolbox.provider import require_dispatch
from toolbox_sandbox._command import Inputs, bwrap_command
from toolbox_sandbox._errors import SandboxUnavailableError
from toolbox_sandbox._exports import parse_exports
from toolbox_sandbox._identity import run_identity
from toolbox_sandbox._limits import LimitName, Limits
from toolbox_sandbox._profile import SandboxProfile
from toolbox_sandbox._proxy import EgressProxy
from toolbox_sandbox._result import SandboxResult
from toolbox_sandbox._root import RootView, SandboxSetupError, root_view
from toolbox_sandbox._seccomp import filter_program, supported
from toolbox_sandbox._supervisor import Finished, Pipes, supervise

__all__ = ["Request", "execute"]

# The kernel kills at the limit by its precise runtime; the usage the supervisor reads back is
# coarser (tick-sampled, ~10% under here). A SIGKILL or SIGXCPU after half the limit is the limit.
_CPU_TICK_SLACK = 0.5
_SEALS = fcntl.F_SEAL_SEAL | fcntl.F_SEAL_SHRINK | fcntl.F_SEAL_GROW | fcntl.F_SEAL_WRITE


@final
@dataclass(frozen=True)
class Request:
    """A validated call: what to run, under which profile, with which inputs."""

    tool: str
    bwrap: str
    profile_name: str
    profile: SandboxProfile
    mode: Literal["python", "run"]
    code: bytes | None
    argv: tuple[str, ...]
    stdin: bytes
    files: tuple[tuple[str, bytes], ...]


def _sealed(name: str, data: bytes, descriptors: list[int]) -> int:
    fd = os.memfd_create(f"toolbox-sandbox-{name}", os.MFD_CLOEXEC | os.MFD_ALLOW_SEALING)
    descriptors.append(fd)
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]
    os.lseek(fd, 0, os.SEEK_SET)
    fcntl.fcntl(fd, fcntl.F_ADD_SEALS, _SEALS)
    return fd


@functools.lru_cache(maxsize=32)
def _cached_view(
    python: str, version: tuple[str, int], programs: tuple[str, ...], read_only: tuple[str, ...]
) -> RootView:
    return root_view(python, programs, read_only)


def _view(python: str, programs: tuple[str, ...], read_only: tuple[str, ...]) -> RootView:
    """The profile's root, built once per version of its interpreter file (a new one is asked again)."""
    real = os.path.realpath(python)
    try:
        version = os.stat(real).st_mtime_ns
    except OSError:
        version = -1  # root_view names the missing interpreter
    return _cached_view(python, (real, version), programs, read_only)


@contextlib.contextmanager
def _descriptors() -> Iterator[list[int]]:
    opened: list[int] = []
    try:
        yield opened
    finally:
        for fd in opened:
            with contextlib.suppress(OSError):
                os.close(fd)


def _unavailable(request: Request, finished: Finished) -> SandboxUnavailableError:
    lines = [line for line in finished.stderr.decode("utf-8", "replace").splitlines() if line.strip()]
    said = lines[-1][:300] if lines else f"exit status {finished.returncode}"
    return SandboxUnavailableError(
        f"bubblewrap could not build the sandbox of profile {request.profile_name!r}: {said}; "
        "check that user namespaces are enabled and that every path the profile mounts exists "
        "(docs/sandbox.md, 'Requirements')"
    )


def _limit_hit(finished: Finished, limits: Limits, memory: bool, truncated: bool) -> LimitName | None:
    if finished.killed_for is not None:
        return finished.killed_for
    code = finished.returncode
    killed = code in (128 + signal.SIGXCPU, 128 + signal.SIGKILL)
    if killed and finished.cpu_seconds >= limits.cpu_seconds * _CPU_TICK_SLACK:
        return "cpu_time"
    if memory:
        return "memory"
    return "exports" if truncated else None


def execute(request: Request) -> SandboxResult:
    """Run ``request`` in a new sandbox and return its result.

    Raises:
        GovernanceBypassError: called outside the governed chain's dispatch of the tool.
        SandboxUnavailableError: the sandbox could not be built; nothing ran.
    """
    require_dispatch(request.tool)
    profile, limits = request.profile, request.profile.limits
    if not os.access(request.bwrap, os.X_OK):
        raise SandboxUnavailableError(
            f"bubblewrap is not installed at {request.bwrap}: install it (Debian: apt-get install "
            "bubblewrap) or set the sandbox option bwrap to its path"
        )
    try:
        view = _view(profile.python, profile.programs, profile.read_only)
    except SandboxSetupError as exc:
        raise SandboxUnavailableError(str(exc)) from None
    seccomp = supported()
    identity = run_identity()
    with (
        _descriptors() as opened,
        _descriptors() as child_side,
        EgressProxy.for_profile(profile, identity) as proxy,
    ):
        init_fd = _sealed("init", view.init, opened)
        stdin_fd = _sealed("stdin", request.stdin, opened)
        code_fd = _sealed("code", request.code, opened) if request.code is not None else None
        files = tuple((_sealed("file", data, opened), name) for name, data in request.files)
        seccomp_fd = _sealed("seccomp", filter_program(), opened) if seccomp else None
        status_read, status_write = os.pipe()
        opened.append(status_read)
        child_side.append(status_write)
        export_read, export_write = os.pipe()
        opened.append(export_read)
        child_side.append(export_write)
        inputs = Inputs(
            init_fd=init_fd,
            code_fd=code_fd,
            files=files,
            seccomp_fd=seccomp_fd,
            status_fd=status_write,
            export_fd=export_write,
            proxy_socket=proxy.socket_path if proxy is not None else None,
        )
        command = bwrap_command(request.bwrap, profile, view, inputs, mode=request.mode, argv=request.argv)
        passed = [fd for fd in (init_fd, code_fd, seccomp_fd, status_write, export_write) if fd is not None]
        passed += [fd for fd, _ in files]
        pipes = Pipes(status_read, export_read, child_side=child_side)
        finished = supervise(
            command, stdin_fd=stdin_fd, pass_fds=passed, pipes=pipes, identity=identity, limits=limits
        )
        egress = proxy.attempts if proxy is not None else ()
    exports = parse_exports(finished.exports, max_files=limits.export_files, max_bytes=limits.export_bytes)
    if not exports.started and finished.killed_for is None:
        raise _unavailable(request, finished)
    return SandboxResult(
        exit_code=finished.returncode,
        stdout=finished.stdout.decode("utf-8", "replace"),
        stderr=finished.stderr.decode("utf-8", "replace"),
        stdout_truncated=finished.stdout_truncated,
        stderr_truncated=finished.stderr_truncated,
        wall_seconds=round(finished.wall_seconds, 6),
        cpu_seconds=round(finished.cpu_seconds, 6),
        limit=_limit_hit(finished, limits, exports.memory_error, exports.truncated),
        files=tuple(exports.files),
        profile=request.profile_name,
        seccomp=seccomp,
        network=profile.network,
        egress=egress,
    )
