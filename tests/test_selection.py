"""Tool selection: decisions, reason codes, failure policies and the async twin."""

import asyncio
from collections.abc import Sequence

import pytest

from toolbox import RiskClass, ToolboxError, ToolDescriptor
from toolbox.doors import (
    ActionDecision,
    ActionType,
    AsyncToolSelector,
    KeywordSelector,
    SelectionFailurePolicy,
    SelectionReason,
    StaticSelector,
    ToolChoice,
    ToolSelectionError,
    ToolSelector,
    aselect_tools,
    select_tools,
)
from toolbox.testing import test_context

OPEN = SelectionFailurePolicy.FAIL_OPEN_ALL_TOOLS
CLOSED = SelectionFailurePolicy.FAIL_CLOSED_ALWAYS_INCLUDE
THROW = SelectionFailurePolicy.FAIL_CLOSED_THROW

CALC = ToolChoice("calculator.evaluate", "Evaluate an arithmetic expression", always_include=True)
GET = ToolChoice("http.get", "Fetch a web page over HTTP")
READ = ToolChoice("fs.read", "Read a file from disk")
CANDIDATES = (CALC, GET, READ)
PLAIN = (GET, READ)  # no always-include candidate


class Raising:
    """A selector that raises an exception whose message holds a secret."""

    def select(self, context, turn, candidates):
        raise ValueError("token=abc")

    async def aselect(self, context, turn, candidates):
        raise ValueError("token=abc")


class Returning:
    """A selector that returns whatever it was given, sync and async."""

    def __init__(self, answer: object) -> None:
        self.answer = answer

    def select(self, context, turn, candidates):
        return self.answer

    async def aselect(self, context, turn, candidates):
        return self.answer


class Model:
    """A fake model that records every call."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, ...]] = []

    def __call__(self, tools: Sequence[str]) -> str:
        self.calls.append(tuple(tools))
        return "answer"


def run_turn(selector: ToolSelector, model: Model, policy: SelectionFailurePolicy) -> str:
    """What an agent loop does: select, then call the model with the chosen tools."""
    decision = select_tools(selector, test_context(), "fetch the page", CANDIDATES, on_failure=policy)
    return model(decision.tools)


FAILING = {
    "raises": (Raising(), "SELECTOR_FAILED"),
    "unknown tool": (Returning(["http.get", "shell.exec"]), "SELECTOR_RETURNED_UNKNOWN_TOOL"),
    "only unknown": (Returning(["shell.exec"]), "SELECTOR_RETURNED_UNKNOWN_TOOL"),
    "bare str": (Returning("http.get"), "SELECTOR_RETURNED_INVALID"),
    "bytes": (Returning(b"http.get"), "SELECTOR_RETURNED_INVALID"),
    "None": (Returning(None), "SELECTOR_RETURNED_INVALID"),
    "set": (Returning({"http.get"}), "SELECTOR_RETURNED_INVALID"),
    "generator": (Returning(n for n in ["http.get"]), "SELECTOR_RETURNED_INVALID"),
    "non-str item": (Returning(["http.get", 3]), "SELECTOR_RETURNED_INVALID"),
}
failing = pytest.mark.parametrize(("selector", "reason"), FAILING.values(), ids=FAILING.keys())


def test_reason_codes_and_actions_are_stable():
    """Reason codes and action types are exact, documented strings."""
    assert [r.value for r in SelectionReason] == [
        "SELECTED",
        "EMPTY_SELECTION",
        "SELECTOR_FAILED",
        "SELECTOR_RETURNED_INVALID",
        "SELECTOR_RETURNED_UNKNOWN_TOOL",
    ]
    assert [a.value for a in ActionType] == [
        "OFFER_TOOLS",
        "FINAL_ANSWER",
        "OFFER_ALL_TOOLS",
        "OFFER_ALWAYS_INCLUDE",
        "ABORT_TURN",
    ]
    assert [p.value for p in SelectionFailurePolicy] == [
        "FAIL_OPEN_ALL_TOOLS",
        "FAIL_CLOSED_ALWAYS_INCLUDE",
        "FAIL_CLOSED_THROW",
    ]


def test_selection_offers_chosen_tools_plus_always_include():
    """A successful selection is the chosen names plus always-include ones, in candidate order."""
    decision = select_tools(
        StaticSelector(["fs.read", "http.get"]), test_context(), "t", CANDIDATES, on_failure=THROW
    )
    assert decision == ActionDecision(
        ActionType.OFFER_TOOLS, "SELECTED", ("calculator.evaluate", "http.get", "fs.read")
    )
    assert not decision.failed


def test_duplicate_names_from_selector_are_offered_once():
    """Duplicates are not a failure; each tool is offered once."""
    decision = select_tools(
        StaticSelector(["http.get", "http.get"]), test_context(), "t", PLAIN, on_failure=THROW
    )
    assert (decision.action, decision.reason_code, decision.tools) == (
        ActionType.OFFER_TOOLS,
        "SELECTED",
        ("http.get",),
    )


def test_empty_selection_is_a_final_answer_not_a_failure():
    """An empty selection without always-include tools asks for a final answer."""
    decision = select_tools(StaticSelector([]), test_context(), "t", PLAIN, on_failure=THROW)
    assert (decision.action, decision.reason_code, decision.tools) == (
        ActionType.FINAL_ANSWER,
        "EMPTY_SELECTION",
        (),
    )
    assert not decision.failed


def test_empty_selection_still_offers_always_include():
    """Always-include tools are offered even when the selector chose nothing."""
    decision = select_tools(StaticSelector(()), test_context(), "t", CANDIDATES, on_failure=THROW)
    assert decision.action is ActionType.OFFER_TOOLS
    assert decision.reason_code == "EMPTY_SELECTION"
    assert decision.tools == ("calculator.evaluate",)


def test_no_candidates_is_a_final_answer():
    """With nothing to offer, an empty answer is a final answer."""
    decision = select_tools(KeywordSelector(), test_context(), "anything", [], on_failure=THROW)
    assert decision.action is ActionType.FINAL_ANSWER


@failing
def test_fail_open_offers_every_candidate(selector, reason):
    """FAIL_OPEN_ALL_TOOLS offers all candidates and keeps the failure's reason code."""
    decision = select_tools(selector, test_context(), "t", CANDIDATES, on_failure=OPEN)
    assert decision.action is ActionType.OFFER_ALL_TOOLS
    assert decision.reason_code == reason
    assert decision.tools == ("calculator.evaluate", "http.get", "fs.read")
    assert decision.failed
    assert "fail open" in decision.detail


