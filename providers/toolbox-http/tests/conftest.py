"""Fixtures: tools with HttpTool allowed, and a real HTTP server on 127.0.0.1."""

from __future__ import annotations

import contextlib
import json
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from urllib.parse import parse_qs, urlsplit

import pytest
import trustme

import toolbox_http.plugin
from toolbox import ToolPolicy, Tools
from toolbox_http import HttpTool

#: The explicit opt-in these tests need: loopback is refused by default, like any non-public address.
ALLOW_LOOPBACK = {"allow_networks": ["127.0.0.0/8", "::1/128"]}

BIG_BODY = 2 * 1024 * 1024
CHUNK = 16 * 1024


@pytest.fixture
def http_tools(make_tools) -> Iterator[Callable[..., Tools]]:
    """Build Tools with the http provider allowed and ``options`` for it; closed after the test.

    Unless ``options`` has ``egress``, the tool may reach loopback (`ALLOW_LOOPBACK`).
    """
    built: list[Tools] = []

    def factory(**options: object) -> Tools:
        options.setdefault("egress", ALLOW_LOOPBACK)
        tools = make_tools(
            toolbox_http.plugin,
            policy=ToolPolicy.standard().allow(HttpTool),
            options={"http": options},
        )
        built.append(tools)
        return tools

    yield factory
    for tools in built:
        tools.close()


