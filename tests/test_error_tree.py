"""Every denial exception in the tree carries a reason code and the rule that decided it."""

import inspect

import toolbox
import toolbox_fs
import toolbox_http
from toolbox import ToolboxError, ToolUnavailableError

#: Values for the keyword arguments denial constructors take.
SAMPLES = {"tool": "http", "reason_code": "SOME_CODE", "rule": "some:rule", "env": "ACK_ENV", "value": "yes"}


def _subclasses(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from _subclasses(sub)


def _denials():
    assert toolbox_http and toolbox_fs and toolbox  # imported so their errors join the tree
    found = {c for c in _subclasses(ToolboxError) if issubclass(c, (PermissionError, LookupError))}
    return sorted(found, key=lambda c: f"{c.__module__}.{c.__qualname__}")


def _build(cls):
    parameters = inspect.signature(cls).parameters
    keywords = {}
    for name, parameter in parameters.items():
        if parameter.kind is inspect.Parameter.KEYWORD_ONLY and parameter.default is inspect.Parameter.empty:
            assert name in SAMPLES, f"{cls.__qualname__} takes {name}=...; add a sample value to SAMPLES"
            keywords[name] = SAMPLES[name]
    return cls("denied for a test", **keywords)


def test_the_tree_has_the_known_denials():
    """The walk finds the core and provider denials (so the next test checks something)."""
    names = {c.__qualname__ for c in _denials()}
    assert {"ToolUnavailableError", "ToolDeniedError", "ToolPolicyDeniedError", "EgressDeniedError"} <= names


def test_every_denial_carries_reason_code_and_rule():
    """Each denial exception has a non-empty ``reason_code`` and ``rule``, as the README promises."""
    for cls in _denials():
        error = _build(cls)
        assert isinstance(error.reason_code, str) and error.reason_code, cls
        assert isinstance(error.rule, str) and error.rule, cls


def test_tool_unavailable_names_the_registry_rule():
    """``ToolUnavailableError`` says which rule refused: ``registry`` (docs/concepts.md)."""
    error = ToolUnavailableError("no such tool", tool="nope")
    assert (error.reason_code, error.rule, error.tool) == ("TOOL_UNAVAILABLE", "registry", "nope")