@failing
def test_fail_closed_offers_only_always_include(selector, reason):
    """FAIL_CLOSED_ALWAYS_INCLUDE offers only always-include candidates."""
    decision = select_tools(selector, test_context(), "t", CANDIDATES, on_failure=CLOSED)
    assert (decision.action, decision.reason_code) == (ActionType.OFFER_ALWAYS_INCLUDE, reason)
    assert decision.tools == ("calculator.evaluate",)
    assert decision.failed


@failing
def test_fail_closed_without_always_include_offers_nothing(selector, reason):
    """With no always-include candidate, fail-closed offers no tool but stays a failure action."""
    decision = select_tools(selector, test_context(), "t", PLAIN, on_failure=CLOSED)
    assert (decision.action, decision.reason_code, decision.tools) == (
        ActionType.OFFER_ALWAYS_INCLUDE,
        reason,
        (),
    )


@failing
def test_fail_closed_throw_raises(selector, reason):
    """FAIL_CLOSED_THROW raises ToolSelectionError carrying an ABORT_TURN decision."""
    with pytest.raises(ToolSelectionError) as caught:
        select_tools(selector, test_context(), "t", CANDIDATES, on_failure=THROW)
    err = caught.value
    assert err.reason_code == reason
    assert err.decision.action is ActionType.ABORT_TURN
    assert err.decision.reason_code == reason
    assert err.decision.tools == ()
    assert isinstance(err, ToolboxError)
    assert isinstance(err, RuntimeError)


@failing
def test_throw_happens_before_the_model_call(selector, reason):
    """The model is never called when selection fails under FAIL_CLOSED_THROW."""
    model = Model()
    with pytest.raises(ToolSelectionError):
        run_turn(selector, model, THROW)
    assert model.calls == []


@pytest.mark.parametrize("policy", [OPEN, CLOSED])
@pytest.mark.parametrize("answer", [["shell.exec"], ["http.get", "shell.exec"]])
def test_unknown_tools_are_never_offered(policy, answer):
    """A name the selector made up is never offered, under any policy."""
    model = Model()
    run_turn(Returning(answer), model, policy)
    assert model.calls
    assert all("shell.exec" not in tools for tools in model.calls)


