"""By-name argument guards at their limits: exact sizes, cumulative accounting, field paths.

Every guard is tried at its limit (passes) and one past it (refused with its error code and the
path of the offending value), on the flat fast path and on the full walk, which must agree.
Written from `scripts/mutation src/toolbox/pipeline/checks/_arguments.py` (docs/testing.md, "Mutation
testing"): each test pins a behaviour whose change no other test noticed.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Annotated, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import AllowInfNan

from toolbox import Effect, ExecutionContext, Gateway, Governance, RiskClass, Status, ToolPolicy, tool
from toolbox.audit import AuditTrail, MemorySink
from toolbox.errors import ConfigurationError, InvalidArgumentsError
from toolbox.governance import ArgumentLimits
from toolbox.pipeline.checks._arguments import flat_and_small
from toolbox.provider import check_limits

CALLS: list[tuple[str, object]] = []


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def loose(value: Any = None) -> Any:
    """Any JSON value, returned as given."""
    CALLS.append(("loose", value))
    return value


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def mixed(x: Annotated[float, AllowInfNan(True)] = 0.0, value: Any = None) -> Any:
    """``x`` opts in to NaN and infinities; ``value`` does not, whatever its keys are called."""
    CALLS.append(("mixed", value))
    return value


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def numbers(values: list[int]) -> int:
    """A typed list."""
    CALLS.append(("numbers", values))
    return len(values)


@pytest.fixture(autouse=True)
def _clear_calls() -> None:
    CALLS.clear()


def gateway(**limits: int) -> tuple[Gateway, MemorySink]:
    sink = MemorySink()
    governance = Governance(
        audit=AuditTrail(sink, fallback_path=None), limits=ArgumentLimits(**limits) if limits else None
    )
    loaded = Gateway.load(
        policy=ToolPolicy.standard(),
        providers=[loose, mixed, numbers],
        discover=False,
        env={},
        governance=governance,
    )
    return loaded, sink


CONTEXT = ExecutionContext(tenant="tenant-a", principal="alice")
REFUSED = [
    ("INTENT_DECLARED", None, None),
    ("GOVERNANCE_DECISION", "INVALID", "INVALID_ARGUMENTS"),
    ("INVOCATION_RESPONSE", None, "INVALID_ARGUMENTS"),
]


def call(arguments: Any, tool_name: str = "loose", **limits: int) -> tuple[Any, list[Any]]:
    """Invoke ``tool_name`` by name; the result and the trace's (type, decision, status) triples."""
    gw, sink = gateway(**limits)
    context = ExecutionContext(tenant="tenant-a", principal="alice")
    result = gw.invoke(tool_name, arguments, context=context)
    trace = [(r.type.value, r.decision, r.status) for r in sink.read_trace(context.run_id)]
    return result, trace


def assert_refused(result: Any, trace: list[Any], error_code: str, field_path: str) -> None:
    """Refused before the tool ran: status, reason, error code, path, zero runs, the audited refusal."""
    assert (result.status, result.reason_code) == (Status.INVALID_ARGUMENTS, "INVALID_ARGUMENTS")
    assert (result.error_code, result.field_path) == (error_code, field_path)
    assert CALLS == []
    assert trace == REFUSED


def assert_passed(result: Any) -> None:
    assert result.status is Status.SUCCESS, (result.status, result.error_code, result.field_path)
    assert len(CALLS) == 1


# -- size: counted over every value, not just the last one -----------------------------------


def test_many_strings_each_under_the_limit_are_refused_together() -> None:
    """Twenty 60 KB strings are 1.2 MB: refused at the 64 KB limit, naming the string that crossed it.

    The walk pops the last item first: ``value.19`` (60 KB) fits, ``value.18`` crosses the limit.
    """
    result, trace = call({"value": ["x" * 60_000] * 20, "purpose": "Look"})
    assert_refused(result, trace, "too_large", "value.18")


def test_many_small_values_add_up_too() -> None:
    """A thousand 100-byte strings (about 100 KB) in an object: refused, none of them large."""
    value = {f"k{i}": "y" * 100 for i in range(1000)}
    result, trace = call({"value": value, "purpose": "Look"})
    assert_refused(result, trace, "too_large", result.field_path)
    assert result.field_path.startswith("value.k")


