"""pytest plugin: fixtures over `toolbox.testing`. Registered through ``pytest11``."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

import pytest

from toolbox.doors._tools import Tools
from toolbox.foundations._context import ExecutionContext
from toolbox.registry._policy import ToolPolicy
from toolbox.testing import build_tools, test_context

__all__ = ["make_tools", "toolbox_context", "toolbox_env"]


@pytest.fixture
def toolbox_env() -> dict[str, str]:
    """An empty, mutable environment for acknowledgements; the real one is never read."""
    return {}


@pytest.fixture
def toolbox_context() -> ExecutionContext:
    """A fresh trusted context for one test."""
    return test_context()


@pytest.fixture
def make_tools(toolbox_env: dict[str, str], toolbox_context: ExecutionContext) -> Callable[..., Tools]:
    """Build `Tools` from explicit providers with ``toolbox_env`` and ``toolbox_context``.

    Call it as ``make_tools(provider, ..., policy=ToolPolicy.standard().allow(X))``.
    """

    def factory(
        *providers: object,
        policy: ToolPolicy | None = None,
        env: Mapping[str, str] | None = None,
        options: Mapping[str, Mapping[str, Any]] | None = None,
    ) -> Tools:
        return build_tools(
            *providers,
            policy=policy,
            env=toolbox_env if env is None else env,
            context=toolbox_context,
            options=options,
        )

    return factory