@pytest.mark.parametrize("policy", list(SelectionFailurePolicy))
def test_detail_holds_no_exception_message(policy):
    """A selector's exception message (which may hold secrets) never reaches the decision."""
    try:
        decision = select_tools(Raising(), test_context(), "t", CANDIDATES, on_failure=policy)
    except ToolSelectionError as err:
        decision = err.decision
        assert "token=abc" not in str(err)
        assert err.__cause__ is None
        assert err.__context__ is None  # no traceback chain back to the secret
    assert "token=abc" not in decision.detail
    assert "token=abc" not in repr(decision)
    assert decision.detail.startswith("selector raised ValueError")


def test_detail_holds_no_made_up_tool_name():
    """The unknown names a selector returned stay out of the detail."""
    decision = select_tools(Returning(["secret-tool"]), test_context(), "t", PLAIN, on_failure=OPEN)
    assert "secret-tool" not in decision.detail
    assert decision.detail == "selector returned 1 name(s) that are not candidates; fail open"


class BrokenSequence(Sequence[str]):
    """A sequence that fails when read."""

    def __getitem__(self, index):
        raise RuntimeError("boom")

    def __len__(self):
        return 1


def test_sequence_that_fails_when_read_is_a_selector_failure():
    """Errors while reading the selector's answer are handled by the policy too."""
    decision = select_tools(Returning(BrokenSequence()), test_context(), "t", CANDIDATES, on_failure=CLOSED)
    assert (decision.reason_code, decision.tools) == ("SELECTOR_FAILED", ("calculator.evaluate",))
    assert decision.detail.startswith("selector raised RuntimeError")


def test_keyboard_interrupt_is_not_a_selector_failure():
    """BaseExceptions such as KeyboardInterrupt propagate instead of triggering the policy."""

    class Interrupted:
        def select(self, context, turn, candidates):
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        select_tools(Interrupted(), test_context(), "t", CANDIDATES, on_failure=OPEN)


def test_policy_has_no_default():
    """Callers must choose a failure policy."""
    with pytest.raises(TypeError):
        select_tools(StaticSelector([]), test_context(), "t", CANDIDATES)  # type: ignore[call-arg]


@pytest.mark.parametrize("policy", ["FAIL_OPEN_ALL_TOOLS", None, 0])
def test_unknown_policy_is_refused(policy):
    """The policy must be a SelectionFailurePolicy member, not a look-alike string."""
    with pytest.raises(TypeError, match="SelectionFailurePolicy"):
        select_tools(StaticSelector([]), test_context(), "t", CANDIDATES, on_failure=policy)


@pytest.mark.parametrize(
    "context", [None, {"tenant": "t", "principal": "p"}, '{"tenant": "t", "principal": "p"}']
)
def test_context_must_be_trusted(context):
    """Anything but an ExecutionContext is refused before the selector runs."""
    selector = Raising()
    with pytest.raises(TypeError, match="ExecutionContext"):
        select_tools(selector, context, "t", CANDIDATES, on_failure=OPEN)


def test_duplicate_candidate_names_are_refused():
    """Two candidates with one name are a caller bug."""
    with pytest.raises(ValueError, match=r"duplicate candidate name 'http\.get'"):
        select_tools(StaticSelector([]), test_context(), "t", [GET, GET], on_failure=OPEN)


@pytest.mark.parametrize(
    ("selector", "turn", "candidates"),
    [
        (object(), "t", CANDIDATES),
        (StaticSelector([]), None, CANDIDATES),
        (StaticSelector([]), "t", ["http.get"]),
        (StaticSelector([]), "t", "http.get"),
        (StaticSelector([]), "t", {GET}),
    ],
)
def test_wrong_argument_types_are_refused(selector, turn, candidates):
    """Programming errors raise TypeError instead of being handled as selector failures."""
    with pytest.raises(TypeError):
        select_tools(selector, test_context(), turn, candidates, on_failure=OPEN)


def test_selector_receives_trusted_context_and_candidates():
    """The selector sees the caller's context, the turn and the candidates."""
    seen = []

    class Recording:
        def select(self, context, turn, candidates):
            seen.append((context, turn, tuple(candidates)))
            return []

    context = test_context()
    select_tools(Recording(), context, "hello", CANDIDATES, on_failure=THROW)
    assert seen == [(context, "hello", CANDIDATES)]


