"""An HTTP witness that countersigns: ``toolbox audit witness-serve`` on another host, and its client.

Modelled on C2SP tlog-witness's ``add-checkpoint``. ``POST /add-checkpoint`` takes::

    old <tree size the client believes the witness holds>
    <consistency proof, one base64 hash a line>
    <blank line>
    <the signed checkpoint>

The server keeps the checkpoint in its own `Witness` (a directory on its host: signature
checked with the log's keys, consistency with what it holds, forks refused) and answers with
its **cosignature**: a signed-note signature line by the witness's own Ed25519 key over the
checkpoint's body, which the client verifies. ``409`` (body: the size it holds) when ``old``
is not what it holds; ``403`` for a checkpoint no trusted key signed; ``422`` for a fork or a
log that did not only grow. ``GET /checkpoints`` returns every note it holds (JSON), for
``toolbox audit verify``. Bodies are capped at 64 KiB; nothing else is served.
"""

from __future__ import annotations

import base64
import binascii
import json
import threading
import urllib.error
import urllib.request
from collections.abc import Sequence
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, final

from toolbox.audit._note import Checkpoint, CheckpointError, Signer, VerifierKey, open_checkpoint
from toolbox.audit._witness import Witness, WitnessError

__all__ = ["HttpWitness", "WitnessServer"]

_MAX_BODY = 1 << 16
_MAX_PROOF = 64
_DASH = "\u2014 "


def _body_of(note: str) -> str:
    return note[: note.rfind("\n\n") + 1]


def cosign(note: str, signer: Signer) -> str:
    """The witness's signature line over ``note``'s body."""
    key = signer.verifier_key
    signature = signer.sign(_body_of(note).encode("utf-8"))
    return f"{_DASH}{key.name} {base64.b64encode(key.key_id + signature).decode('ascii')}\n"


@final
class WitnessServer:
    """Serves ``witness`` over HTTP on ``host:port`` (0: any free port), cosigning with ``signer``."""

    def __init__(self, witness: Witness, signer: Signer, *, host: str = "127.0.0.1", port: int = 0) -> None:
        self._witness = witness
        self._signer = signer
        self._lock = threading.Lock()  # one checkpoint judged at a time: the consistency check holds
        self._server = ThreadingHTTPServer((host, port), self._handler())
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def serve_forever(self) -> None:
        self._server.serve_forever()

    def start(self) -> None:
        """Serve in a daemon thread (tests, embedding)."""
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._thread.start()

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    def add(self, text: str) -> tuple[int, str]:
        """Judge one ``add-checkpoint`` body: the status and the answer."""
        head, _, note = text.partition("\n\n")
        lines = head.split("\n")
        if not lines[0].startswith("old ") or not lines[0][4:].isdigit() or len(lines) - 1 > _MAX_PROOF:
            return 400, "malformed request\n"
        try:
            proof = [base64.b64decode(line, validate=True) for line in lines[1:]]
            checkpoint = Checkpoint.parse(_body_of(note))
        except (binascii.Error, CheckpointError):
            return 400, "malformed request\n"
        with self._lock:
            try:
                held = self._witness.latest_size(checkpoint.origin)
            except (CheckpointError, WitnessError):
                return 500, "the witness cannot read what it holds\n"
            if int(lines[0][4:]) != held:
                return 409, f"{held}\n"
            try:
                self._witness.add(note, proof)
            except WitnessError as exc:
                reason = str(exc).splitlines()[0].partition("refuses the checkpoint: ")[2]  # not its path
                forged = "no signature by a trusted key" in reason or "does not verify" in reason
                return (403 if forged else 422), f"{reason}\n"
        return 200, cosign(note, self._signer)

    def notes(self) -> str:
        return json.dumps({"checkpoints": self._witness.notes()})

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                length = self.headers.get("Content-Length", "")
                if self.path != "/add-checkpoint":
                    return self._reply(404, "not found\n")
                if not length.isdigit() or int(length) > _MAX_BODY:
                    return self._reply(413, "a checkpoint request is at most 64 KiB, with a Content-Length\n")
                try:
                    text = self.rfile.read(int(length)).decode("utf-8")
                except UnicodeDecodeError:
                    return self._reply(400, "malformed request\n")
                self._reply(*server.add(text))

            def do_GET(self) -> None:
                if self.path != "/checkpoints":
                    return self._reply(404, "not found\n")
                self._reply(200, server.notes(), "application/json")

            def _reply(self, status: int, body: str, kind: str = "text/plain; charset=utf-8") -> None:
                data = body.encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass  # no request log: the witness's directory is its record

        return Handler


