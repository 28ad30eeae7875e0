"""Argument values as Cedar values: exact, or refused with the argument's path (never its value)."""

from decimal import Decimal

import pytest
from hypothesis import given
from hypothesis import strategies as st

from toolbox.pipeline.checks._cedar_values import MAX_DEPTH, CedarValueError, cedar_record, cedar_value


def test_scalars_sets_and_records():
    """Booleans, Longs, strings, sets and records map one to one; None leaves a record key out."""
    record = cedar_record(
        {
            "ok": True,
            "n": -(2**63),
            "s": "x",
            "tags": ("a", "b"),
            "nested": {"k": 1, "gone": None},
            "none": None,
        }
    )
    assert record == {"ok": True, "n": -(2**63), "s": "x", "tags": ["a", "b"], "nested": {"k": 1}}


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (12.5, "12.5"),
        (Decimal("0.0001"), "0.0001"),
        (3.0, "3.0"),
        (Decimal("1E+3"), "1000.0"),
        (-0.25, "-0.25"),
    ],
)
def test_decimals_keep_their_exact_value(value, text):
    """Floats and Decimals with at most four places become Cedar decimals, unrounded."""
    assert cedar_value(value, "x", 0) == {"__extn": {"fn": "decimal", "arg": text}}


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        ({"n": 2**63}, "'n' is outside Cedar's 64-bit integer range"),
        ({"n": -(2**63) - 1}, "'n' is outside Cedar's 64-bit integer range"),
        ({"x": 0.12345}, "'x' has more than 4 decimal places"),
        ({"x": float("nan")}, "'x' is not a finite number"),
        ({"x": float("inf")}, "'x' is not a finite number"),
        ({"x": Decimal("sNaN")}, "'x' is not a finite number"),
        ({"x": 1e300}, "'x' is outside Cedar's decimal range"),
        ({"items": [1, None]}, "'items' holds null"),
        ({"blob": b"secret-bytes"}, "'blob' of type bytes has no Cedar value"),
        ({"m": {1: "a"}}, "'m' has a key that is not a string"),
        ({"m": {"__extn": {"fn": "ip", "arg": "10.0.0.1"}}}, "'m' uses the reserved Cedar key '__extn'"),
        ({"m": {"a": [{"__expr": "x"}]}}, "'m.a.0' uses the reserved Cedar key '__expr'"),
    ],
)
def test_values_without_an_exact_cedar_value_are_refused(arguments, message):
    """Each refusal names the argument's path and never echoes its value."""
    with pytest.raises(CedarValueError) as info:
        cedar_record(arguments)
    assert message in str(info.value)
    assert "secret-bytes" not in str(info.value) and "10.0.0.1" not in str(info.value)


def test_deep_nesting_is_refused():
    """Nesting beyond MAX_DEPTH is refused, not recursed into."""
    value: object = "leaf"
    for _ in range(MAX_DEPTH + 5):
        value = {"a": value}
    with pytest.raises(CedarValueError, match="nested deeper than"):
        cedar_record({"deep": value})


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=6), children, max_size=4)
    ),
    max_leaves=20,
)


@given(st.dictionaries(st.text(max_size=6), _json, max_size=5))
def test_any_json_arguments_convert_or_are_refused_cleanly(arguments):
    """Whatever JSON a model sends, conversion returns Cedar JSON or raises CedarValueError, nothing else."""
    try:
        converted = cedar_record(arguments)
    except CedarValueError:
        return
    assert set(converted) <= set(arguments)
