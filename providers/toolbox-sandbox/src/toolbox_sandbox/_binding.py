"""What a sandbox call is bound to: the code or argv as written, stdin and files by digest.

Approvals, fingerprints and audit payloads bind a call's declared parameters
(`toolbox.foundations._binding`). The code (``source``) and ``argv`` are bound as passed, so
an approver reads exactly what will run; stdin and every input file are bound
by their SHA-256 and size, so a grant for one input does not run another while
the data itself (an uploaded file, a customer's records) never reaches an
approval request or the audit trail. ``profile`` is bound as passed (None: the
operator's default profile).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping
from typing import Any

from toolbox_sandbox._inputs import as_bytes

__all__ = ["SANDBOX_BIND", "files_digests", "input_digest"]


def input_digest(data: object) -> dict[str, Any]:
    """``{"sha256": hex, "size": bytes}`` of stdin or one input file (a ``str`` as UTF-8)."""
    payload = as_bytes(data, "input")
    return {"sha256": hashlib.sha256(payload).hexdigest(), "size": len(payload)}


def files_digests(files: object) -> dict[str, dict[str, Any]]:
    """Each input file's `input_digest`, by path, in path order; no files (None) is ``{}``."""
    if files is None:
        return {}
    if not isinstance(files, Mapping):
        raise ValueError(f"files must be a mapping of name to content, got {type(files).__name__}")
    return {str(name): input_digest(files[name]) for name in sorted(files, key=str)}


_INPUTS: dict[str, Callable[[Any], object] | None] = {
    "stdin": input_digest,
    "files": files_digests,
    "profile": None,
}

SANDBOX_BIND: Mapping[str, Mapping[str, Callable[[Any], object] | None]] = {
    "run_python": {"source": None, **_INPUTS},
    "run": {"argv": None, **_INPUTS},
}
"""The ``bind`` mapping of the sandbox's operations (`toolbox.ToolProvider`): what the plugin registers.

Register `SandboxTool` yourself with ``ToolProvider(SandboxTool, descriptor, bind=SANDBOX_BIND)``;
without it stdin and files would be bound, shown and audited as passed."""
