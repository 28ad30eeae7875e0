"""The trusted execution context and its trace.

An `ExecutionContext` is built by the application *after* authentication. It
must never be parsed from model output or user-supplied JSON.
"""

from __future__ import annotations

import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from datetime import datetime
from typing import Annotated, Any, final

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    field_validator,
    model_validator,
)

from toolbox.errors import DelegationError
from toolbox.foundations._budget import Budget
from toolbox.foundations._delegation import DelegationScope
from toolbox.foundations._line_text import breaks_line

__all__ = [
    "DEFAULT_TRACE_RETENTION",
    "DenialRecord",
    "ExecutionContext",
    "OperationRecord",
    "Trace",
]


def _printable(value: str) -> str:
    if breaks_line(value):
        raise ValueError("must not contain control characters, line separators or bidirectional controls")
    return value


_Ref = Annotated[str, Field(min_length=1, max_length=256), AfterValidator(_printable)]


def _new_id() -> str:
    return uuid.uuid4().hex


@final
class OperationRecord:
    """One operation: intent declared, then start and end once it executes.

    Holds no bodies, headers or credentials: ``target`` is already redacted.
    """

    #: Every field, in the order ``as_dict`` reports them.
    FIELDS = (
        "attempts",
        "declared_at",
        "duration",
        "ended_at",
        "error_code",
        "error_type",
        "field_path",
        "intent_kind",
        "intent_text",
        "name",
        "operation",
        "reason_code",
        "rule",
        "started_at",
        "status",
        "target",
        "tool",
        "warnings",
    )
    __slots__ = FIELDS

    def __init__(  # noqa: PLR0917 - built on every call: positional arguments are cheaper
        self,
        tool: str,
        operation: str,
        intent_kind: str,
        intent_text: str,
        target: str | None,
        name: str | None = None,
    ) -> None:
        self.tool = tool
        self.operation = operation
        self.intent_kind = intent_kind
        self.intent_text = intent_text
        self.target = target
        self.declared_at = time.time()
        self.started_at: float | None = None
        self.ended_at: float | None = None
        self.duration: float | None = None
        self.status = "DECLARED"
        self.error_type: str | None = None
        self.attempts = 0
        self.reason_code: str | None = None
        self.rule: str | None = None
        self.error_code: str | None = None
        self.field_path: str | None = None
        self.warnings: tuple[str, ...] = ()
        #: The name as requested by the caller (e.g. ``search:v2``); tool.operation by default.
        self.name = name or f"{tool}.{operation}"

    def start(self) -> None:
        """Mark the first dispatch."""
        if self.started_at is None:
            self.started_at = time.time()
        self.status = "STARTED"

    def end(self, status: str, error_type: str | None = None) -> None:
        """Mark the final status."""
        self.ended_at = time.time()
        if self.started_at is not None:
            self.duration = self.ended_at - self.started_at
        self.status = status
        self.error_type = error_type

    def as_dict(self) -> dict[str, object]:
        """A plain mapping, for logs and JSON."""
        return {"kind": "operation", **{k: getattr(self, k) for k in self.FIELDS}}

    @classmethod
    def compact_shape(cls, shared: Mapping[str, object], own: tuple[tuple[str, ...], ...]) -> tuple[Any, ...]:
        """The shape of compact records (see `Trace`): the ``shared`` values, and where each own value goes.

        A compact record is ``(shape, *values)``, its i-th value set in each of
        the fields ``own[i]`` names; a field in neither is None. The shape is one
        flat tuple of plain values (the field values, then for each field the
        index of the own value it takes, or -1): the garbage collector stops
        tracking it at its first pass, and a record holding it at the next.

        Raises:
            ValueError: a field is not one of ``FIELDS``, or is named twice.
        """
        placed = {field: index for index, fields in enumerate(own) for field in fields}
        named = [*shared, *(field for fields in own for field in fields)]
        if not set(named) <= set(cls.FIELDS) or len(set(named)) != len(named):
            raise ValueError(f"compact fields must be distinct OperationRecord fields, got {named}")
        return (
            *(shared.get(field) for field in cls.FIELDS),
            *(placed.get(field, -1) for field in cls.FIELDS),
        )

    @classmethod
    def _revived(cls, compact: tuple[Any, ...]) -> OperationRecord:
        """The record a `Trace` kept compact (a `compact_shape`, then its own values), as an object."""
        shape, *own = compact
        record = cls.__new__(cls)
        count = len(cls.FIELDS)
        for index, name in enumerate(cls.FIELDS):
            source = shape[count + index]
            setattr(record, name, shape[index] if source < 0 else own[source])
        return record

    def __repr__(self) -> str:
        return (
            f"OperationRecord({self.tool}.{self.operation} {self.intent_kind}={self.intent_text!r} "
            f"target={self.target!r} status={self.status})"
        )


