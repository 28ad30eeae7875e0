"""Tool selection: which tools an agent sees for one turn.

A `ToolSelector` picks tool names from the candidates offered for a turn;
`select_tools` (or `aselect_tools`) runs it, checks its answer and returns an
`ActionDecision`: what the caller should do next, with a stable reason code.

* A non-empty selection is ``OFFER_TOOLS`` / ``SELECTED``.
* An empty selection is legal, not a failure: the model should answer without
  tools (``FINAL_ANSWER`` / ``EMPTY_SELECTION``).
* Candidates marked ``always_include`` are offered whatever the selector says,
  so a successful selection is the selector's names plus those.
* A selector *fails* when it raises, returns something that is not a sequence
  of strings, or returns a name that is not a candidate. A selector never
  invents a tool: one unknown name fails the whole selection. Duplicate names
  are not a failure; they are offered once.
* On failure the caller's `SelectionFailurePolicy` decides: offer every
  candidate, offer only the always-include candidates, or raise
  `ToolSelectionError` before any model call is made.

The decision's ``action`` says what happens and its ``reason_code`` says why,
so "how often did we fail open" (``action == OFFER_ALL_TOOLS``) and "why do
selectors fail" (the reason code) are separate questions. Offered tools keep
the candidates' order, whatever order the selector used, so prompts stay
stable from turn to turn.

A decision's ``detail`` never holds a selector's exception message or the
names it made up, only type names and counts: both can carry model output or
secrets.
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Protocol, final, runtime_checkable

from toolbox.errors import ToolboxError
from toolbox.foundations._context import ExecutionContext
from toolbox.foundations._descriptor import ToolDescriptor
from toolbox.foundations._wire_names import to_wire_name

__all__ = [
    "ActionDecision",
    "ActionType",
    "AsyncToolSelector",
    "KeywordSelector",
    "SelectionFailurePolicy",
    "SelectionReason",
    "StaticSelector",
    "ToolChoice",
    "ToolSelectionError",
    "ToolSelector",
    "aselect_tools",
    "select_tools",
]


@final
@dataclass(frozen=True, slots=True)
class ToolChoice:
    """One tool operation that may be offered to the model for a turn."""

    name: str
    """The name the model calls: the wire name ``definitions()`` offers (``http__get``), or the dotted
    ``http.get``; the gateway accepts both."""
    summary: str = ""
    """One line for the selector (and the model)."""
    always_include: bool = False
    """Offered on every turn, whatever the selector returns or however it fails."""

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not isinstance(self.summary, str):
            raise TypeError("ToolChoice name and summary must be str")
        if not self.name or self.name != self.name.strip():
            raise ValueError("ToolChoice name must be non-empty without surrounding whitespace")
        if not isinstance(self.always_include, bool):
            raise TypeError("ToolChoice always_include must be a bool")

    @classmethod
    def for_descriptor(
        cls, descriptor: ToolDescriptor, *, always_include: bool = False
    ) -> tuple[ToolChoice, ...]:
        """One choice per operation, under its wire name (``tool__operation``), as ``definitions()`` names it.

        Args:
            descriptor: the tool to describe.
            always_include: mark every operation of the tool always-include.

        Returns:
            The choices, in the descriptor's operation order.
        """
        return tuple(
            cls(
                to_wire_name(f"{descriptor.name}.{op.name}"), op.summary or descriptor.summary, always_include
            )
            for op in descriptor.operations
        )


@runtime_checkable
class ToolSelector(Protocol):
    """Chooses, for one turn, which candidates the model sees."""

    def select(self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]) -> Sequence[str]:
        """Return the names of the chosen candidates; an empty sequence means "answer without tools"."""
        ...


@runtime_checkable
class AsyncToolSelector(Protocol):
    """The async twin of `ToolSelector`."""

    async def aselect(
        self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]
    ) -> Sequence[str]:
        """Return the names of the chosen candidates; an empty sequence means "answer without tools"."""
        ...


class SelectionFailurePolicy(str, enum.Enum):
    """What to do when the selector fails. There is no default: callers choose."""

    FAIL_OPEN_ALL_TOOLS = "FAIL_OPEN_ALL_TOOLS"
    """Offer every candidate (compatibility with agents that always see all tools)."""
    FAIL_CLOSED_ALWAYS_INCLUDE = "FAIL_CLOSED_ALWAYS_INCLUDE"
    """Offer only the always-include candidates, possibly none."""
    FAIL_CLOSED_THROW = "FAIL_CLOSED_THROW"
    """Raise `ToolSelectionError`; the turn stops before any model call."""


class ActionType(str, enum.Enum):
    """What the caller does with the model after selection."""

    OFFER_TOOLS = "OFFER_TOOLS"
    """The selector succeeded and at least one tool is offered."""
    FINAL_ANSWER = "FINAL_ANSWER"
    """The selector succeeded with no tools: the model answers without tools."""
    OFFER_ALL_TOOLS = "OFFER_ALL_TOOLS"
    """The selector failed; `SelectionFailurePolicy.FAIL_OPEN_ALL_TOOLS` offers every candidate."""
    OFFER_ALWAYS_INCLUDE = "OFFER_ALWAYS_INCLUDE"
    """The selector failed; `SelectionFailurePolicy.FAIL_CLOSED_ALWAYS_INCLUDE` offers only those."""
    ABORT_TURN = "ABORT_TURN"
    """The selector failed; `SelectionFailurePolicy.FAIL_CLOSED_THROW` raised. Only on the error."""


class SelectionReason(str, enum.Enum):
    """Stable reason codes of an `ActionDecision`."""

    SELECTED = "SELECTED"
    """The selector chose at least one candidate."""
    EMPTY_SELECTION = "EMPTY_SELECTION"
    """The selector chose no candidate (always-include ones may still be offered)."""
    SELECTOR_FAILED = "SELECTOR_FAILED"
    """The selector raised an exception."""
    SELECTOR_RETURNED_INVALID = "SELECTOR_RETURNED_INVALID"
    """The selector returned something other than a sequence of str."""
    SELECTOR_RETURNED_UNKNOWN_TOOL = "SELECTOR_RETURNED_UNKNOWN_TOOL"
    """The selector returned a name that is not a candidate."""


@final
@dataclass(frozen=True)
class ActionDecision:
    """The outcome of one selection: what to do, why, and which tools the model sees."""

    action: ActionType
    reason_code: str
    """A `SelectionReason` value, e.g. ``SELECTED`` or ``SELECTOR_FAILED``."""
    tools: tuple[str, ...]
    """Names of the tools the model will see, in candidate order."""
    detail: str = ""
    """A sentence for people. Never an exception message or a made-up tool name."""

    @property
    def failed(self) -> bool:
        """True when the selector failed and the failure policy decided the tools."""
        return self.reason_code not in (SelectionReason.SELECTED, SelectionReason.EMPTY_SELECTION)

    def as_dict(self) -> dict[str, object]:
        """A JSON-ready mapping."""
        return {
            "action": self.action.value,
            "reason_code": self.reason_code,
            "tools": list(self.tools),
            "detail": self.detail,
        }


class ToolSelectionError(ToolboxError, RuntimeError):
    """The selector failed under `SelectionFailurePolicy.FAIL_CLOSED_THROW`; no model call was made.

    Attributes:
        decision: the `ActionDecision` (action ``ABORT_TURN``, no tools).
        reason_code: the decision's reason code, e.g. ``SELECTOR_FAILED``.
    """

    def __init__(self, decision: ActionDecision) -> None:
        super().__init__(
            f"tool selection failed ({decision.reason_code}): {decision.detail}; no model call was made"
        )
        self.decision = decision
        self.reason_code = decision.reason_code


@final
class StaticSelector:
    """Always returns the same names: for tests and fixed tool sets.

    Args:
        names: the names to return on every turn. A bare str is refused rather
            than split into letters. Names that are not candidates make the
            selection fail, as for any selector.
    """

    __slots__ = ("_names",)

    def __init__(self, names: Iterable[str]) -> None:
        if isinstance(names, str):
            raise TypeError("StaticSelector takes an iterable of names, not a single str")
        self._names = tuple(names)
        if not all(isinstance(name, str) for name in self._names):
            raise TypeError("StaticSelector names must be str")

    def select(self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]) -> Sequence[str]:
        """Return the configured names, whatever the turn."""
        return self._names

    async def aselect(
        self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]
    ) -> Sequence[str]:
        """Return the configured names, whatever the turn."""
        return self._names

    def __repr__(self) -> str:
        return f"StaticSelector({list(self._names)!r})"


_WORD = re.compile(r"[a-z0-9]+")
_STOP_WORDS = frozenset(
    {"and", "are", "can", "for", "from", "has", "have", "how", "into", "its", "not", "please", "that"}
    | {"the", "this", "was", "what", "when", "where", "which", "who", "why", "will", "with", "you", "your"}
)


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) >= 3 and w not in _STOP_WORDS}


@final
class KeywordSelector:
    """Selects candidates whose name or summary shares a word with the turn.

    Words are lowercase runs of letters and digits, at least three long, minus
    a few English stop words; ``http.get`` contributes ``http`` and ``get``.
    A naive baseline with no model behind it, like httpx's ``MockTransport``
    beside its real transports: useful for tests, demos and as a fallback.
    """

    __slots__ = ()

    def select(self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]) -> Sequence[str]:
        """Return the names of the candidates that share a word with ``turn``."""
        wanted = _words(turn)
        return [c.name for c in candidates if wanted & _words(f"{c.name} {c.summary}")]

    async def aselect(
        self, context: ExecutionContext, turn: str, candidates: Sequence[ToolChoice]
    ) -> Sequence[str]:
        """Async form of `select`."""
        return self.select(context, turn, candidates)

    def __repr__(self) -> str:
        return "KeywordSelector()"


def _check_inputs(
    context: object, turn: object, candidates: object, on_failure: object
) -> tuple[ToolChoice, ...]:
    if not isinstance(context, ExecutionContext):
        raise TypeError(f"context must be an ExecutionContext, not {type(context).__name__}")
    if not isinstance(turn, str):
        raise TypeError(f"turn must be str, not {type(turn).__name__}")
    if not isinstance(on_failure, SelectionFailurePolicy):
        raise TypeError(f"on_failure must be a SelectionFailurePolicy, not {type(on_failure).__name__}")
    if isinstance(candidates, str) or not isinstance(candidates, Sequence):
        raise TypeError("candidates must be a sequence of ToolChoice")
    choices = tuple(candidates)
    seen: set[str] = set()
    for choice in choices:
        if not isinstance(choice, ToolChoice):
            raise TypeError(f"candidates must be ToolChoice objects, not {type(choice).__name__}")
        if choice.name in seen:
            raise ValueError(f"duplicate candidate name {choice.name!r}")
        seen.add(choice.name)
    return choices


def _snapshot(answer: object) -> object:
    """Copy a sequence answer, so a selector's odd or mutable sequence is read once, inside the ``try``."""
    if isinstance(answer, Sequence) and not isinstance(answer, (str, bytes)):
        return tuple(answer)
    return answer


