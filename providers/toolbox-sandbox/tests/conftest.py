"""Fixtures for the sandbox tests: an allowed, acknowledged tool, and a host that must not change.

The tests need bubblewrap and user namespaces (or root). Where they are
missing, every test that runs code FAILS with the probe's list of what is
missing; nothing is skipped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from sandbox_support import ACK, ALLOW_SANDBOX, TIGHT, Host

from toolbox import Tools
from toolbox_sandbox import SandboxTool, plugin, probe


@pytest.fixture(scope="session")
def sandbox_support() -> None:
    """Fail (never skip) with what is missing when sandboxes cannot run on this machine."""
    support = probe()
    if support.missing:
        pytest.fail("the sandbox cannot run here: " + "; ".join(support.missing), pytrace=False)


@pytest.fixture
def host(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, sandbox_support: None) -> Iterator[Host]:
    """The host's state, checked unchanged after the test."""
    state = Host(tmp_path, monkeypatch)
    yield state
    state.assert_unchanged()


@pytest.fixture
def sandbox_tools(make_tools: Callable[..., Tools], toolbox_env: dict[str, str]) -> Callable[..., Tools]:
    """``sandbox_tools(profile={...}, **options)``: Tools with the sandbox allowed and acknowledged."""
    toolbox_env.update(ACK)

    def build(profiles: dict[str, Any] | None = None, **options: Any) -> Tools:
        chosen = profiles if profiles is not None else {"default": {"limits": TIGHT}}
        return make_tools(plugin, policy=ALLOW_SANDBOX, options={"sandbox": {"profiles": chosen, **options}})

    return build


@pytest.fixture
def sandbox(sandbox_tools: Callable[..., Tools], sandbox_support: None) -> SandboxTool:
    """The allowed sandbox tool with the TIGHT default profile."""
    return sandbox_tools().get(SandboxTool)
