"""`json_content`, what every JSON door shows of a result: plain values skip the round trip.

The shortcut must give exactly what the round trip gives (the same value and type), and
leave everything else to it: floats that are not finite, ints past 64 bits, containers,
models and objects.
"""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given
from hypothesis import strategies as st

from toolbox.pipeline._shown import json_content, shown


def round_trip(value: Any) -> Any:
    return json.loads(json.dumps(value, default=shown), parse_constant=str)


@given(
    st.one_of(
        st.text(),
        st.booleans(),
        st.none(),
        st.integers(min_value=-(2**64), max_value=2**64),
        st.floats(allow_nan=True, allow_infinity=True),
        st.lists(st.integers()),
        st.dictionaries(st.text(), st.floats()),
    )
)
def test_json_content_equals_the_round_trip(value: Any) -> None:
    got, expected = json_content(value), round_trip(value)  # NaN and the infinities are strings here
    assert got == expected
    assert type(got) is type(expected)


def test_the_limits_of_the_shortcut() -> None:
    assert json_content(2**63 - 1) == 2**63 - 1
    assert json_content(-(2**63) + 1) == -(2**63) + 1
    assert json_content(float("nan")) == "NaN"
    assert json_content(float("-inf")) == "-Infinity"
    assert json_content("\ud800") == "\ud800"  # a lone surrogate comes back as it went


def test_an_int_subclass_is_not_taken_for_an_int() -> None:
    class Loud(int):
        def __str__(self) -> str:
            return "loud"

    assert type(json_content(Loud(3))) is int  # the round trip's answer, not the subclass itself
