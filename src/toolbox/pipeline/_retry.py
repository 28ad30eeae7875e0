"""Effect-aware retries: what a failure means depends on what the operation does.

A failure decided before dispatch never reaches this module, so it is never
retried. After dispatch:

- ``READ_ONLY`` and ``IDEMPOTENT``: transient failures (timeouts, connection
  errors, transient results such as HTTP 5xx) are retried with capped
  exponential backoff and jitter;
- ``UNSAFE``: never retried; a timeout or a dropped connection is
  UNCERTAIN_EFFECT, because it does not prove the write failed;
- ``RECONCILABLE``: a registered reconciler checks the remote outcome before
  any new attempt; without one it is treated as ``UNSAFE``.

A small policy object rather than a retry library: the decision needs the
operation's effect and the reconciler, and the loop must re-run
authorization and the deadline before each attempt, which general-purpose
retry decorators do not model.
"""

from __future__ import annotations

import enum
import random
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, final

from toolbox.errors import ConfigurationError
from toolbox.foundations._descriptor import Effect
from toolbox.pipeline._invocation import Invocation

__all__ = [
    "ReconcileOutcome",
    "Reconciler",
    "Reconciliation",
    "RetryPolicy",
    "is_transient_error",
    "is_transient_result",
]


@final
@dataclass(frozen=True)
class RetryPolicy:
    """Attempts and backoff for retryable failures."""

    max_attempts: int = 3
    """Attempts in total, the first included; 1 disables retries."""
    base_delay: float = 0.05
    """Delay before the second attempt, in seconds; doubles each time."""
    max_delay: float = 2.0
    """Cap on any one delay."""
    jitter: float = 0.5
    """Fraction of each delay that is randomised (0 = none, 1 = full jitter)."""

    def __post_init__(self) -> None:
        if not isinstance(self.max_attempts, int) or self.max_attempts < 1:
            raise ConfigurationError(f"max_attempts must be an integer >= 1, got {self.max_attempts!r}")
        if self.base_delay < 0 or self.max_delay < 0:
            raise ConfigurationError("retry delays must not be negative")
        if not 0 <= self.jitter <= 1:
            raise ConfigurationError(f"jitter must be between 0 and 1, got {self.jitter!r}")

    def delay(self, attempt: int) -> float:
        """Seconds to wait after failed attempt number ``attempt`` (1-based)."""
        capped = min(self.max_delay, self.base_delay * (2 ** (attempt - 1)))
        return float(capped * (1 - self.jitter * random.random()))  # noqa: S311 - jitter, not cryptography


class ReconcileOutcome(str, enum.Enum):
    """What a reconciler found out about a failed RECONCILABLE attempt."""

    APPLIED = "APPLIED"
    NOT_APPLIED = "NOT_APPLIED"
    UNKNOWN = "UNKNOWN"


@final
@dataclass(frozen=True)
class Reconciliation:
    """A reconciler's answer; ``content`` is the result to return when APPLIED."""

    outcome: ReconcileOutcome
    content: Any = None


Reconciler = Callable[[Invocation, BaseException], Reconciliation]


def is_transient_error(exc: BaseException) -> str | None:
    """``TIMEOUT`` or ``CONNECTION_FAILED`` for transient failures, else None."""
    if isinstance(exc, TimeoutError):
        return "TIMEOUT"
    if isinstance(exc, ConnectionError):
        return "CONNECTION_FAILED"
    return None


def is_transient_result(content: object) -> bool:
    """Whether a successful return is a transient failure (it says so via ``__toolbox_transient__``)."""
    probe = getattr(content, "__toolbox_transient__", None)
    return bool(probe()) if callable(probe) else False


def retries_allowed(effect: Effect) -> bool:
    """Only effects that can be repeated safely are retried blindly."""
    return effect is Effect.READ_ONLY or effect is Effect.IDEMPOTENT


def find_reconciler(reconcilers: Mapping[str, Reconciler], tool: str, operation: str) -> Reconciler | None:
    """The reconciler for ``tool.operation``, else for ``tool``."""
    return reconcilers.get(f"{tool}.{operation}") or reconcilers.get(tool)
