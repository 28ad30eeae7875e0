"""The bubblewrap command line of one run: namespaces, the root view, scratch, inputs, the init.

Every namespace bubblewrap offers is new (user, mount, PID, IPC, UTS, network,
cgroup); nested user namespaces are disabled; the code runs as uid and gid
1000 inside, with no capabilities and ``no_new_privs``, in a new session
(no terminal to inject into), and dies with the supervisor. The root is an
empty tmpfs made read-only after the mounts; ``/scratch`` is the only writable
place (unless the profile lists ``read_write`` directories).
"""

from __future__ import annotations

import posixpath
from dataclasses import dataclass
from typing import Literal, final

from toolbox_sandbox._init import INIT_PATH
from toolbox_sandbox._profile import SandboxProfile
from toolbox_sandbox._root import RootView

__all__ = ["PROXY_PORT", "Inputs", "bwrap_command"]


#: The port of the egress relay on the sandbox's own loopback.
PROXY_PORT = 3128
_SANDBOX_ID = "1000"
# A minimal /dev: the five harmless devices and the descriptor links, no terminal, no /dev/shm.
_DEV = ["--size", "65536", "--tmpfs", "/dev"]
for _device in ("null", "zero", "full", "random", "urandom"):
    _DEV += ["--dev-bind", f"/dev/{_device}", f"/dev/{_device}"]
for _index, _stream in enumerate(("stdin", "stdout", "stderr")):
    _DEV += ["--symlink", f"/proc/self/fd/{_index}", f"/dev/{_stream}"]
_DEV += ["--symlink", "/proc/self/fd", "/dev/fd"]


@final
@dataclass(frozen=True)
class Inputs:
    """Descriptors bubblewrap reads while it builds the sandbox, and where the export stream goes."""

    init_fd: int
    code_fd: int | None
    files: tuple[tuple[int, str], ...]
    seccomp_fd: int | None
    status_fd: int
    export_fd: int
    proxy_socket: str | None


def _file_mounts(files: tuple[tuple[int, str], ...]) -> list[str]:
    arguments: list[str] = []
    made: set[str] = set()
    for fd, name in files:
        parent = posixpath.dirname(name)
        chain = []
        while parent and parent not in made:
            chain.append(parent)
            parent = posixpath.dirname(parent)
        for directory in reversed(chain):
            made.add(directory)
            arguments += ["--dir", f"/scratch/{directory}"]
        arguments += ["--file", str(fd), f"/scratch/{name}"]
    return arguments


def bwrap_command(
    bwrap: str,
    profile: SandboxProfile,
    view: RootView,
    inputs: Inputs,
    *,
    mode: Literal["python", "run"],
    argv: tuple[str, ...] = (),
) -> list[str]:
    """The full argv: bubblewrap's options, then the interpreter running the compiled init."""
    limits = profile.limits
    environment = dict(profile.env)
    if inputs.proxy_socket is not None:
        proxy = f"http://127.0.0.1:{PROXY_PORT}"
        for name in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            environment[name] = proxy
    command = [
        bwrap,
        "--unshare-all",
        "--unshare-user",
        "--disable-userns",
        "--uid",
        _SANDBOX_ID,
        "--gid",
        _SANDBOX_ID,
        "--hostname",
        "sandbox",
        "--die-with-parent",
        # The init runs as PID 1 itself: bubblewrap then waits for it, so the CPU time of every
        # process of the run reaches the supervisor; when it ends the kernel ends the rest.
        "--as-pid-1",
        "--new-session",
        "--clearenv",
        "--json-status-fd",
        str(inputs.status_fd),
    ]
    for name, value in sorted(environment.items()):
        command += ["--setenv", name, value]
    command += view.arguments
    for path in profile.read_write:
        command += ["--bind", path, path]
    command += ["--proc", "/proc", *_DEV]
    command += ["--size", str(limits.scratch_bytes), "--tmpfs", "/scratch"]
    command += _file_mounts(inputs.files)
    # Copied into the root (a tmpfs), which is remounted read-only below: no mount of their own.
    command += ["--file", str(inputs.init_fd), INIT_PATH]
    if inputs.code_fd is not None:
        command += ["--file", str(inputs.code_fd), "/sandbox/main.py"]
    if inputs.proxy_socket is not None:
        command += ["--ro-bind", inputs.proxy_socket, "/run/egress.sock"]
    if inputs.seccomp_fd is not None:
        command += ["--seccomp", str(inputs.seccomp_fd)]
    for read_only in ("/dev", *view.masks, "/"):
        command += ["--remount-ro", read_only]
    command += ["--chdir", "/scratch"]
    rlimits = (
        limits.cpu_seconds,
        limits.memory_bytes,
        limits.processes,
        limits.open_files,
        limits.file_bytes,
    )
    port = PROXY_PORT if inputs.proxy_socket is not None else 0
    command += [
        profile.python,
        "-I",
        "-S",
        "-B",
        INIT_PATH,
        mode,
        ",".join(str(v) for v in rlimits),
        f"{limits.export_files},{limits.export_bytes}",
        "\n".join(profile.exports),
        str(port),
        str(inputs.export_fd),
        *argv,
    ]
    return command
