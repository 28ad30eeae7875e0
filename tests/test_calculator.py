"""CalculatorTool: the MEMORY_ONLY standard tool, its bounds, and its four paths."""

import pytest

from toolbox import (
    AcknowledgementState,
    CalculatorTool,
    ToolPolicy,
    ToolPolicyDeniedError,
    ToolUnavailableError,
)
from toolbox.registry._calculator import (
    CALCULATOR,
    MAX_EXPRESSION_LENGTH,
    evaluate_expression,
    toolbox_providers,
)
from toolbox.testing import assert_denied, build_tools


@pytest.mark.parametrize(
    ("expression", "value"),
    [
        ("1+2", 3),
        ("(2 + 3) * 4 / 5", 4.0),
        ("-2 ** 2", -4),
        ("7 // 2", 3),
        ("7 % 4", 3),
        ("2 ** -1", 0.5),
        ("1.5e3", 1500.0),
        ("+(3)", 3),
        (" 42 ", 42),
        ("2 ** 1000", 2**1000),
        ("(" * 150 + "1" + ")" * 150, 1),
    ],
)
def test_arithmetic(expression, value):
    """Numbers and + - * / // % ** with parentheses evaluate."""
    assert evaluate_expression(expression) == value


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("__import__('os').system('id')", "unsupported element Call"),
        ("x + 1", "unsupported element Name"),
        ("(1).real", "unsupported element Attribute"),
        ("'a' * 3", "unsupported element Constant"),
        ("True + 1", "unsupported element Constant"),
        ("[1, 2]", "unsupported element List"),
        ("1 if 1 else 2", "unsupported element IfExp"),
        ("lambda: 1", "unsupported element Lambda"),
        ("1 < 2", "unsupported element Compare"),
        ("1 << 100", "unsupported element BinOp"),
        ("2 ** 1001", "exponent 1001 exceeds"),
        ("17 ** 1000", "exceeds 4096 bits"),
        ("(2 ** 1000) ** 5", "exceeds 4096 bits"),
        ("10.0 ** 400", "too large"),
        ("1 / 0", "division by zero"),
        ("1 % 0", "division by zero"),
        ("1 +", "not valid arithmetic"),
        ("-" * 200 + "1", "deeper than 64"),
    ],
)
def test_rejected(expression, message):
    """Anything but bounded arithmetic is a ValueError saying what is wrong."""
    with pytest.raises(ValueError, match=message):
        evaluate_expression(expression)


def test_length_bound():
    """Expressions longer than the limit are refused before parsing."""
    with pytest.raises(ValueError, match="at most 1000"):
        build_tools(*toolbox_providers()).get(CalculatorTool).evaluate("1+" * MAX_EXPRESSION_LENGTH)
    with pytest.raises(ValueError, match="longer than 1000"):
        evaluate_expression("1" * 1001)


def test_descriptor():
    """The calculator is MEMORY_ONLY with one READ_ONLY operation and no acknowledgement."""
    assert CALCULATOR.risk.value == "MEMORY_ONLY"
    assert CALCULATOR.acknowledgement is None
    assert [(o.name, o.effect.value) for o in CALCULATOR.operations] == [("evaluate", "READ_ONLY")]


def test_path_unavailable():
    """Without its provider, the calculator is unavailable."""
    tools = build_tools()
    assert_denied(
        lambda: tools.get(CalculatorTool),
        tools,
        CalculatorTool,
        error=ToolUnavailableError,
        reason_code="TOOL_UNAVAILABLE",
    )


def test_path_policy_denied():
    """deny_all() denies even MEMORY_ONLY tools."""
    tools = build_tools(*toolbox_providers(), policy=ToolPolicy.deny_all())
    assert_denied(
        lambda: tools.get(CalculatorTool),
        tools,
        CalculatorTool,
        error=ToolPolicyDeniedError,
        reason_code="POLICY_DENIED",
    )


def test_path_acknowledgement_not_required():
    """The calculator needs no acknowledgement: an empty environment is enough."""
    tools = build_tools(*toolbox_providers(), env={})
    assert tools.explain(CalculatorTool).acknowledgement is AcknowledgementState.NOT_REQUIRED


def test_path_allowed_by_standard_policy():
    """The standard policy allows it; the call is traced with its purpose."""
    tools = build_tools(*toolbox_providers())
    result = tools.get(CalculatorTool).evaluate("6*7").purpose("Answer the question").execute()
    assert result == 42
    assert tools.executions(CalculatorTool) == 1
    [record] = tools.context.trace.operations("calculator")
    assert (record.operation, record.status, record.intent_text) == (
        "evaluate",
        "SUCCESS",
        "Answer the question",
    )


def test_failed_evaluation_is_recorded():
    """A rejected expression raises ValueError at execute and is recorded as an error."""
    tools = build_tools(*toolbox_providers())
    with pytest.raises(ValueError, match="division by zero"):
        tools.get(CalculatorTool).evaluate("1/0").purpose("Divide").execute()
    [record] = tools.context.trace.operations()
    assert (record.status, record.error_type) == ("ERROR", "ValueError")