def test_async_twin_matches_sync():
    """aselect_tools gives the same decisions as select_tools."""
    context = test_context()
    for selector in [StaticSelector(["http.get"]), StaticSelector([]), *(s for s, _ in FAILING.values())]:
        for policy in (OPEN, CLOSED):
            expected = select_tools(selector, context, "t", CANDIDATES, on_failure=policy)
            assert (
                asyncio.run(aselect_tools(selector, context, "t", CANDIDATES, on_failure=policy)) == expected
            )


def test_async_twin_throws_before_the_model_call():
    """The async twin raises under FAIL_CLOSED_THROW, so the model is never called."""
    model = Model()

    async def turn() -> str:
        decision = await aselect_tools(Raising(), test_context(), "t", CANDIDATES, on_failure=THROW)
        return model(decision.tools)

    with pytest.raises(ToolSelectionError) as caught:
        asyncio.run(turn())
    assert caught.value.reason_code == "SELECTOR_FAILED"
    assert model.calls == []


def test_async_twin_requires_aselect():
    """A sync-only selector is refused by aselect_tools."""

    class SyncOnly:
        def select(self, context, turn, candidates):
            return []

    assert isinstance(SyncOnly(), ToolSelector)
    assert not isinstance(SyncOnly(), AsyncToolSelector)
    with pytest.raises(TypeError, match="aselect"):
        asyncio.run(aselect_tools(SyncOnly(), test_context(), "t", CANDIDATES, on_failure=OPEN))


def test_keyword_selector_matches_name_or_summary():
    """KeywordSelector picks candidates sharing a word with the turn, ignoring stop words and case."""
    selector = KeywordSelector()
    context = test_context()
    assert selector.select(context, "Please GET https://example.com", PLAIN) == ["http.get"]
    assert selector.select(context, "read the file notes.txt", PLAIN) == ["fs.read"]
    assert selector.select(context, "what is the weather", PLAIN) == []
    decision = select_tools(selector, context, "fetch a page", CANDIDATES, on_failure=THROW)
    assert decision.tools == ("calculator.evaluate", "http.get")


def test_static_selector_refuses_bare_str():
    """StaticSelector("http.get") would be split into letters, so it is refused."""
    with pytest.raises(TypeError):
        StaticSelector("http.get")
    with pytest.raises(TypeError):
        StaticSelector([1])  # type: ignore[list-item]


def test_ready_made_selectors_implement_both_protocols():
    """StaticSelector and KeywordSelector are sync and async selectors."""
    for selector in (StaticSelector([]), KeywordSelector()):
        assert isinstance(selector, ToolSelector)
        assert isinstance(selector, AsyncToolSelector)


def test_tool_choice_is_frozen_and_validated():
    """ToolChoice is immutable, slotted and checks its fields."""
    with pytest.raises(AttributeError):
        GET.name = "other"  # type: ignore[misc]
    assert not hasattr(GET, "__dict__")
    with pytest.raises(ValueError):
        ToolChoice("")
    with pytest.raises(ValueError):
        ToolChoice(" http.get")
    with pytest.raises(TypeError):
        ToolChoice("http.get", always_include="yes")  # type: ignore[arg-type]


def test_tool_choice_for_descriptor():
    """Each operation becomes a choice under its wire name, falling back to the tool summary."""
    descriptor = ToolDescriptor(
        name="http",
        version="1",
        summary="HTTP client",
        risk=RiskClass.EXTERNAL_RESOURCE,
        operations=[{"name": "get", "summary": "Fetch a URL"}, {"name": "post"}],
    )
    assert ToolChoice.for_descriptor(descriptor) == (
        ToolChoice("http__get", "Fetch a URL"),
        ToolChoice("http__post", "HTTP client"),
    )
    assert all(c.always_include for c in ToolChoice.for_descriptor(descriptor, always_include=True))


def test_decision_as_dict():
    """Decisions serialise to plain JSON values."""
    decision = select_tools(Raising(), test_context(), "t", CANDIDATES, on_failure=CLOSED)
    assert decision.as_dict() == {
        "action": "OFFER_ALWAYS_INCLUDE",
        "reason_code": "SELECTOR_FAILED",
        "tools": ["calculator.evaluate"],
        "detail": "selector raised ValueError; fail closed to always-include tools",
    }
