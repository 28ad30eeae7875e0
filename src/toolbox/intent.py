"""The intent phase: building blocks every provider uses.

An operation returns an intent object that has no ``execute()``. Declaring
why the call happens returns the object that does:

- `ReadIntent` (``READ_ONLY`` operations) offers ``purpose(text)`` and
  ``audit_as(text)``;
- `WriteIntent` (every other effect) offers only ``audit_as(text)``;
- both return a `Ready`, which executes exactly once.

The split is visible to the type checker, so ``mypy --strict`` rejects
``tool.get(url).execute()`` and ``tool.post(url).purpose("...")``.
"""

from __future__ import annotations

import asyncio
import re
import threading
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Generic, NoReturn, TypeVar, final

from toolbox.context import OperationRecord
from toolbox.errors import IntentAlreadyExecutedError, ToolDeniedError

if TYPE_CHECKING:
    from toolbox.runtime import ToolRuntime

__all__ = ["MAX_INTENT_LENGTH", "ReadIntent", "Ready", "WriteIntent", "validate_intent_text"]

R = TypeVar("R")

MAX_INTENT_LENGTH = 1000
# One lock for all claims: the critical section is two attribute operations.
_CLAIM_LOCK = threading.Lock()
_CONTROL_CHARS = re.compile(r"[\x00-\x1f\x7f-\x9f]")
# Intent texts are usually literals repeated on every call; remember the good ones.
_VALID_TEXTS: dict[str, None] = {}
_VALID_TEXTS_MAX = 4096


def validate_intent_text(text: object) -> str:
    """Return ``text`` if it is a valid intent text, else raise `ValueError`.

    Valid: a string, non-empty after stripping, at most 1000 characters, no
    control characters.
    """
    if type(text) is str and text in _VALID_TEXTS:
        return text
    if not isinstance(text, str):
        raise ValueError(f"intent text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise ValueError("intent text is empty: say why this call is made, e.g. 'Fetch rates'")
    if len(text) > MAX_INTENT_LENGTH:
        raise ValueError(f"intent text is {len(text)} characters; shorten it to at most {MAX_INTENT_LENGTH}")
    if _CONTROL_CHARS.search(text):
        raise ValueError("intent text contains control characters; use a single plain line")
    if len(_VALID_TEXTS) < _VALID_TEXTS_MAX:
        _VALID_TEXTS[text] = None
    return text


class _Intent(Generic[R]):
    __slots__ = ("_acall", "_call", "_operation", "_runtime", "_target")

    def __init__(
        self,
        runtime: ToolRuntime,
        operation: str,
        target: str | None,
        call: Callable[[], R],
        acall: Callable[[], Awaitable[R]] | None,
    ) -> None:
        self._runtime = runtime
        self._operation = operation
        self._target = target
        self._call = call
        self._acall = acall

    @property
    def tool(self) -> str:
        """The tool's name."""
        return self._runtime.descriptor.name

    @property
    def operation(self) -> str:
        """The operation's name."""
        return self._operation

    @property
    def target(self) -> str | None:
        """The redacted target, e.g. a URL without credentials."""
        return self._target

    def audit_as(self, text: str) -> Ready[R]:
        """Declare what this call does, for the audit trail; returns the executable call.

        Raises:
            ValueError: ``text`` is empty, longer than 1000 characters or has control characters.
        """
        return self._ready("audit_as", text)

    def _ready(self, kind: str, text: str) -> Ready[R]:
        text = validate_intent_text(text)
        record = OperationRecord(self._runtime.descriptor.name, self._operation, kind, text, self._target)
        self._runtime.trace.append(record)
        return Ready(self._runtime, record, self._call, self._acall)

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            if name in ("execute", "aexecute"):
                raise AttributeError(
                    f"{self.tool}.{self._operation}() has no {name}(): declare the intent first, "
                    f"with {self._intent_methods()}"
                )
            raise AttributeError(name)

    def _intent_methods(self) -> str:
        return '.audit_as("...")'

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.tool}.{self._operation} target={self._target!r})"


@final
class ReadIntent(_Intent[R]):
    """Intent of a ``READ_ONLY`` operation: call `purpose` or `audit_as`."""

    __slots__ = ()

    def purpose(self, text: str) -> Ready[R]:
        """Declare why this read happens; returns the executable call.

        Raises:
            ValueError: ``text`` is empty, longer than 1000 characters or has control characters.
        """
        return self._ready("purpose", text)

    def _intent_methods(self) -> str:
        return '.purpose("...") or .audit_as("...")'


@final
class WriteIntent(_Intent[R]):
    """Intent of an operation with side effects: only `audit_as` is accepted."""

    __slots__ = ()

    if not TYPE_CHECKING:

        def __getattr__(self, name: str) -> NoReturn:
            if name == "purpose":
                raise AttributeError(
                    f"{self.tool}.{self._operation}() has side effects: declare it with "
                    '.audit_as("...") instead of .purpose(...)'
                )
            return super().__getattr__(name)


@final
class Ready(Generic[R]):
    """A call with its intent declared. Executes exactly once."""

    __slots__ = ("_acall", "_call", "_claimed", "_record", "_runtime")

    def __init__(
        self,
        runtime: ToolRuntime,
        record: OperationRecord,
        call: Callable[[], R],
        acall: Callable[[], Awaitable[R]] | None,
    ) -> None:
        self._runtime = runtime
        self._record = record
        self._call = call
        self._acall = acall
        self._claimed = False

    @property
    def record(self) -> OperationRecord:
        """The trace record of this operation."""
        return self._record

    def _claim(self) -> None:
        with _CLAIM_LOCK:
            already, self._claimed = self._claimed, True
        if already:
            raise IntentAlreadyExecutedError(
                f"{self._record.tool}.{self._record.operation} was already executed; "
                "build a new intent for another call"
            )
        self._record.start()
        self._runtime.executions += 1

    def _fail(self, exc: BaseException) -> None:
        status = "DENIED" if isinstance(exc, ToolDeniedError) else "ERROR"
        self._record.end(status, type(exc).__name__)

    def execute(self) -> R:
        """Run the operation and record its outcome.

        Raises:
            IntentAlreadyExecutedError: this object was executed before.
        """
        self._claim()
        try:
            result = self._call()
        except BaseException as exc:
            self._fail(exc)
            raise
        self._record.end("SUCCESS")
        return result

    async def aexecute(self) -> R:
        """Run the operation from async code and record its outcome.

        Uses the tool's async implementation where it has one. A ``MEMORY_ONLY``
        tool runs inline; other sync-only tools run on a worker thread.

        Raises:
            IntentAlreadyExecutedError: this object was executed before.
        """
        self._claim()
        try:
            if self._acall is not None:
                result = await self._acall()
            elif self._runtime.runs_inline:
                result = self._call()
            else:
                result = await asyncio.to_thread(self._call)
        except BaseException as exc:
            self._fail(exc)
            raise
        self._record.end("SUCCESS")
        return result

    def __repr__(self) -> str:
        r = self._record
        return f"Ready({r.tool}.{r.operation} {r.intent_kind}={r.intent_text!r} status={r.status})"