# Sizes by the guards' own accounting (docs: "approximate serialized size"): an object costs 2,
# each key its length + 4, a string its length + 2, any other scalar 8. For {"value": V,
# "purpose": "Look"}: 2 + (5 + 4) + (7 + 4) + (4 + 2) = 28, plus what V costs.
FRAME = 28


@pytest.mark.parametrize(
    ("value", "cost", "path"),
    [
        # the flat fast path: V is a scalar
        (7, 8, "value"),
        (2.5, 8, "value"),
        (True, 8, "value"),
        (None, 8, "value"),
        ("abc", 5, "value"),
        # the full walk: V is a container (its keys and items are counted, its brackets are not)
        (["abc"], 5 + 5, "value.0"),
        ({"s": "abc"}, 5 + 5, "value.s"),
        ([1, 2], 2 * (5 + 8), "value.0"),
    ],
    ids=["int", "float", "bool", "none", "str", "list-of-str", "object", "list-of-ints"],
)
def test_size_exactly_at_the_limit_passes_and_one_byte_more_is_refused(
    value: Any, cost: int, path: str
) -> None:
    arguments = {"value": value, "purpose": "Look"}
    assert_passed(call(arguments, max_bytes=FRAME + cost)[0])
    CALLS.clear()
    result, trace = call(arguments, max_bytes=FRAME + cost - 1)
    assert_refused(result, trace, "too_large", path)


# -- collections: item count and depth, with the path of the offending collection ------------


def test_items_exactly_at_the_limit_pass_and_one_more_is_refused() -> None:
    assert_passed(call({"value": [1, 2, 3], "purpose": "Look"}, max_items=3)[0])
    CALLS.clear()
    result, trace = call({"value": {"a": [1, 2, 3, 4]}, "purpose": "Look"}, max_items=3)
    assert_refused(result, trace, "too_many_items", "value.a")


def test_a_top_level_object_with_too_many_keys_is_refused_at_the_root() -> None:
    result, trace = call({"value": 1, "purpose": "Look", "extra": 2}, max_items=2)
    assert_refused(result, trace, "too_many_items", "")


def test_depth_exactly_at_the_limit_passes_and_one_more_is_refused() -> None:
    """The arguments object is level 1: ``{"value": [[1]]}`` is three levels deep."""
    assert_passed(call({"value": [[1]], "purpose": "Look"}, max_depth=3)[0])
    CALLS.clear()
    result, trace = call({"value": [[[1]]], "purpose": "Look"}, max_depth=3)
    assert_refused(result, trace, "too_deep", "value.0.0")


def test_a_nested_object_reports_the_dotted_path_of_its_keys() -> None:
    result, trace = call({"value": {"outer": {"inner": [0, math.nan]}}, "purpose": "Look"})
    assert_refused(result, trace, "non_finite_number", "value.outer.inner.1")


# -- integers and non-finite numbers ---------------------------------------------------------


@pytest.mark.parametrize(("value", "passes"), [(-999, True), (999, True), (-1000, False), (1000, False)])
def test_integer_digits_at_the_limit_on_both_paths(value: int, passes: bool) -> None:
    for arguments, path in (({"value": value}, "value"), ({"value": [value]}, "value.0")):
        CALLS.clear()
        result, trace = call({**arguments, "purpose": "Look"}, max_int_digits=3)
        if passes:
            assert_passed(result)
        else:
            assert_refused(result, trace, "int_too_large", path)
            assert result.message == "an integer has more than 3 digits"


def test_large_integers_within_the_default_bound_pass_the_fast_path_boundary() -> None:
    """2**62 is where the fast path stops deciding alone; the full walk still passes it."""
    for value in (2**62 - 1, 2**62, -(2**62), 10**100):
        CALLS.clear()
        assert_passed(call({"value": value, "purpose": "Look"})[0])