@final
class DenialRecord:
    """A denial: which tool, the stable reason code and the rule that decided it."""

    __slots__ = ("at", "reason_code", "rule", "tool")
    #: Like `OperationRecord.status`, so code walking a whole trace can read every record's status.
    status = "DENIED"

    def __init__(self, tool: str, reason_code: str, rule: str) -> None:
        self.tool = tool
        self.reason_code = reason_code
        self.rule = rule
        self.at = time.time()

    def as_dict(self) -> dict[str, object]:
        """A plain mapping, for logs and JSON."""
        return {"kind": "denial", **{k: getattr(self, k) for k in sorted(self.__slots__)}}

    def __repr__(self) -> str:
        return f"DenialRecord({self.tool} {self.reason_code} rule={self.rule})"


#: How many records a context's trace keeps by default: the newest 10,000 (a few MB at most).
DEFAULT_TRACE_RETENTION = 10_000
#: How many levels deep runs may be delegated (each level is one more per-run quota a call counts in).
MAX_DELEGATION_DEPTH = 32


def _retention(value: int | None) -> int | None:
    if value is not None and (type(value) is not int or value < 1):
        raise ValueError("trace retention must be a positive integer or None (unbounded)")
    return value


@final
class Trace:
    """A thread-safe record of what happened in one context: its newest ``retention`` records.

    A long-lived context (a service worker's, an MCP session's) makes records for
    as long as it lives, so the trace keeps only the newest ``retention`` of them
    (default `DEFAULT_TRACE_RETENTION`) and drops the oldest as new ones come: its
    memory is bounded. The audit trail, not the trace, is the durable record of
    every call. ``retention=None`` keeps every record (a short-lived context, a test).

    ``deque.append`` is atomic, so no lock is needed on the hot path; a snapshot
    that an append interrupts is taken again.

    A record whose call has already ended may be kept compact: a tuple of its
    shape (`OperationRecord.compact_shape`: the values every call of its name
    shares, made once) and its own values. Plain values, which the garbage
    collector stops tracking, where a record object kept for the trace's
    lifetime costs every full collection; and few of them, as a young
    collection walks each item of a tuple before it stops tracking it.
    The by-name fast path records its successful calls that way, when they end.
    `records` reads such a record back as an equal `OperationRecord` (a new
    object at each read).
    """

    __slots__ = ("_records",)

    def __init__(self, retention: int | None = DEFAULT_TRACE_RETENTION) -> None:
        self._records: deque[OperationRecord | DenialRecord | tuple[Any, ...]] = deque(
            maxlen=_retention(retention)
        )

    @property
    def retention(self) -> int | None:
        """How many records the trace keeps (None: every record)."""
        return self._records.maxlen

    def append(self, record: OperationRecord | DenialRecord) -> None:
        """Add a record (the oldest one is dropped when the trace holds ``retention`` already)."""
        self._records.append(record)

    @property
    def appender(self) -> Callable[[OperationRecord | DenialRecord], None]:
        """`append` without the method call, for the hot path."""
        return self._records.append

    @property
    def finished_appender(self) -> Callable[[tuple[Any, ...]], None]:
        """Appends a compact record (its shape, then its own values), for the hot path."""
        return self._records.append

    def records(self) -> list[OperationRecord | DenialRecord]:
        """A snapshot of the records kept, oldest first."""
        while True:
            try:
                kept = list(self._records)
            except RuntimeError:  # "deque mutated during iteration": a finalizer let an append in
                continue
            return [OperationRecord._revived(r) if type(r) is tuple else r for r in kept]  # type: ignore[misc]

    def operations(self, tool: str | None = None) -> list[OperationRecord]:
        """Operation records, optionally only those of ``tool``."""
        return [r for r in self.records() if isinstance(r, OperationRecord) and tool in (None, r.tool)]

    def denials(self, tool: str | None = None) -> list[DenialRecord]:
        """Denial records, optionally only those of ``tool``."""
        return [r for r in self.records() if isinstance(r, DenialRecord) and tool in (None, r.tool)]

    def __iter__(self) -> Iterator[OperationRecord | DenialRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self._records)


