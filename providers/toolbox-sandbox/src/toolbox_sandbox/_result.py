"""`SandboxResult` and `ExportedFile`: what a run returns to the caller and, as JSON, to the model.

The audit trail stores a run's summary instead of its output
(`SandboxResult.__toolbox_audit_summary__`): how it ended, how it was confined,
and counts, with the SHA-256 of the result as JSON; never stdout, stderr or a
file's content, which are the code's and may hold the data it was given.
"""

from __future__ import annotations

import hashlib
from typing import Literal, final

from pydantic import BaseModel, ConfigDict

from toolbox_sandbox._limits import Enforcement, LimitName

__all__ = ["EgressAttempt", "ExportedFile", "SandboxResult"]


@final
class EgressAttempt(BaseModel):
    """One connection the code asked an ``egress`` profile's proxy for."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    method: str
    """The request's method, or ``CONNECT`` for HTTPS."""
    host: str
    """The host asked for."""
    port: int
    """The port asked for."""
    allowed: bool
    """Whether the proxy connected it."""
    rule: str | None = None
    """The egress rule that refused it (``http:egress:host``, ``:address``, ...), or None."""


@final
class ExportedFile(BaseModel):
    """A file the profile exports, read from the scratch directory after the run (bytes; base64 in JSON)."""

    model_config = ConfigDict(frozen=True, extra="forbid", ser_json_bytes="base64", val_json_bytes="base64")

    path: str
    """The path relative to the scratch directory."""
    size: int
    """Its size in bytes."""
    sha256: str
    """The SHA-256 of its content, hex."""
    content: bytes
    """Its content."""


@final
class SandboxResult(BaseModel):
    """The outcome of one sandboxed run.

    A run that ends, however it ends (an exception, a non-zero exit, a limit),
    is a successful *call*: its result says what happened. ``exit_code`` follows
    the shell's convention (``128 + N`` for a process ended by signal ``N``) and is
    None when the supervisor killed the sandbox (``limit`` then says why).
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    exit_code: int | None
    """The exit status, or None when the sandbox was killed for a limit."""
    stdout: str
    """Standard output, decoded as UTF-8 (undecodable bytes replaced), at most ``output_bytes``."""
    stderr: str
    """Standard error, likewise."""
    stdout_truncated: bool = False
    """Whether stdout was cut at ``output_bytes``."""
    stderr_truncated: bool = False
    """Whether stderr was cut at ``output_bytes``."""
    wall_seconds: float
    """Elapsed time of the run, sandbox setup included."""
    cpu_seconds: float
    """CPU time (user and system) of every process of the run."""
    limit: LimitName | None = None
    """The limit the run hit, if the supervisor or the sandbox's init saw one (see docs/sandbox.md)."""
    files: tuple[ExportedFile, ...] = ()
    """The files the profile's ``exports`` patterns matched, in path order."""
    profile: str
    """The profile the run used."""
    enforcement: Enforcement = "rlimits+supervisor"
    """How the limits were applied."""
    seccomp: bool
    """Whether the seccomp filter was installed."""
    network: Literal["none", "egress"] = "none"
    """The profile's network."""
    egress: tuple[EgressAttempt, ...] = ()
    """The connections an ``egress`` profile's code asked for, allowed or refused (at most 256)."""

    @property
    def ok(self) -> bool:
        """Whether the code exited with status 0 and hit no limit."""
        return self.exit_code == 0 and self.limit is None

    def __toolbox_audit_summary__(self) -> tuple[str, str]:
        """``(summary, sha256)`` for the audit trail: the end, the confinement and counts; no content.

        The hash is the SHA-256 of the result as JSON (``model_dump_json()``, what a model reads),
        so a kept copy of the result can be proved against the audit record.
        """
        allowed = sum(attempt.allowed for attempt in self.egress)
        parts = [
            f"exit_code={self.exit_code}",
            f"limit={self.limit}",
            f"profile={self.profile}",
            f"enforcement={self.enforcement}",
            f"seccomp={self.seccomp}",
            f"network={self.network}",
            f"stdout_bytes={len(self.stdout.encode('utf-8', 'surrogatepass'))}",
            f"stderr_bytes={len(self.stderr.encode('utf-8', 'surrogatepass'))}",
            f"stdout_truncated={self.stdout_truncated}",
            f"stderr_truncated={self.stderr_truncated}",
            f"files={len(self.files)}",
            f"file_bytes={sum(exported.size for exported in self.files)}",
            f"egress_allowed={allowed}",
            f"egress_refused={len(self.egress) - allowed}",
            f"wall_seconds={self.wall_seconds:.3f}",
            f"cpu_seconds={self.cpu_seconds:.3f}",
        ]
        digest = hashlib.sha256(self.model_dump_json().encode("utf-8")).hexdigest()
        return " ".join(parts), digest