def test_the_non_finite_opt_in_covers_its_own_parameter_only() -> None:
    """``x`` opts in; a key called ``x`` inside another parameter does not."""
    assert_passed(call({"x": math.inf, "value": 1, "purpose": "Look"}, "mixed")[0])
    CALLS.clear()
    result, trace = call({"x": 1.0, "value": {"x": math.nan}, "purpose": "Look"}, "mixed")
    assert_refused(result, trace, "non_finite_number", "value.x")


# -- the shape of the arguments and the schema's errors --------------------------------------


@pytest.mark.parametrize("arguments", [[1, 2], "text", 3, None])
def test_arguments_that_are_not_an_object_are_refused(arguments: Any) -> None:
    result, trace = call(arguments)
    assert (result.status, result.reason_code) == (Status.INVALID_ARGUMENTS, "INVALID_ARGUMENTS")
    assert (result.error_code, result.field_path) == ("not_an_object", "")
    assert CALLS == []
    assert trace[1:] == REFUSED[1:]


def test_a_schema_error_names_the_first_failing_field_with_its_path() -> None:
    result, trace = call({"values": [1, "two"], "purpose": "Count"}, "numbers")
    assert_refused(result, trace, "int_parsing", "values.1")
    assert result.content is None or "argument values.1:" in str(result.content)


def test_an_unknown_argument_is_refused_by_name() -> None:
    result, trace = call({"value": 1, "purpose": "Look", "sneaky": True})
    assert_refused(result, trace, "extra_forbidden", "sneaky")


def test_the_intent_text_is_checked_and_named() -> None:
    result, trace = call({"value": 1, "purpose": "Look\x1b[2J"})
    assert_refused(result, trace, "invalid_intent", "purpose")


# -- the limits themselves --------------------------------------------------------------------


@pytest.mark.parametrize("name", ["max_bytes", "max_depth", "max_items", "max_int_digits"])
@pytest.mark.parametrize("bad", [0, -1, True, 1.5, "8"])
def test_every_limit_must_be_a_positive_integer(name: str, bad: Any) -> None:
    with pytest.raises(ConfigurationError) as caught:
        ArgumentLimits(**{name: bad})
    assert str(caught.value) == f"ArgumentLimits.{name} must be a positive integer, got {bad!r}"


def test_the_smallest_and_largest_limits_are_accepted() -> None:
    smallest = ArgumentLimits(max_bytes=1, max_depth=1, max_items=1, max_int_digits=1)
    assert (smallest.int_bound, smallest.fast_int_range) == (10, (-10, 10))
    largest = ArgumentLimits(max_int_digits=100_000)
    assert largest.int_bound == 10**100_000
    assert largest.fast_int_range == (-(2**62), 2**62)
    with pytest.raises(ConfigurationError, match="at most 100000"):
        ArgumentLimits(max_int_digits=100_001)


# -- the fast path and the full walk agree ----------------------------------------------------

_FLAT_VALUES = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(10**6), max_value=10**6),
    st.floats(allow_nan=True, allow_infinity=True),
    st.text(max_size=40),
)
_FLAT = st.dictionaries(st.text(max_size=10), _FLAT_VALUES, max_size=6)


def _full_walk(arguments: Mapping[str, Any], limits: ArgumentLimits) -> str | None:
    """The full walk's verdict (a read-only mapping is not a dict: no fast path)."""
    try:
        check_limits(MappingProxyType(dict(arguments)), limits)
    except InvalidArgumentsError as exc:
        return exc.error_code
    return None


@given(arguments=_FLAT, max_bytes=st.integers(min_value=1, max_value=200), max_items=st.integers(1, 6))
def test_the_fast_path_accepts_exactly_what_the_full_walk_accepts(
    arguments: dict[str, Any], max_bytes: int, max_items: int
) -> None:
    """Flat arguments: the fast path says yes only where the full walk passes; where it declines,
    the full walk decides (NaN, infinities, huge integers); within the limits it never declines
    a plain value."""
    limits = ArgumentLimits(max_bytes=max_bytes, max_items=max_items, max_int_digits=5)
    fast = flat_and_small(arguments, limits)
    verdict = _full_walk(arguments, limits)
    if fast:
        assert verdict is None
    plain = all(not (isinstance(v, float) and not math.isfinite(v)) for v in arguments.values())
    if verdict is None and plain:
        assert fast


