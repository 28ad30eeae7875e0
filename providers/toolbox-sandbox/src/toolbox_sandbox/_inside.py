"""The first code that runs inside the sandbox (``python -I -S -B /sandbox/init.pyc``), before the caller's.

It is never imported on the host: the profile's interpreter compiles its text
once (`toolbox_sandbox._init`) and every run loads that bytecode. It sets the
resource limits (hard and soft, so nothing later can raise them), then runs
the caller's Python in a fresh ``__main__`` module, or starts the caller's
program and waits for it, writes the exported files to the export descriptor,
and ends without the interpreter's teardown (`_end`). It runs as the same
sandboxed user as the code that follows it, so the supervisor trusts nothing it
writes: the export stream is parsed with caps, and a forged stream can only lie
about the run itself.

Arguments after the init's path: mode (``python`` or ``run``), the limits as
``cpu,memory,processes,open_files,file_bytes``, the export caps as
``files,bytes``, the export patterns joined by newlines, the proxy port (0:
none), the export descriptor, then for ``run`` the program's argv. Stdlib only, Python 3.8 and later.
"""

from __future__ import annotations

# Only what every run needs is imported here, each paid at every start: posix and sys are built
# in (``os`` is not loaded under -S and costs milliseconds); the rest is imported where it is used.
import posix
import sys

_CODE = "/sandbox/main.py"
_SCRATCH = "/scratch"
_PROXY_SOCKET = "/run/egress.sock"


def _limit(cpu: int, memory: int, processes: int, open_files: int, file_bytes: int) -> None:
    import resource

    r = resource
    r.setrlimit(r.RLIMIT_CORE, (0, 0))
    r.setrlimit(r.RLIMIT_CPU, (cpu, cpu))  # as PID 1 SIGXCPU is ignored: the hard limit's SIGKILL
    r.setrlimit(r.RLIMIT_AS, (memory, memory))
    r.setrlimit(r.RLIMIT_NPROC, (processes, processes))
    r.setrlimit(r.RLIMIT_NOFILE, (open_files, open_files))
    r.setrlimit(r.RLIMIT_FSIZE, (file_bytes, file_bytes))


def _forward(port: int) -> None:
    """Relay 127.0.0.1:port (the sandbox's own loopback) to the supervisor's egress proxy socket."""
    import contextlib
    import socket
    import threading

    def shutdown(end: socket.socket) -> None:
        with contextlib.suppress(OSError):
            end.shutdown(socket.SHUT_RDWR)

    def relay(a: socket.socket, b: socket.socket) -> None:
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        finally:
            shutdown(a)
            shutdown(b)

    listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    listener.bind(("127.0.0.1", port))
    listener.listen(16)

    def serve() -> None:
        while True:
            client, _ = listener.accept()
            upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                upstream.connect(_PROXY_SOCKET)
            except OSError:
                client.close()
                upstream.close()
                continue
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=relay, args=(a, b), daemon=True).start()

    threading.Thread(target=serve, daemon=True).start()


def _matches(path: str, patterns: list[str]) -> bool:
    from fnmatch import fnmatchcase

    return any(fnmatchcase(path, p) for p in patterns)


