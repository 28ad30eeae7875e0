"""`CalculatorTool`: the standard ``MEMORY_ONLY`` tool that ships with toolbox.

Evaluates arithmetic over an AST allowlist (numbers, ``+ - * / // % **``,
unary signs, parentheses). Never ``eval``; input length, exponents and the size
of intermediate results are bounded so a model cannot exhaust memory or CPU.
"""

from __future__ import annotations

import ast
import math
import operator
from collections.abc import Callable, Sequence
from typing import Any, final

from toolbox.foundations._descriptor import Effect, OperationDescriptor, RiskClass, ToolDescriptor
from toolbox.registry._intent import ReadIntent
from toolbox.registry._provider import ToolProvider, hookimpl
from toolbox.registry._runtime import ToolRuntime

__all__ = ["CALCULATOR", "CalculatorTool", "evaluate_expression"]

MAX_EXPRESSION_LENGTH = 1000
MAX_EXPONENT = 1000
MAX_INT_BITS = 4096
MAX_DEPTH = 64

CALCULATOR = ToolDescriptor(
    name="calculator",
    version="1.0",
    summary="Evaluate an arithmetic expression safely (no names, no calls).",
    risk=RiskClass.MEMORY_ONLY,
    operations=(
        OperationDescriptor(
            name="evaluate", effect=Effect.READ_ONLY, summary="Evaluate e.g. '(2 + 3) * 4 / 5'."
        ),
    ),
)

Number = int | float

_BINARY: dict[type[ast.operator], Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Any], Any]] = {ast.UAdd: operator.pos, ast.USub: operator.neg}


def _checked(value: Number) -> Number:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError("result is not a finite number")
    if isinstance(value, int) and value.bit_length() > MAX_INT_BITS:
        raise ValueError(f"result exceeds {MAX_INT_BITS} bits")
    return value


def _eval(node: ast.AST, depth: int) -> Number:
    if depth > MAX_DEPTH:
        raise ValueError(f"expression nests deeper than {MAX_DEPTH} levels")
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return _checked(node.value)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _checked(_UNARY[type(node.op)](_eval(node.operand, depth + 1)))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _eval(node.left, depth + 1)
        right = _eval(node.right, depth + 1)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ValueError(f"exponent {right} exceeds the limit of {MAX_EXPONENT}")
        # Bound an integer power before computing it: bits(left**right) ~ right * bits(left).
        if (
            isinstance(node.op, ast.Pow)
            and isinstance(left, int)
            and isinstance(right, int)
            and right > 0
            and left.bit_length() * right > MAX_INT_BITS
        ):
            raise ValueError(f"result exceeds {MAX_INT_BITS} bits")
        try:
            return _checked(_BINARY[type(node.op)](left, right))
        except ZeroDivisionError:
            raise ValueError("division by zero") from None
        except OverflowError:
            raise ValueError("result is too large") from None
    raise ValueError(f"unsupported element {type(node).__name__}: only numbers and + - * / // % ** ( )")


def evaluate_expression(expression: str) -> Number:
    """Evaluate ``expression`` under the allowlist and bounds.

    Raises:
        ValueError: the expression is too long, malformed, uses anything but
            arithmetic, or exceeds a bound.
    """
    if not isinstance(expression, str):
        raise ValueError(f"expression must be a string, got {type(expression).__name__}")
    if len(expression) > MAX_EXPRESSION_LENGTH:
        raise ValueError(f"expression is longer than {MAX_EXPRESSION_LENGTH} characters")
    try:
        tree = ast.parse(expression.strip(), mode="eval")
    except (SyntaxError, RecursionError, MemoryError):
        raise ValueError("expression is not valid arithmetic") from None
    return _eval(tree.body, 0)


@final
class CalculatorTool:
    """Safe arithmetic for agents. ``MEMORY_ONLY``, so `ToolPolicy.standard` allows it."""

    __slots__ = ("_runtime",)

    def __init__(self, runtime: ToolRuntime) -> None:
        self._runtime = runtime

    def evaluate(self, expression: str) -> ReadIntent[Number]:
        """Intent to evaluate ``expression``; declare ``purpose(...)`` then ``execute()``.

        Raises:
            ValueError: ``expression`` is not a string or longer than 1000 characters.
        """
        if not isinstance(expression, str) or len(expression) > MAX_EXPRESSION_LENGTH:
            raise ValueError(f"expression must be a string of at most {MAX_EXPRESSION_LENGTH} characters")
        return self._runtime.read_intent(
            "evaluate", lambda: evaluate_expression(expression), arguments={"expression": expression}
        )


@hookimpl
def toolbox_providers() -> Sequence[ToolProvider[Any]]:
    """The tools built into toolbox."""
    return [ToolProvider(tool_type=CalculatorTool, descriptor=CALCULATOR)]