@pytest.mark.parametrize(
    ("arguments", "limits", "code", "message"),
    [
        ([1], {}, "not_an_object", "arguments must be a JSON object, got list"),
        (
            {"value": [[1]], "purpose": "Look"},
            {"max_depth": 2},
            "too_deep",
            "arguments nest deeper than 2 levels",
        ),
        (
            {"value": [1, 2, 3], "purpose": "Look"},
            {"max_items": 2},
            "too_many_items",
            "a collection holds 3 items, more than 2",
        ),
        (
            {"value": ["x" * 50], "purpose": "Look"},
            {"max_bytes": 60},
            "too_large",
            "arguments are larger than 60 bytes",
        ),
        (
            {"value": [math.inf], "purpose": "Look"},
            {},
            "non_finite_number",
            "NaN and infinite numbers are not accepted here",
        ),
    ],
)
def test_each_guard_says_what_it_refused(
    arguments: Any, limits: dict[str, int], code: str, message: str
) -> None:
    result, _ = call(arguments, **limits)
    assert (result.status, result.error_code, result.message) == (Status.INVALID_ARGUMENTS, code, message)
    assert CALLS == []


def test_the_fast_path_passes_flat_arguments_exactly_at_the_limit() -> None:
    """The fast path's own accounting matches the full walk's to the byte, for strings and numbers."""
    for value, cost in (("abc", 5), (7, 8), (2.5, 8), (None, 8), (False, 8)):
        arguments = {"value": value, "purpose": "Look"}
        assert flat_and_small(arguments, ArgumentLimits(max_bytes=FRAME + cost))
        assert not flat_and_small(arguments, ArgumentLimits(max_bytes=FRAME + cost - 1))


@given(
    arguments=_FLAT,
    others=st.frozensets(st.text(max_size=10), max_size=4),
    known=st.sampled_from(["all", "all but one", "none"]),
)
def test_the_fast_path_with_keys_is_the_fast_path_for_known_keys_only(
    arguments: dict[str, Any], others: frozenset[str], known: str
) -> None:
    """A by-name route's form: the same answer when every key is known, else no."""
    limits = ArgumentLimits()
    own = (
        frozenset(arguments)
        if known == "all"
        else frozenset(list(arguments)[1:])
        if known != "none"
        else frozenset()
    )
    keys = own | others
    expected = flat_and_small(arguments, limits) and keys.issuperset(arguments)
    assert flat_and_small(arguments, limits, keys) is expected


def test_the_fast_path_with_keys_declines_a_key_that_is_not_a_string() -> None:
    """No JSON object has one; a program's dict may: declined before any key is measured."""
    assert flat_and_small({1: 2, "purpose": "Look"}, ArgumentLimits(), frozenset({"purpose"})) is False


def test_the_largest_digit_limit_message_is_exact() -> None:
    with pytest.raises(ConfigurationError) as caught:
        ArgumentLimits(max_int_digits=100_001)
    assert str(caught.value) == "ArgumentLimits.max_int_digits must be at most 100000"


@tool(risk=RiskClass.MEMORY_ONLY, effect=Effect.READ_ONLY)
def either(x: Annotated[float, AllowInfNan(True)] | Annotated[str, AllowInfNan(False)]) -> str:
    """One branch of the union opts in, the other opts out."""
    CALLS.append(("either", x))
    return repr(x)


def test_an_opt_in_anywhere_in_the_type_counts_even_next_to_an_opt_out() -> None:
    """The search for ``AllowInfNan(True)`` goes on past an ``AllowInfNan(False)``; pydantic accepts inf."""
    gw = Gateway.load(policy=ToolPolicy.standard(), providers=[either], discover=False, env={})
    result = gw.invoke("either", {"x": math.inf, "purpose": "Look"}, context=CONTEXT)
    assert (result.status, result.content) == (Status.SUCCESS, "inf")