def _read_regular(full: str, budget: int) -> bytes | None:
    """The content of the regular file ``full`` (never through a link); None to skip it.

    Raises OverflowError when it is larger than ``budget``."""
    import os

    try:
        fd = os.open(full, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        info = os.fstat(fd)
        if info.st_mode & 0o170000 != 0o100000:  # regular files only
            return None
        if info.st_size > budget:
            raise OverflowError(full)
        data = b""
        while len(data) < info.st_size:
            chunk = os.read(fd, info.st_size - len(data))
            if not chunk:
                break
            data += chunk
        return data
    finally:
        os.close(fd)


def _export(patterns: list[str], max_files: int, max_bytes: int, memory_error: bool) -> list[bytes]:
    import os
    import struct

    out = [b"M"] if memory_error else []
    found: list[tuple[str, bytes]] = []
    for top, _, files in os.walk(_SCRATCH):
        for name in files:
            rel = os.path.relpath(os.path.join(top, name), _SCRATCH)
            name_bytes = rel.encode("utf-8", "surrogateescape")
            if len(name_bytes) <= 1024 and _matches(rel, patterns):  # _exports.MAX_NAME_BYTES
                found.append((rel, name_bytes))
    budget, count = max_bytes, 0
    for rel, name_bytes in sorted(found):
        try:
            data = _read_regular(os.path.join(_SCRATCH, rel), budget)
        except OverflowError:
            data, count = b"", max_files  # over the byte cap: the export ends here
        if data is None:
            continue
        if count >= max_files:
            out.append(b"T")
            break
        out.append(b"F" + struct.pack(">H", len(name_bytes)) + name_bytes)
        out.append(struct.pack(">Q", len(data)) + data)
        budget -= len(data)
        count += 1
    return out


def _write_exports(fd: int, chunks: list[bytes]) -> None:
    try:
        for chunk in [*chunks, b"E"]:
            view = memoryview(chunk)
            while view:
                view = view[posix.write(fd, view) :]
        posix.close(fd)
    except OSError:
        pass


def _report(error: BaseException) -> None:
    # The traceback as Python prints it, without this file's frame.
    trace = error.__traceback__
    error = error.with_traceback(trace.tb_next if trace is not None else None)
    sys.excepthook(type(error), error, error.__traceback__)


def _run_python() -> tuple[int, bool]:
    main = type(sys)("__main__")
    main.__file__ = _CODE
    sys.modules["__main__"] = main
    sys.argv = [_CODE]
    try:
        with open(_CODE, "rb") as source:
            code = compile(source.read(), _CODE, "exec")
        exec(code, main.__dict__)  # noqa: S102 - running the caller's code is the point
    except SystemExit:
        raise
    except MemoryError as error:
        _report(error)
        return 1, True
    except BaseException as error:  # noqa: BLE001 - reported as Python would, then exit 1
        _report(error)
        return 1, False
    return 0, False


def _run_program(argv: list[str], export_fd: int) -> int:
    import os

    os.set_inheritable(export_fd, False)
    pid = os.posix_spawn(argv[0], argv, dict(os.environ))
    _, status = os.waitpid(pid, 0)
    if os.WIFSIGNALED(status):
        return 128 + os.WTERMSIG(status)
    return os.WEXITSTATUS(status)


def _exit_status(code: object) -> int:
    """The status Python's own exit gives ``SystemExit(code)``; a message goes to stderr."""
    if code is None:
        return 0
    if isinstance(code, int):
        return code & 0xFF
    stream = sys.stderr
    if stream is not None and not stream.closed:  # as Python's exit: else the message is dropped
        stream.write(f"{code}\n")
    return 1


def _end(status: int) -> None:
    """End the process as Python's exit would, without tearing down the objects still alive.

    Non-daemon threads are waited for and the ``atexit`` handlers run, as at any exit; the
    caller's ``__main__`` is cleared, so what its globals hold is released (a file left open is
    flushed and closed); the standard streams are flushed (status 120 if that fails, as Python's).
    Then ``_exit``: the interpreter's teardown of the rest (about a millisecond, a tenth of the
    start-up) is skipped. Python does not promise to finalize objects alive at exit, and nothing
    else of the process outlives it.
    """
    threading = sys.modules.get("threading")
    shutdown = getattr(threading, "_shutdown", None)
    if shutdown is not None:
        shutdown()
    import atexit

    atexit._run_exitfuncs()
    released = getattr(sys.modules.get("__main__"), "__dict__", None)
    if isinstance(released, dict) and released is not globals():  # the caller's module, not this init's
        released.clear()
    for stream in (sys.stdout, sys.stderr):
        try:
            if stream is not None and not stream.closed:
                stream.flush()
        except Exception:  # noqa: BLE001 - Python's exit status for an unflushable stream
            status = 120
    posix._exit(status)


def main() -> None:
    mode, limits, caps, patterns, port, export_fd = sys.argv[1:7]
    fd = int(export_fd)
    posix.write(fd, b"S")  # the sandbox is built and this init runs: the supervisor's proof of a start
    _limit(*(int(v) for v in limits.split(",")))
    max_files, max_bytes = (int(v) for v in caps.split(","))
    if int(port):
        _forward(int(port))
    status, memory_error = 0, False
    try:
        if mode == "python":
            status, memory_error = _run_python()
        else:
            status = _run_program(sys.argv[7:], fd)
    except SystemExit as stop:
        status = _exit_status(stop.code)
    finally:
        exported = [p for p in patterns.split("\n") if p]
        chunks = _export(exported, max_files, max_bytes, memory_error) if exported or memory_error else []
        _write_exports(fd, chunks)
    _end(status)


if __name__ == "__main__":
    main()
