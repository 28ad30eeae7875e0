"""The egress proxy of an ``egress`` profile: the only way out of the sandbox's network namespace.

The sandbox has no network interface but its own loopback. For an ``egress``
profile the supervisor listens on a Unix socket mounted into the sandbox, and
the sandbox's init relays ``127.0.0.1:3128`` (its own loopback) to it; the code
finds it through ``HTTP_PROXY`` / ``HTTPS_PROXY``. The proxy accepts plain HTTP
requests in absolute form and ``CONNECT`` for HTTPS, and before connecting
checks each one with toolbox-http's `EgressPolicy` (scheme, host, port, method:
``CONNECT`` for HTTPS, whose requests it cannot see) and its `AddressGuard`
(resolve once, refuse non-public addresses, connect to the address checked).
Loopback is refused whatever the policy says (the profile refuses it in
``allow_networks``), so the host's own services stay out of reach. Every
attempt is recorded in the result; the bytes relayed are capped per run.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import tempfile
import threading
from collections.abc import Iterator
from typing import Literal, final

import httpx

from toolbox_http import AddressGuard, EgressDeniedError
from toolbox_sandbox._profile import SandboxProfile
from toolbox_sandbox._result import EgressAttempt

__all__ = ["EgressProxy"]

_HEAD_LIMIT = 16 * 1024
_MAX_CONNECTIONS = 16
_MAX_RECORDS = 256
_TIMEOUT = 10.0
#: What a refused client may still send once answered (its request's body), read before closing.
_DRAIN_LIMIT = 1 << 20
_DRAIN_WAIT = 2.0
_HOP_HEADERS = frozenset(
    {"connection", "keep-alive", "proxy-connection", "proxy-authorization", "te", "upgrade"}
)


def _parse_target(method: str, target: str) -> tuple[str, httpx.URL]:
    if method == "CONNECT":
        return "https", httpx.URL(f"https://{target}/")
    url = httpx.URL(target)
    if url.scheme != "http" or not url.host:
        raise ValueError("only absolute http:// URLs and CONNECT are proxied")
    return "http", url


@final
class EgressProxy:
    """A proxy for one run; a context manager (`for_profile`) that stops it and removes its socket."""

    def __init__(self, profile: SandboxProfile, identity: tuple[int, int] | None) -> None:
        self._policy = profile.egress
        self._guard = AddressGuard(profile.egress, tool="sandbox")
        self._budget = profile.limits.egress_bytes
        self._directory = tempfile.mkdtemp(prefix="toolbox-sandbox-")
        self.socket_path = os.path.join(self._directory, "egress.sock")
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.socket_path)
        self._listener.listen(_MAX_CONNECTIONS)
        if identity is not None:  # only the run's user may reach the socket
            os.chown(self._directory, 0, identity[1])
            os.chown(self.socket_path, 0, identity[1])
            os.chmod(self._directory, 0o710)  # noqa: S103 - root and the run's group only
            os.chmod(self.socket_path, 0o660)
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._slots = threading.BoundedSemaphore(_MAX_CONNECTIONS)
        self._records: list[EgressAttempt] = []
        self._stopped = False
        self._thread = threading.Thread(target=self._serve, name="toolbox-sandbox-egress", daemon=True)
        self._thread.start()

    @classmethod
    @contextlib.contextmanager
    def for_profile(
        cls, profile: SandboxProfile, identity: tuple[int, int] | None
    ) -> Iterator[EgressProxy | None]:
        """A running proxy for an ``egress`` profile (None for ``network = "none"``), stopped on exit."""
        if profile.network != "egress":
            yield None
            return
        proxy = cls(profile, identity)
        try:
            yield proxy
        finally:
            proxy.stop()

    @property
    def attempts(self) -> tuple[EgressAttempt, ...]:
        """The connections asked for, in order (at most 256 kept)."""
        with self._lock:
            return tuple(self._records)

    def stop(self) -> None:
        """Close the listener and every relayed connection; remove the socket."""
        with self._lock:
            self._stopped = True
            sockets = [self._listener, *self._open]
        for sock in sockets:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                sock.close()
        self._thread.join(timeout=_TIMEOUT)
        shutil.rmtree(self._directory, ignore_errors=True)

    def _track(self, sock: socket.socket) -> bool:
        with self._lock:
            if self._stopped:
                return False
            self._open.add(sock)
            return True

    def _record(self, attempt: EgressAttempt) -> None:
        with self._lock:
            if len(self._records) < _MAX_RECORDS:
                self._records.append(attempt)

    def _spend(self, count: int) -> bool:
        with self._lock:
            self._budget -= count
            return self._budget >= 0

    def _serve(self) -> None:
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            if not self._slots.acquire(blocking=False) or not self._track(client):
                client.close()
                continue
            threading.Thread(target=self._handle, args=(client,), daemon=True).start()

    def _handle(self, client: socket.socket) -> None:
        upstream: socket.socket | None = None
        try:
            client.settimeout(_TIMEOUT)
            head, rest = self._read_head(client)
            if head is None:
                return
            upstream, reply = self._open_upstream(client, head)
            if upstream is None:
                return
            if reply:
                client.sendall(reply)
            elif rest:
                upstream.sendall(rest)
            self._relay(client, upstream)
        except OSError:
            pass
        finally:
            for sock in (client, upstream):
                if sock is not None:
                    with contextlib.suppress(OSError):
                        sock.close()
                    with self._lock:
                        self._open.discard(sock)
            self._slots.release()

    def _read_head(self, client: socket.socket) -> tuple[bytes | None, bytes]:
        data = b""
        while b"\r\n\r\n" not in data:
            chunk = client.recv(4096)
            if not chunk or len(data) + len(chunk) > _HEAD_LIMIT:
                _answer(client, 400, "bad or oversized proxy request")
                return None, b""
            data += chunk
        head, _, rest = data.partition(b"\r\n\r\n")
        return head, rest

    def _open_upstream(self, client: socket.socket, head: bytes) -> tuple[socket.socket | None, bytes]:
        lines = head.decode("latin-1").split("\r\n")
        parts = lines[0].split(" ")
        if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
            _answer(client, 400, "malformed request line")
            return None, b""
        method, target = parts[0].upper(), parts[1]
        try:
            kind, url = _parse_target(method, target)
            host, port = url.host, url.port or (443 if kind == "https" else 80)
        except (ValueError, httpx.InvalidURL):
            _answer(client, 400, "only absolute http:// URLs and CONNECT host:port are proxied")
            return None, b""
        # CONNECT carries no method the proxy can see: a policy listing methods refuses it.
        refused = self._policy.violation(method, url)
        addresses: list[str] = []
        if refused is None:
            try:
                addresses = self._guard.addresses(host, port)
            except EgressDeniedError as exc:
                refused = (exc.rule, "the address is not allowed")
            except Exception:  # noqa: BLE001 - any resolver failure is a refusal, named generically
                refused = ("http:egress:address", "the host could not be resolved")
        rule = None if refused is None else refused[0]
        self._record(EgressAttempt(method=method, host=host, port=port, allowed=refused is None, rule=rule))
        if refused is not None:
            _answer(client, 403, f"toolbox sandbox egress refused {host}:{port} ({refused[0]})")
            return None, b""
        upstream = self._connect(addresses, port)
        if upstream is None:
            _answer(client, 502, f"could not connect to {host}:{port}")
            return None, b""
        if kind == "https":
            return upstream, b"HTTP/1.1 200 Connection established\r\n\r\n"
        kept = [line for line in lines[1:] if line.split(":", 1)[0].strip().lower() not in _HOP_HEADERS]
        path = url.raw_path.decode("ascii") or "/"
        request = "\r\n".join([f"{method} {path} HTTP/1.1", *kept, "Connection: close", "", ""])
        upstream.sendall(request.encode("latin-1"))
        return upstream, b""

    def _connect(self, addresses: list[str], port: int) -> socket.socket | None:
        for address in addresses:
            family = socket.AF_INET6 if ":" in address else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            if not self._track(sock):
                sock.close()
                return None
            try:
                sock.settimeout(_TIMEOUT)
                sock.connect((address, port))
                return sock
            except OSError:
                with contextlib.suppress(OSError):
                    sock.close()
                with self._lock:
                    self._open.discard(sock)
        return None

    def _relay(self, client: socket.socket, upstream: socket.socket) -> None:
        def pump(source: socket.socket, sink: socket.socket) -> None:
            try:
                while True:
                    data = source.recv(65536)
                    if not data or not self._spend(len(data)):
                        break
                    sink.sendall(data)
            except OSError:
                pass
            finally:
                for sock in (source, sink):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)

        back = threading.Thread(target=pump, args=(upstream, client), daemon=True)
        back.start()
        pump(client, upstream)
        back.join()


def _answer(client: socket.socket, status: int, text: str) -> None:
    reason: dict[int, Literal["Bad Request", "Forbidden", "Bad Gateway"]] = {
        400: "Bad Request",
        403: "Forbidden",
        502: "Bad Gateway",
    }
    body = (text + "\n").encode("utf-8")
    head = f"HTTP/1.1 {status} {reason[status]}\r\nContent-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    with contextlib.suppress(OSError):
        client.sendall(head.encode("ascii") + body)
        client.shutdown(socket.SHUT_WR)  # the answer is whole: the client reads it, then closes
        _drain(client)


def _drain(client: socket.socket) -> None:
    """Read what the client still sends after its answer (a refused request's body), at most
    `_DRAIN_LIMIT` bytes for at most `_DRAIN_WAIT` s: a socket closed with unread data resets the
    connection, and the client loses the answer it has not read yet."""
    client.settimeout(_DRAIN_WAIT)
    left = _DRAIN_LIMIT
    while left > 0:
        chunk = client.recv(min(left, 65536))
        if not chunk:
            return
        left -= len(chunk)