class ExecutionContext(BaseModel):
    """Who is acting, for which tenant, in which run. Immutable.

    Build it in application code after authenticating the caller; never from
    model output or user JSON. ``run_id`` and ``correlation_id`` are generated
    when absent. The `trace` collects what tools did in this context.
    """

    model_config = ConfigDict(frozen=True, extra="forbid", arbitrary_types_allowed=True)

    tenant: _Ref
    """Reference to the tenant the work is done for."""
    principal: _Ref
    """Reference to the authenticated principal (user or service)."""
    roles: AbstractSet[_Ref] = frozenset()
    """Roles of the principal, as established by the application (any set; kept as a frozenset)."""
    run_id: _Ref = Field(default_factory=_new_id)
    """Identifier of this agent run."""
    correlation_id: _Ref = Field(default_factory=_new_id)
    """Identifier linking this run to the request that caused it."""
    deadline: datetime | None = None
    """When the work must be finished (timezone-aware); later calls are DENIED/DEADLINE_EXCEEDED."""
    budget: Budget | None = Field(default=None, exclude=True)
    """Tool-call limits for this run; exhausted calls are DENIED/BUDGET_EXHAUSTED."""
    parent_run_id: _Ref | None = None
    """The run that delegated this one (`delegate`); None for a top-level run. Audited."""
    ancestor_run_ids: tuple[_Ref, ...] = Field(default=(), max_length=MAX_DELEGATION_DEPTH)
    """Every run above this one, the top-level run first and ``parent_run_id`` last (`delegate` sets it):
    per-run shared budgets count a delegated call in each of them."""
    credential: _Ref | None = None
    """The label of the credential the caller authenticated with (``api-key:ci-bot``,
    ``jwt:<issuer>``; `toolbox.auth.Identity.credential`), never the secret. Audited."""
    scope: DelegationScope | None = Field(default=None, exclude=True)
    """The tools and operations a delegated run may call; others are DENIED/DELEGATION_SCOPE."""
    trace_retention: int | None = Field(default=DEFAULT_TRACE_RETENTION, exclude=True)
    """How many records `trace` keeps, the newest (None: all); the audit trail keeps every call."""

    _trace: Trace = PrivateAttr(default_factory=Trace)

    def model_post_init(self, context: Any, /) -> None:
        """Give the trace this context's retention (the default one is built by the private default)."""
        if self.trace_retention != DEFAULT_TRACE_RETENTION:
            private: dict[str, Trace] = self.__pydantic_private__  # type: ignore[assignment]
            private["_trace"] = Trace(self.trace_retention)

    @field_validator("trace_retention", mode="before")
    @classmethod
    def _positive_retention(cls, value: int | None) -> int | None:
        return _retention(value)

    @field_validator("roles", mode="after")
    @classmethod
    def _frozen_roles(cls, value: AbstractSet[str]) -> frozenset[str]:
        # Accept any set (``{"auditor"}``), store an immutable one: the context is frozen.
        return frozenset(value)

    @field_validator("deadline")
    @classmethod
    def _aware(cls, value: datetime | None) -> datetime | None:
        if value is not None and value.tzinfo is None:
            raise ValueError("must be timezone-aware, e.g. datetime.now(timezone.utc)")
        return value

    def delegate(
        self,
        *,
        tools: Iterable[object] | None = None,
        operations: Iterable[str] | None = None,
        budget: Budget | int | None = None,
        deadline: datetime | None = None,
        roles: Iterable[str] | None = None,
    ) -> ExecutionContext:
        """A child context for a sub-agent: the same tenant and principal, never more than this one.

        Each argument narrows; None keeps this context's value. The child gets a new
        ``run_id``, this ``correlation_id``, ``parent_run_id`` = this ``run_id`` and its own trace.

        Args:
            tools: tool names (or ``@tool`` functions) the child may call.
            operations: ``tool.operation`` names the child may call.
            budget: the child's call limit (an int), or a `Budget` whose limits it gets; carved out
                of this context's remaining budget, and every child call also counts here.
            deadline: the child's deadline, no later than this one's (timezone-aware).
            roles: a subset of this context's roles.

        Raises:
            DelegationError: an argument would widen what this context may do.
        """
        ancestors = (*self.lineage, self.run_id)
        if len(ancestors) > MAX_DELEGATION_DEPTH:
            raise DelegationError(f"runs may be delegated at most {MAX_DELEGATION_DEPTH} levels deep")
        if roles is not None:
            wanted = frozenset(roles) if not isinstance(roles, str) else None
            if wanted is None:
                raise DelegationError("roles must be a collection of role names, not one string")
            extra = wanted - self.roles
            if extra:
                raise DelegationError(f"cannot delegate roles this run does not have: {sorted(extra)}")
        parent_deadline = self.deadline
        if (
            deadline is not None
            and parent_deadline is not None
            and deadline.tzinfo
            and deadline > parent_deadline
        ):
            # A naive deadline is refused by the field validator below.
            raise DelegationError("a delegated deadline must not be later than the parent's")
        return ExecutionContext(
            tenant=self.tenant,
            principal=self.principal,
            roles=self.roles if roles is None else frozenset(roles),
            correlation_id=self.correlation_id,
            deadline=self.deadline if deadline is None else deadline,
            budget=_carve(self.budget, budget),
            parent_run_id=self.run_id,
            ancestor_run_ids=ancestors,
            scope=DelegationScope.narrow(self.scope, tools, operations),
            trace_retention=self.trace_retention,
            credential=self.credential,
        )

    @property
    def lineage(self) -> tuple[str, ...]:
        """The runs above this one, the top-level run first (just ``parent_run_id`` when built by hand)."""
        if self.ancestor_run_ids:
            return self.ancestor_run_ids
        return (self.parent_run_id,) if self.parent_run_id is not None else ()

    @model_validator(mode="after")
    def _parent_last(self) -> ExecutionContext:
        ancestors = self.ancestor_run_ids
        if ancestors and ancestors[-1] != self.parent_run_id:
            raise ValueError("ancestor_run_ids must end with parent_run_id")
        return self

    @property
    def trace(self) -> Trace:
        """What happened in this context: intents, outcomes and denials."""
        # Read pydantic's private storage directly: plain attribute access falls back to
        # BaseModel.__getattr__, which costs microseconds on every operation.
        private: dict[str, Trace] = self.__pydantic_private__  # type: ignore[assignment]
        return private["_trace"]


def _carve(parent: Budget | None, wanted: Budget | int | None) -> Budget | None:
    """The child's budget: carved out of ``parent`` when there is one, else ``wanted`` as given."""
    if isinstance(wanted, bool) or not isinstance(wanted, (Budget, int, type(None))):
        raise DelegationError(f"budget must be an int or a Budget, got {type(wanted).__name__}")
    max_calls = wanted.max_calls if isinstance(wanted, Budget) else wanted
    per_tool = wanted.per_tool if isinstance(wanted, Budget) else None
    if parent is None:
        return None if wanted is None else Budget(max_calls=max_calls, per_tool=per_tool)
    return parent.carve(max_calls=max_calls, per_tool=per_tool)
