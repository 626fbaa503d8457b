"""Tools a `tool` task runs without a model: `calc`, exact arithmetic over earlier results.

See docs/internals/plans.md#what-a-task-sees-and-leaves.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable
from decimal import Decimal, DivisionByZero, InvalidOperation

from parallax.logic.plan_check import PLACEHOLDER
from parallax.logic.vote import normalize_answer

_BINARY: dict[type[ast.operator], Callable[[Decimal, Decimal], Decimal]] = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY: dict[type[ast.unaryop], Callable[[Decimal], Decimal]] = {
    ast.UAdd: operator.pos,
    ast.USub: operator.neg,
}
MAX_EXPONENT = 64


class ToolError(ValueError):
    """A tool could not run on its input; the message says which input and why."""


def as_number(text: str, name: str) -> str:
    value = normalize_answer(text).rstrip("%")
    try:
        Decimal(value)
    except InvalidOperation:
        raise ToolError(f"{name} is not a number: {text[:80]!r}") from None
    return value


def _evaluate(node: ast.AST) -> Decimal:
    if isinstance(node, ast.Expression):
        return _evaluate(node.body)
    if (
        isinstance(node, ast.Constant)
        and isinstance(node.value, (int, float))
        and not isinstance(node.value, bool)
    ):
        return Decimal(str(node.value))
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left, right = _evaluate(node.left), _evaluate(node.right)
        if isinstance(node.op, ast.Pow) and abs(right) > MAX_EXPONENT:
            raise ToolError(f"exponent {right} is too large")
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
        return _UNARY[type(node.op)](_evaluate(node.operand))
    raise ToolError(f"calc takes numbers and + - * / // % ** only, not {ast.dump(node)[:60]}")


def calc(expression: str, results: dict[int, str]) -> str:
    """The value of `expression` after every `$N` / `${N}` became task N's result as a number."""

    def number_for(match: re.Match[str]) -> str:
        ref = int(match.group(1) or match.group(2))
        if ref not in results:
            raise ToolError(f"${ref} has no result (task {ref} did not finish)")
        return as_number(results[ref], f"${ref}")

    filled = PLACEHOLDER.sub(number_for, expression)
    try:
        value = _evaluate(ast.parse(filled.strip(), mode="eval"))
    except SyntaxError:
        raise ToolError(f"calc cannot read {filled[:80]!r}") from None
    except (DivisionByZero, InvalidOperation, ZeroDivisionError):
        raise ToolError(f"calc cannot compute {filled[:80]!r} (division by zero?)") from None
    text = format(value.normalize(), "f") if value != 0 else "0"
    return text.rstrip("0").rstrip(".") if "." in text else text


def run_tool(inputs: dict[str, str], goal: str, results: dict[int, str]) -> str:
    """Run the tool a task names in `inputs["tool"]` (the plan check already refused unknown
    ones)."""
    if inputs.get("tool") == "calc":
        return calc(inputs.get("expression") or goal, results)
    raise ToolError(f"unknown tool {inputs.get('tool')!r}")
