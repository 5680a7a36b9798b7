"""The size budget the next change must respect (docs/design.md): no function of ``rlctl``
over 80 lines, no module over 500, and the trainer's step under 45 lines.

Counted from the source with ``ast`` (a function's lines from its ``def`` to its last line,
decorators and docstring included); ruff's complexity rule (C901, at most 12 branches) is
the other half of the budget, in ``pyproject.toml``.
"""

from __future__ import annotations

import ast
from pathlib import Path

import rlctl
from rlctl.trainer.controller.trainer import Trainer

ROOT = Path(rlctl.__file__).resolve().parent
MAX_FUNCTION_LINES = 80
MAX_MODULE_LINES = 500
MAX_STEP_LINES = 45


def _functions() -> list[tuple[str, int]]:
    out = []
    for path in sorted(ROOT.rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                start = min([node.lineno] + [d.lineno for d in node.decorator_list])
                out.append((f"{path.relative_to(ROOT.parent)}:{node.lineno} {node.name}",
                            node.end_lineno - start + 1))
    return out


def test_no_function_is_over_80_lines():
    long = [f"{where} ({n} lines)" for where, n in _functions() if n > MAX_FUNCTION_LINES]
    assert long == [], "split these by what they do:\n" + "\n".join(long)


def test_no_module_is_over_500_lines():
    big = [f"{p.relative_to(ROOT.parent)} ({n} lines)"
           for p in sorted(ROOT.rglob("*.py"))
           if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_MODULE_LINES]
    assert big == [], "split these by responsibility:\n" + "\n".join(big)


def test_the_trainers_step_reads_in_one_screen():
    import inspect

    lines = len(inspect.getsource(Trainer.step).splitlines())
    assert lines < MAX_STEP_LINES, f"Trainer.step is {lines} lines"


def test_the_budget_sees_a_long_function(tmp_path):
    """The counter counts decorators and bodies: a 90-line function is over the budget."""
    body = "\n".join(f"    x{i} = {i}" for i in range(88))
    source = f"@decorator\ndef long():\n{body}\n"
    node = ast.parse(source).body[0]
    assert node.end_lineno - node.decorator_list[0].lineno + 1 == 90 > MAX_FUNCTION_LINES