def _decide(
    candidates: tuple[ToolChoice, ...], on_failure: SelectionFailurePolicy, answer: object, error: str
) -> ActionDecision:
    """Turn the selector's answer (or its exception type name in ``error``) into a decision."""
    chosen, reason, detail = _check_answer(candidates, answer, error)
    if reason is None:
        tools = tuple(c.name for c in candidates if c.always_include or c.name in chosen)
        if chosen:
            return ActionDecision(ActionType.OFFER_TOOLS, SelectionReason.SELECTED.value, tools)
        action = ActionType.OFFER_TOOLS if tools else ActionType.FINAL_ANSWER
        detail = "selector chose no tool" + ("; always-include tools offered" if tools else "")
        return ActionDecision(action, SelectionReason.EMPTY_SELECTION.value, tools, detail)
    if on_failure is SelectionFailurePolicy.FAIL_OPEN_ALL_TOOLS:
        every = tuple(c.name for c in candidates)
        return ActionDecision(ActionType.OFFER_ALL_TOOLS, reason.value, every, f"{detail}; fail open")
    if on_failure is SelectionFailurePolicy.FAIL_CLOSED_ALWAYS_INCLUDE:
        kept = tuple(c.name for c in candidates if c.always_include)
        detail = f"{detail}; fail closed to always-include tools"
        return ActionDecision(ActionType.OFFER_ALWAYS_INCLUDE, reason.value, kept, detail)
    raise ToolSelectionError(ActionDecision(ActionType.ABORT_TURN, reason.value, (), detail))


