"""toolbox-sandbox: the ``sandbox`` tool, code run in an operating-system sandbox under governance.

Install it (and bubblewrap) and toolbox discovers it; allow it with
``ToolPolicy.standard().allow(SandboxTool)``, acknowledge it with
``TOOLBOX_SANDBOX_ACK=allow-sandboxed-code`` and declare profiles in
``[tools.sandbox.profiles.NAME]``. See docs/sandbox.md.
"""

from __future__ import annotations

from toolbox_sandbox._binding import SANDBOX_BIND
from toolbox_sandbox._descriptor import SANDBOX_ACKNOWLEDGEMENT, SANDBOX_DESCRIPTOR
from toolbox_sandbox._errors import SandboxDeniedError, SandboxUnavailableError
from toolbox_sandbox._limits import Limits
from toolbox_sandbox._options import SandboxOptions
from toolbox_sandbox._profile import SandboxProfile
from toolbox_sandbox._result import EgressAttempt, ExportedFile, SandboxResult
from toolbox_sandbox._support import SandboxSupport, probe
from toolbox_sandbox._tool import SandboxTool

__all__ = [
    "SANDBOX_ACKNOWLEDGEMENT",
    "SANDBOX_BIND",
    "SANDBOX_DESCRIPTOR",
    "EgressAttempt",
    "ExportedFile",
    "Limits",
    "SandboxDeniedError",
    "SandboxOptions",
    "SandboxProfile",
    "SandboxResult",
    "SandboxSupport",
    "SandboxTool",
    "SandboxUnavailableError",
    "probe",
]