@dataclass
class Observed:
    """What the server saw while answering one request."""

    written: int = 0
    error: str | None = None
    done: threading.Event = field(default_factory=threading.Event)


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    timeout = 10  # a stuck test never leaves a handler thread waiting forever
    server: LoopbackServer

    def log_message(self, format: str, *args: object) -> None:
        pass

    def parse_request(self) -> bool:
        ok = super().parse_request()
        if ok:
            self.server.requests.append((self.command, self.path, self.headers.get("Host")))
            self.server.authorizations.append(self.headers.get("Authorization"))
            self.server.peers.append(self.client_address[1])
            self.server.received_headers.append(dict(self.headers.items()))
        return ok

    def _redirect(self) -> None:
        query = parse_qs(urlsplit(self.path).query)
        length = int(self.headers.get("Content-Length") or 0)
        self.rfile.read(length)
        self.send_response(int(query.get("status", ["302"])[0]))
        self.send_header("Location", query["to"][0])
        self.send_header("Content-Length", "0")
        self.end_headers()

    def _send_json(self, status: int, payload: object) -> None:
        body = json.dumps(payload).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _echo(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length).decode()
        self._send_json(
            200,
            {
                "method": self.command,
                "path": self.path,
                "body": body,
                "content_type": self.headers.get("Content-Type"),
            },
        )

    def _stream(self, framing: str, chunks: int, delay: float = 0.0) -> None:
        """Send ``chunks`` chunks of CHUNK bytes, recording how far it got."""
        observed = self.server.observe(self.path)
        # A small send buffer keeps the kernel from absorbing the whole body for an absent reader.
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHUNK)
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/octet-stream")
            if framing == "length":
                self.send_header("Content-Length", str(chunks * CHUNK))
            elif framing == "chunked":
                self.send_header("Transfer-Encoding", "chunked")
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            self.end_headers()
            for _ in range(chunks):
                data = b"x" * CHUNK
                if framing == "chunked":
                    data = f"{len(data):x}\r\n".encode() + data + b"\r\n"
                self.wfile.write(data)
                self.wfile.flush()
                observed.written += CHUNK
                if delay:
                    time.sleep(delay)
            if framing == "chunked":
                self.wfile.write(b"0\r\n\r\n")
        except OSError as exc:
            observed.error = type(exc).__name__
            self.close_connection = True
        finally:
            observed.done.set()

    def _play(self, script: Script) -> None:
        """Write the scripted raw bytes, pausing between pieces, recording how far it got."""
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        observed = Observed()
        self.server.plays.setdefault(self.path, []).append(observed)
        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, CHUNK)
        self.close_connection = True
        try:
            for piece in script.pieces:
                self.wfile.write(piece)
                self.wfile.flush()
                observed.written += len(piece)
                if script.delay:
                    time.sleep(script.delay)
        except OSError as exc:
            observed.error = type(exc).__name__
        finally:
            observed.done.set()

    def do_GET(self) -> None:
        path = self.path.partition("?")[0]
        script = self.server.next_script(path)
        if script is not None:
            self._play(script)
        elif path == "/redirect":
            self._redirect()
        elif path == "/json":
            self._send_json(200, {"rates": {"EUR": 1.1}})
        elif self.path.startswith("/big-"):
            self._stream(self.path.removeprefix("/big-"), BIG_BODY // CHUNK)
        elif self.path == "/slow":
            self._stream("chunked", 60, delay=0.1)  # 6 s: well past the tests' total_timeout
        elif path == "/missing":
            self._send_json(404, {"error": "not found"})
        else:
            self._echo()

    def do_HEAD(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", str(BIG_BODY))
        self.end_headers()

    def do_POST(self) -> None:
        script = self.server.next_script(self.path)
        if script is not None:
            self._play(script)
        elif self.path.startswith("/redirect"):
            self._redirect()
        else:
            self._echo()

    do_PUT = do_PATCH = do_DELETE = _echo


@dataclass
class Script:
    """A response written as raw bytes: ``pieces`` in order, ``delay`` seconds after each."""

    pieces: list[bytes]
    delay: float = 0.0


def raw_response(body: bytes, headers: dict[str, str], status: str = "200 OK") -> bytes:
    """A complete HTTP/1.1 response with ``body`` sent as given (already encoded)."""
    lines = [f"HTTP/1.1 {status}", f"Content-Length: {len(body)}", "Connection: close"]
    lines += [f"{name}: {value}" for name, value in headers.items()]
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + body


class LoopbackServer(ThreadingHTTPServer):
    """A ThreadingHTTPServer on 127.0.0.1 that records what its streaming handlers saw."""

    daemon_threads = True
    big_body = BIG_BODY

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.scheme = "http" if tls is None else "https"
        if tls is not None:
            # The handshake runs on accept(); a client that rejects the certificate just drops it.
            self.socket = tls.wrap_socket(self.socket, server_side=True)
        self.observed: dict[str, Observed] = {}
        #: Every request line received: (method, path, Host header).
        self.requests: list[tuple[str, str, str | None]] = []
        #: The Authorization header of each request (None when absent).
        self.authorizations: list[str | None] = []
        #: The client port of each request: equal ports mean one kept-alive connection.
        self.peers: list[int] = []
        self._scripts: dict[str, list[Script]] = {}
        #: What each scripted response to a path saw, in request order.
        self.plays: dict[str, list[Observed]] = {}
        #: The headers of each request, in order.
        self.received_headers: list[dict[str, str]] = []

    def script(self, path: str, pieces: list[bytes], delay: float = 0.0) -> str:
        """Answer the next unanswered GET of ``path`` with raw ``pieces``, ``delay`` s after each.

        Calls queue up: each request takes the next script. Returns the URL.
        """
        self._scripts.setdefault(path, []).append(Script(pieces, delay))
        return self.url + path

    def respond(self, path: str, body: bytes, headers: dict[str, str], status: str = "200 OK") -> str:
        """Answer the next GET of ``path`` with ``body`` sent as given (e.g. already gzipped)."""
        return self.script(path, [raw_response(body, headers, status)])

    def next_script(self, path: str) -> Script | None:
        queue = self._scripts.get(path)
        return queue.pop(0) if queue else None

    def played(self, path: str, count: int = 1, timeout: float = 10) -> list[Observed]:
        """What the scripted responses to ``path`` saw, once ``count`` of them have finished."""
        deadline = time.monotonic() + timeout
        while len(self.plays.get(path, [])) < count and time.monotonic() < deadline:
            time.sleep(0.01)
        plays = self.plays.get(path, [])
        for observed in plays:
            assert observed.done.wait(max(deadline - time.monotonic(), 0)), f"script for {path} still running"
        return plays

    @property
    def url(self) -> str:
        return f"{self.scheme}://127.0.0.1:{self.server_address[1]}"

    @property
    def port(self) -> int:
        return int(self.server_address[1])

    def observe(self, path: str) -> Observed:
        return self.observed.setdefault(path, Observed())

    def wait(self, path: str, timeout: float = 10) -> Observed:
        """What the handler for ``path`` saw, once it has finished."""
        deadline = time.monotonic() + timeout
        while path not in self.observed and time.monotonic() < deadline:
            time.sleep(0.01)
        observed = self.observed[path]
        assert observed.done.wait(max(deadline - time.monotonic(), 0)), f"handler for {path} still running"
        return observed


def _serve(server: LoopbackServer) -> Iterator[LoopbackServer]:
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    try:
        yield server
    finally:
        # serve_forever only sees shutdown() when its select returns: at the next poll interval,
        # or at once when the listening socket is shut down (Linux wakes the select; elsewhere
        # this may fail and the poll interval bounds the wait).
        with contextlib.suppress(OSError):
            server.socket.shutdown(socket.SHUT_RDWR)
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)


@pytest.fixture
def loopback() -> Iterator[LoopbackServer]:
    """A real HTTP server on 127.0.0.1 (an ephemeral port), stopped after the test."""
    yield from _serve(LoopbackServer())


@pytest.fixture
def self_signed_cert(tmp_path: Path) -> tuple[Path, Path]:
    """A throwaway CA made in the test (trustme) and a certificate for 127.0.0.1 and api.test it signed.

    Returns the CA bundle to trust and the server's certificate chain with its key.
    """
    ca = trustme.CA()
    issued = ca.issue_cert("127.0.0.1", "api.test")
    bundle, chain = tmp_path / "ca.pem", tmp_path / "server.pem"
    ca.cert_pem.write_to_path(str(bundle))
    issued.private_key_and_cert_chain_pem.write_to_path(str(chain))
    return bundle, chain


@pytest.fixture
def tls_loopback(self_signed_cert: tuple[Path, Path]) -> Iterator[LoopbackServer]:
    """A real HTTPS server on 127.0.0.1 presenting ``self_signed_cert``."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(self_signed_cert[1])
    yield from _serve(LoopbackServer(tls=context))
