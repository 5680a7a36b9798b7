"""Built-in tools: ``calculator`` (arithmetic) and ``lookup`` (a per-prompt hidden value)."""

from __future__ import annotations

import ast
import operator
from typing import Any

from pydantic import BaseModel, Field

from rlctl.agents.tools import ToolContext, function_schema
from rlctl.config.strict import STRICT_CONFIG

_OPS = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
    ast.USub: operator.neg,
    ast.UAdd: operator.pos,
}


class CalculatorOptions(BaseModel):
    """Options of the ``calculator`` tool."""

    model_config = STRICT_CONFIG

    max_chars: int = Field(200, ge=1)
    """Longest expression accepted."""
    max_exponent: int = Field(64, ge=1)
    """Largest exponent of ``**`` (keeps a call from computing for minutes)."""


class Calculator:
    """Evaluates an arithmetic expression (numbers, + - * / // % ** and parentheses).

    Parsed with :mod:`ast` and evaluated node by node: nothing is ``eval``-ed.
    """

    name = "calculator"

    def __init__(self, options: CalculatorOptions | None = None) -> None:
        self.options = options or CalculatorOptions()

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Evaluate an arithmetic expression such as (12 + 30) * 4 / 3.",
            {"expression": {"type": "string", "description": "the expression to evaluate"}},
            ["expression"],
        )

    def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        expr = str(arguments.get("expression", arguments.get("input", "")))
        if not expr.strip():
            raise ValueError("no expression given")
        if len(expr) > self.options.max_chars:
            raise ValueError(f"expression longer than {self.options.max_chars} characters")
        value = self._eval(ast.parse(expr, mode="eval").body)
        if isinstance(value, float) and value.is_integer():
            value = int(value)
        return str(round(value, 6) if isinstance(value, float) else value)

    def _eval(self, node: ast.AST) -> float | int:
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _OPS:
            return _OPS[type(node.op)](self._eval(node.operand))
        if isinstance(node, ast.BinOp) and type(node.op) in _OPS:
            left, right = self._eval(node.left), self._eval(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > self.options.max_exponent:
                raise ValueError(f"exponent {right} is larger than {self.options.max_exponent}")
            return _OPS[type(node.op)](left, right)
        raise ValueError(f"not arithmetic: {ast.dump(node)[:80]}")


class LookupOptions(BaseModel):
    """Options of the ``lookup`` tool."""

    model_config = STRICT_CONFIG

    key: str = "secret"
    """Field of the prompt's ground truth the tool answers with."""


class Lookup:
    """Answers with a value stored with the prompt and never shown to the model.

    A stand-in for a database or search call: the only way to learn the value is to call
    the tool (the ``tool_secret`` task stores it under ``secret``).
    """

    name = "lookup"

    def __init__(self, options: LookupOptions | None = None) -> None:
        self.options = options or LookupOptions()

    def schema(self) -> dict[str, Any]:
        return function_schema(
            self.name,
            "Look up the stored value for this question.",
            {"input": {"type": "string", "description": "what to look up (optional)"}},
        )

    async def call(self, arguments: dict[str, Any], ctx: ToolContext) -> str:
        truth = ctx.record.ground_truth
        if self.options.key not in truth:
            raise KeyError(f"the prompt has no {self.options.key!r} to look up")
        return str(truth[self.options.key])