def _check_answer(
    candidates: tuple[ToolChoice, ...], answer: object, error: str
) -> tuple[frozenset[str], SelectionReason | None, str]:
    """The chosen names, or the failure reason and a detail holding only type names and counts."""
    if error:
        return frozenset(), SelectionReason.SELECTOR_FAILED, f"selector raised {error}"
    if isinstance(answer, (str, bytes)) or not isinstance(answer, Sequence):
        detail = f"selector returned {type(answer).__name__}, not a sequence of names"
        return frozenset(), SelectionReason.SELECTOR_RETURNED_INVALID, detail
    for item in answer:
        if not isinstance(item, str):
            detail = f"selector returned a {type(item).__name__} item, not a str"
            return frozenset(), SelectionReason.SELECTOR_RETURNED_INVALID, detail
    chosen = frozenset(answer)
    unknown = chosen - {c.name for c in candidates}
    if unknown:
        # The names themselves stay out of the detail: they may be model output.
        detail = f"selector returned {len(unknown)} name(s) that are not candidates"
        return frozenset(), SelectionReason.SELECTOR_RETURNED_UNKNOWN_TOOL, detail
    return chosen, None, ""


def select_tools(
    selector: ToolSelector,
    context: ExecutionContext,
    turn: str,
    candidates: Sequence[ToolChoice],
    *,
    on_failure: SelectionFailurePolicy,
) -> ActionDecision:
    """Run ``selector`` for one turn and decide which tools the model sees.

    ``on_failure`` has no default on purpose: a default of "offer everything"
    is how agent frameworks fail open without anyone deciding to. Choose
    `SelectionFailurePolicy.FAIL_OPEN_ALL_TOOLS` only where that is acceptable.

    Args:
        selector: the `ToolSelector` to run; its exceptions (not
            ``BaseException`` such as ``KeyboardInterrupt``) count as failures.
        context: the trusted context of the turn.
        turn: the user's message or the task text the selector looks at.
        candidates: the tools that may be offered, names unique.
        on_failure: what to do if the selector fails.

    Returns:
        The `ActionDecision`. Its ``tools`` are always candidate names.

    Raises:
        ToolSelectionError: the selector failed and ``on_failure`` is
            ``FAIL_CLOSED_THROW``.
        TypeError: a wrong type for ``selector``, ``context``, ``turn``,
            ``candidates`` or ``on_failure``.
        ValueError: two candidates share a name.
    """
    choices = _check_inputs(context, turn, candidates, on_failure)
    if not isinstance(selector, ToolSelector):
        raise TypeError(f"selector must have a select() method, not {type(selector).__name__}")
    answer: object = None
    error = ""
    try:
        answer = _snapshot(selector.select(context, turn, choices))
    except Exception as exc:  # noqa: BLE001  # any selector exception is a failure the policy handles
        error = type(exc).__name__
    return _decide(choices, on_failure, answer, error)


async def aselect_tools(
    selector: AsyncToolSelector,
    context: ExecutionContext,
    turn: str,
    candidates: Sequence[ToolChoice],
    *,
    on_failure: SelectionFailurePolicy,
) -> ActionDecision:
    """Async twin of `select_tools`: awaits ``selector.aselect``; same rules, same decisions.

    Raises:
        ToolSelectionError: the selector failed and ``on_failure`` is
            ``FAIL_CLOSED_THROW``.
        TypeError: a wrong type for an argument.
        ValueError: two candidates share a name.
    """
    choices = _check_inputs(context, turn, candidates, on_failure)
    if not isinstance(selector, AsyncToolSelector):
        raise TypeError(f"selector must have an aselect() method, not {type(selector).__name__}")
    answer: object = None
    error = ""
    try:
        answer = _snapshot(await selector.aselect(context, turn, choices))
    except Exception as exc:  # noqa: BLE001  # any selector exception is a failure the policy handles
        error = type(exc).__name__
    return _decide(choices, on_failure, answer, error)
