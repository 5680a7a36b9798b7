"""Conditions of the launch-script reader: ``[ ]``, ``[[ ]]``, ``(( ))`` and ``test``, decided
when every word in them is known, undecided (None) otherwise. Nothing is run: file tests
(``-f``, ``-d``...) are undecided, since this machine is not the cluster the script runs on.
"""

from __future__ import annotations

from collections.abc import Callable
from fnmatch import fnmatchcase
from typing import Any

from rlctl.migrate.shell_words import Expander, Word


class Conditions:
    """Evaluates test commands on a parse tree, with the script's variables so far."""

    def __init__(self, text: Callable[[Any], str], expander: Callable[[], Expander]) -> None:
        self.text = text
        self._expander = expander

    @property
    def ex(self) -> Expander:
        return self._expander()

    def test(self, node: Any) -> bool | None:
        first = node.children[0].type if node.children else ""
        inner = node.named_children
        if first == "((":
            return self.ex.truth(self.text(node)[2:-2])
        if not inner:
            return False
        return self.expr(inner[0], double=first == "[[")

    def expr(self, node: Any, *, double: bool) -> bool | None:
        kind = node.type
        if kind == "parenthesized_expression":
            return self.expr(node.named_children[0], double=double)
        if kind == "binary_expression":
            left, right = node.named_children[0], node.named_children[-1]
            op = next((self.text(c) for c in node.children
                       if c.id not in (left.id, right.id)), "")
            if op in ("&&", "-a", "||", "-o"):
                a, b = self.expr(left, double=double), self.expr(right, double=double)
                return _and(a, b) if op in ("&&", "-a") else _or(a, b)
            lw, rw = self.ex.word(self.text(left)), self.ex.word(self.text(right))
            return _compare(lw, op, rw, pattern=double)
        if kind == "unary_expression":
            op = self.text(node.children[0])
            operand = node.named_children[-1]
            if op == "!":
                value = self.expr(operand, double=double)
                return None if value is None else not value
            word = self.ex.word(self.text(operand))
            if op in ("-z", "-n"):
                return None if word.unresolved else ((word.text == "") == (op == "-z"))
            return None  # file tests and the like: this machine is not the cluster
        word = self.ex.word(self.text(node))
        return None if word.unresolved else word.text != ""

    def test_words(self, args: list[str], words: list[Word]) -> bool | None:
        if any(w.unresolved for w in words):
            return None
        if len(args) == 3:
            return _compare(Word(args[0]), args[1], Word(args[2]), pattern=False)
        if len(args) == 2 and args[0] in ("-z", "-n"):
            return (args[1] == "") == (args[0] == "-z")
        return None


def _and(a: bool | None, b: bool | None) -> bool | None:
    if a is False or b is False:
        return False
    return None if a is None or b is None else True


def _or(a: bool | None, b: bool | None) -> bool | None:
    if a is True or b is True:
        return True
    return None if a is None or b is None else False


def _compare(left: Word, op: str, right: Word, *, pattern: bool) -> bool | None:
    if left.unresolved or right.unresolved:
        return None
    a, b = left.text, right.text
    if op in ("=", "=="):
        return fnmatchcase(a, b) if pattern and not right.quoted else a == b
    if op == "!=":
        return not fnmatchcase(a, b) if pattern and not right.quoted else a != b
    numeric = {"-eq": 0, "-ne": 1, "-lt": 2, "-le": 3, "-gt": 4, "-ge": 5}
    if op in numeric:
        try:
            x, y = int(a), int(b)
        except ValueError:
            return None
        return (x == y, x != y, x < y, x <= y, x > y, x >= y)[numeric[op]]
    return None
