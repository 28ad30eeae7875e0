"""Policy-file guardrail predicates reach nested values and every item of a list."""

from __future__ import annotations

import pytest

from toolbox.errors import ConfigurationError
from toolbox.pipeline.checks._guardrails import guardrails_from_config


def _when(**spec: object):
    rule = {"id": "R", "action": "DENY", **spec}
    (parsed,) = guardrails_from_config({"rules": [rule]}).rules
    assert parsed.when is not None
    return parsed.when


def test_a_path_reads_a_nested_value():
    """``["headers", "x-pay-to"]`` reads one header of an HTTP call."""
    when = _when(argument=["headers", "x-pay-to"], equals="mallory")
    assert when({"headers": {"x-pay-to": "mallory"}})
    assert not when({"headers": {"x-pay-to": "alice"}})
    assert not when({"headers": {}})
    assert not when({"headers": "x-pay-to"})  # not a mapping: absent, not an error


def test_a_list_matches_when_any_item_does():
    """A repeated query parameter cannot hide a value behind an innocent first one."""
    when = _when(argument=["params", "code"], equals="999")
    assert when({"params": {"code": ["111", "999"]}})
    assert not when({"params": {"code": ["111"]}})
    assert _when(argument="tags", matches="^urgent")({"tags": ["low", "urgent-now"]})
    assert _when(argument="amounts", greater_than=100)({"amounts": [5, 500]})


def test_a_whole_list_still_compares_as_before():
    """``equals`` a list keeps working on the list itself."""
    assert _when(argument="pair", equals=[1, 2])({"pair": [1, 2]})


@pytest.mark.parametrize("argument", [[], ["params", 3], {"params": "code"}, 7])
def test_a_malformed_path_is_a_load_time_error(argument):
    """An empty path, a non-string step or another type names the rule and the fix."""
    with pytest.raises(ConfigurationError, match="a list of names for a nested value"):
        _when(argument=argument, equals="x")
