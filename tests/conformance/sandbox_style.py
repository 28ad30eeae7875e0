"""The ``sandbox`` style of the conformance matrix: the logical operations as sandboxed code.

Every call that runs builds a real bubblewrap sandbox (the provider's own
``execute``, counted), so the cells of this style fail, never skip, where
sandboxes cannot run (`toolbox_sandbox.probe` says what is missing).

- ``pay(to, cents)``: ``sandbox.run_python`` of code that reads the payment from
  stdin. ``sandbox`` is the provider's tool as its plugin registers it from the
  policy file (one ``read_only_world`` profile, so IDEMPOTENT, and
  ``require_approval = true``); the approver is shown the exact code and stdin
  by digest, so a grant for "100 cents to alice" does not run "999999 to
  mallory" although the code is the same;
- ``read(item, api_key)``: ``sandbox_read.run`` of the profile's Python with the
  item as its last argument and the key as stdin (data the sandbox binds by
  digest: never shown, never stored);
- ``ping(item)``, ``vault(item)``, ``guarded(item)``: ``run`` of ``sandbox_ping``
  (its own rate limit and delegation scope), ``sandbox_vault`` (the policy does
  not allow it) and ``sandbox_guarded`` (an acknowledgement nobody gave).

The provider registers one tool, ``sandbox``; the other four are `SandboxTool`
registered under other names (a subclass each: a registered tool type is one
tool), with the provider's own `SANDBOX_BIND`, because policy, acknowledgement,
limits and delegation tell tools apart by name. The authorizer and the
guardrail find the item as the program's last argument.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

import toolbox_sandbox._tool
from conformance.styles import ACK, LOGICAL, Spy, Style, _toml, counted_runs
from toolbox import Effect, ToolDescriptor, ToolPolicy, ToolProvider
from toolbox_sandbox import SANDBOX_ACKNOWLEDGEMENT, SANDBOX_BIND, SandboxTool, plugin, probe
from toolbox_sandbox._descriptor import descriptor_for

PYTHON = "/usr/bin/python3"  # every profile's default interpreter
PAY = "import json, sys\ncall = json.load(sys.stdin)\nprint(f\"paid {call['cents']} to {call['to']}\")"
#: The code each program-style operation runs: the item is its last argument.
PROGRAMS = {
    "read": "import sys; print('read', sys.argv[-1])",
    "ping": "import sys; print('pong', sys.argv[-1])",
    "vault": "import sys; print(sys.argv[-1])",
    "guarded": "import sys; print(sys.argv[-1])",
}
_TOOLS = {
    "read": "sandbox_read",
    "ping": "sandbox_ping",
    "pay": "sandbox",
    "vault": "sandbox_vault",
    "guarded": "sandbox_guarded",
}
_LOGICAL = {tool: logical for logical, tool in _TOOLS.items()}
_SPY = Spy(toolbox_sandbox._tool, "execute", "sandbox", lambda request: _LOGICAL[request.tool])


def _registered(logical: str) -> ToolProvider[Any]:
    """`SandboxTool` under ``sandbox_<logical>``: the provider's descriptor and binding, another name."""
    name = _TOOLS[logical]
    fields = descriptor_for(Effect.UNSAFE).model_dump()
    fields["name"] = name
    if logical == "guarded":
        fields["acknowledgement"] = ACK.model_dump()
    tool_type = type(f"SandboxTool_{logical}", (SandboxTool,), {"__slots__": ()})
    return ToolProvider(tool_type, ToolDescriptor.model_validate(fields), bind=SANDBOX_BIND)


_COPIES = [_registered(logical) for logical in ("read", "ping", "vault", "guarded")]


def _policy(directory: Path) -> ToolPolicy:
    allowed = [_TOOLS[logical] for logical in ("pay", "read", "ping", "guarded")]
    lines = [
        "version = 1",
        "[allow]",
        f"tools = {_toml(allowed)}",
        "[tools.sandbox]",
        "require_approval = true",
        'default_profile = "conformance"',
        "[tools.sandbox.profiles.conformance]",
        "read_only_world = true",
    ]
    path = directory / "sandbox-policy.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return ToolPolicy.from_file(path)


def _payment(given: Mapping[str, Any]) -> str:
    return json.dumps({"to": given.get("to"), "cents": given.get("cents")}, sort_keys=True)


def _wire(logical: str, given: Mapping[str, Any]) -> dict[str, Any]:
    if logical == "pay":
        return {"source": PAY, "stdin": _payment(given)}
    wired: dict[str, Any] = {"argv": [PYTHON, "-c", PROGRAMS[logical], given.get("item")]}
    if given.get("api_key"):
        wired["stdin"] = given["api_key"]
    return wired


def _shown(_logical: str, given: Mapping[str, Any]) -> dict[str, Any]:
    stdin = _payment(given).encode()
    return {
        "source": PAY,
        "stdin": {"sha256": hashlib.sha256(stdin).hexdigest(), "size": len(stdin)},
        "files": {},
        "profile": None,
    }


def _item(seen: Mapping[str, Any]) -> object:
    argv = seen.get("argv")
    return argv[-1] if isinstance(argv, list) and argv else None


def sandbox_style(directory: Path) -> Style:
    missing = probe().missing
    if missing:
        pytest.fail("the sandbox style cannot run here: " + "; ".join(missing), pytrace=False)
    names = {logical: (tool, "run", f"{tool}.run") for logical, tool in _TOOLS.items()}
    names["pay"] = ("sandbox", "run_python", "sandbox.run_python")
    assert set(names) == set(LOGICAL)
    return Style(
        name="sandbox",
        providers=[plugin, *_COPIES],
        policy=_policy(directory),
        names=names,
        typed=lambda instance, op, arguments: getattr(instance, op)(**arguments),
        runs=counted_runs("sandbox"),
        close=_SPY.open(),
        reads=frozenset(),  # no sandbox operation is READ_ONLY: every call declares audit_as
        env={SANDBOX_ACKNOWLEDGEMENT.env: SANDBOX_ACKNOWLEDGEMENT.value},
        wire=_wire,
        item=_item,
        shown=_shown,
    )