@final
class HttpWitness:
    """A witness served by ``toolbox audit witness-serve`` at ``url``; its cosignatures are checked
    with ``witness_key`` (its verifier key) and kept in `cosignatures`."""

    __slots__ = ("_keys", "_timeout", "_url", "_witness_key", "cosignatures")

    def __init__(
        self, url: str, witness_key: VerifierKey, keys: Sequence[VerifierKey], *, timeout: float = 10.0
    ) -> None:
        if not url.startswith(("http://", "https://")):
            raise ValueError("an HTTP witness URL starts with http:// or https://")
        self._url = url.rstrip("/")
        self._witness_key = witness_key
        self._keys = tuple(keys)
        self._timeout = timeout
        self.cosignatures: dict[int, str] = {}

    @property
    def name(self) -> str:
        return f"HTTP witness {self._url}"

    def _request(self, path: str, body: str | None = None) -> tuple[int, str]:
        request = urllib.request.Request(  # noqa: S310 - http(s) only, checked above
            self._url + path,
            data=None if body is None else body.encode("utf-8"),
            method="GET" if body is None else "POST",
        )
        try:
            with urllib.request.urlopen(request, timeout=self._timeout) as response:  # noqa: S310
                return int(response.status), response.read(_MAX_BODY * 64).decode("utf-8", "replace")
        except urllib.error.HTTPError as exc:
            return int(exc.code), exc.read(_MAX_BODY).decode("utf-8", "replace")
        except (urllib.error.URLError, OSError) as exc:
            raise WitnessError(f"{self.name} is unreachable ({type(exc).__name__})") from None

    def notes(self) -> list[str]:
        status, text = self._request("/checkpoints")
        try:
            notes = json.loads(text)["checkpoints"] if status == 200 else None
        except (ValueError, KeyError, TypeError):
            notes = None
        if not isinstance(notes, list) or not all(isinstance(n, str) for n in notes):
            raise WitnessError(f"{self.name} answered GET /checkpoints with {status}")
        return notes

    def checkpoints(self, origin: str) -> list[Checkpoint]:
        held = [open_checkpoint(note, self._keys) for note in self.notes()]
        return sorted((c for c in held if c.origin == origin), key=lambda c: c.size)

    def latest_size(self, origin: str) -> int:
        held = self.checkpoints(origin)
        return held[-1].size if held else 0

    def add(self, note: str, proof: Sequence[bytes]) -> Checkpoint:
        """Send ``note`` with ``proof`` (from the size the witness holds); check its cosignature."""
        checkpoint = open_checkpoint(note, self._keys)
        held = self.latest_size(checkpoint.origin)
        lines = [f"old {held}", *(base64.b64encode(p).decode("ascii") for p in proof)]
        status, answer = self._request("/add-checkpoint", "\n".join(lines) + "\n\n" + note)
        if status != 200:
            raise WitnessError(f"{self.name} refuses the checkpoint ({status}): {answer.strip()[:200]}")
        try:
            open_checkpoint(_body_of(note) + "\n" + answer, [self._witness_key])
        except CheckpointError as exc:
            raise WitnessError(f"{self.name}'s cosignature does not verify: {exc}") from None
        self.cosignatures[checkpoint.size] = answer
        return checkpoint
