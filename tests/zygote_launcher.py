"""The process a test starts in place of ``python SCRIPT ARGS...`` when a zygote serves SCRIPT.

Run as ``python -I -S zygote_launcher.py SOCKET SCRIPT [ARGS...]`` (standard library only, a
few milliseconds): it hands its stdin, stdout and stderr, its environment, working directory
and command line to the zygote listening on SOCKET (``tests/zygote.py``), which forks a child
running SCRIPT on those very descriptors. The launcher then waits, passing SIGTERM and SIGINT
on to the child (one that comes before the child's pidfd is held and passed on with it), and
ends as the child ended: the same exit code, or killed by the same signal. If the zygote is
gone (nothing listening, or the connection drops before the child's status arrives) it says
so on stderr and exits 70: loudly, never a hang. The child watches this process and is
killed when it dies, even by SIGKILL, so for whoever started the launcher it is the server.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import struct
import sys

#: The launcher's own exit code when the zygote cannot be reached or goes away (EX_SOFTWARE).
ZYGOTE_GONE = 70


def fail(message: str) -> None:
    sys.stderr.write(f"zygote launcher: {message}\n")
    sys.stderr.flush()
    os._exit(ZYGOTE_GONE)


#: SIGTERM and SIGINT that came before the child's pidfd: passed on as soon as it arrives.
held: list[int] = []


def hold(number: int, _: object) -> None:
    held.append(number)


def pass_on(child: int) -> None:
    """From now on, SIGTERM and SIGINT go to the child (``child``: its pidfd), which decides;
    those held until now go first."""

    def forward(number: int, _: object) -> None:
        try:  # noqa: SIM105 - contextlib would add ~10 ms to every launch
            signal.pidfd_send_signal(child, number)
        except ProcessLookupError:  # it has just ended: its status is on its way
            pass

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    while held:
        forward(held.pop(0), None)


def main() -> None:
    if len(sys.argv) < 3:
        fail("usage: zygote_launcher.py SOCKET SCRIPT [ARGS...]")
    path, argv = sys.argv[1], sys.argv[2:]
    # The child may be running (its output read, a signal sent for it) before its pidfd reaches
    # us: a signal then is held for it, whatever this process inherited (a starter in the
    # background ignores SIGINT; a signal ignored here would be lost, and the child never stop).
    signal.signal(signal.SIGTERM, hold)
    signal.signal(signal.SIGINT, hold)
    request = json.dumps({"argv": argv, "env": dict(os.environ), "cwd": os.getcwd()}).encode()
    channel = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        channel.connect(path)
        # One message: its length, the request, and our three standard descriptors.
        socket.send_fds(channel, [struct.pack("!I", len(request)) + request], [0, 1, 2])
    except OSError as exc:
        fail(f"the zygote at {path} cannot be reached ({exc.strerror or exc})")
    # The child holds stdin and stdout now: drop our copies, so the starter sees end-of-file on
    # stdout as soon as the child exits, as it would with the child itself. stderr stays, for
    # the message above; the launcher exits right after the child anyway.
    devnull = os.open(os.devnull, os.O_RDWR)
    os.dup2(devnull, 0)
    os.dup2(devnull, 1)
    os.close(devnull)
    # Two lines: "started" with a pidfd of the child, then its exit status.
    answer = b""
    while answer.count(b"\n") < 2:
        try:
            chunk, fds, _, _ = socket.recv_fds(channel, 256, 1)
        except InterruptedError:  # pragma: no cover - PEP 475 retries; kept for clarity
            continue
        except OSError:
            chunk, fds = b"", []
        for child in fds:
            pass_on(child)
        if not chunk:
            fail(f"the zygote at {path} went away before the child's exit status")
        answer += chunk
    code = int(json.loads(answer.split(b"\n")[1])["code"])  # waitstatus_to_exitcode: -N for signal N
    if code < 0:
        if -code not in (signal.SIGKILL, signal.SIGSTOP):
            signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
        os._exit(128 - code)  # a signal whose default is not to terminate
    os._exit(code)


if __name__ == "__main__":
    main()
