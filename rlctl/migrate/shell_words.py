"""Bash word expansion for the launch-script reader: quotes, escapes, ``$NAME``, ``${...}``,
arrays, ``$((arithmetic))``, and bash's splitting of unquoted expansions. Nothing is run.

A value the reader cannot know (an unset variable, a ``$(command)``, a variable the script
sets on a branch it cannot decide) stays in the text as written and is named in
:attr:`Word.unresolved`, so the caller can report it instead of guessing.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_BRACED = re.compile(r"(#?)([A-Za-z_][A-Za-z0-9_]*)(\[[^\]]*\])?(.*)", re.DOTALL)


class ScriptError(ValueError):
    """The script cannot be read: odd quoting, arithmetic this reader does not know..."""


@dataclass
class Word:
    """One shell word after expansion, with the variables it could not resolve."""

    text: str = ""
    unresolved: set[str] = field(default_factory=set)
    quoted: bool = False
    defaults: dict[str, str] = field(default_factory=dict)
    """``${NAME:-default}`` expansions that took the default, NAME -> default."""

    def plus(self, other: Word) -> None:
        self.text += other.text
        self.unresolved |= other.unresolved
        self.defaults.update(other.defaults)


Value = Word | list[Word]
"""A shell variable: a string, or an array."""


def joined(value: Value) -> Word:
    """An array as one word (``${A[*]}``, or an array used as a string)."""
    if isinstance(value, Word):
        return value
    out = Word(" ".join(w.text for w in value))
    for w in value:
        out.unresolved |= w.unresolved
        out.defaults.update(w.defaults)
    return out


class Expander:
    """Expands shell text into words with the variables known so far.

    ``variables`` are the script's own (they win); ``env`` plays the environment (``--var``).
    """

    def __init__(self, variables: dict[str, Value], env: Mapping[str, str]) -> None:
        self.vars = variables
        self.env = env
        self.positional = False
        """Set when ``$@`` / ``$1``... was expanded: the script forwards its own arguments."""

    def lookup(self, name: str) -> Value | None:
        if name in self.vars:
            return self.vars[name]
        if name in self.env:
            return Word(self.env[name])
        return None

    # ------------------------------------------------------------------ words

    def words(self, text: str, *, split: bool = True) -> list[Word]:
        """``text`` as bash would split and expand it (``split=False``: an assignment's value)."""
        out: list[Word] = []
        cur: Word | None = None
        i, n = 0, len(text)
        while i < n:
            c = text[i]
            if c in " \t\n":
                if cur is not None:
                    out.append(cur)
                    cur = None
                i += 1
                continue
            if c == "#" and cur is None:
                end = text.find("\n", i)
                i = n if end < 0 else end
                continue
            cur = cur if cur is not None else Word()
            if c == "'":
                end = text.find("'", i + 1)
                if end < 0:
                    raise ScriptError("unterminated single quote")
                cur.text += text[i + 1:end]
                cur.quoted = True
                i = end + 1
            elif c == '"':
                i, cur = self._double_quoted(text, i + 1, cur, out)
            elif c == "\\":
                cur.text += text[i + 1:i + 2]
                i += 2
            elif c == "$":
                value, i = self._dollar(text, i)
                cur = self._place(value, cur, out, split=split)
            elif c == "`":
                end = text.find("`", i + 1)
                end = n - 1 if end < 0 else end
                cur.plus(unknown(text[i:end + 1]))
                i = end + 1
            else:
                cur.text += c
                i += 1
        if cur is not None:
            out.append(cur)
        return out

    def word(self, text: str) -> Word:
        """``text`` as one word, without splitting (an assignment's value, a case subject)."""
        return joined(self.words(text, split=False)) if text else Word("")

    def _place(self, value: Value, cur: Word, out: list[Word], *, split: bool) -> Word:
        """Append an unquoted expansion to ``cur``: arrays and (``split``) spaces make words."""
        if isinstance(value, list):
            if not split:
                cur.plus(joined(value))
                return cur
            if not value:
                return cur
            cur.plus(value[0])
            for w in value[1:]:
                out.append(cur)
                cur = Word()
                cur.plus(w)
            return cur
        if not split or value.unresolved or not re.search(r"\s", value.text):
            cur.plus(value)
            return cur
        parts = value.text.split()
        if re.match(r"\s", value.text) and cur.text:
            out.append(cur)
            cur = Word()
        for k, part in enumerate(parts):
            if k:
                out.append(cur)
                cur = Word()
            cur.text += part
        cur.defaults.update(value.defaults)
        return cur

    def _double_quoted(self, text: str, i: int, cur: Word, out: list[Word]) -> tuple[int, Word]:
        cur.quoted = True
        while i < len(text):
            c = text[i]
            if c == '"':
                return i + 1, cur
            if c == "\\" and i + 1 < len(text) and text[i + 1] in '$`"\\\n':
                cur.text += text[i + 1] if text[i + 1] != "\n" else ""
                i += 2
            elif c == "$":
                value, i = self._dollar(text, i)
                whole = text[i - 3:i] == "@]}" or text[i - 2:i] == "$@"
                if isinstance(value, list) and whole:
                    # "${A[@]}": one word per element, the quotes keep each whole
                    cur = self._place(value, cur, out, split=True)
                else:
                    cur.plus(joined(value))
            elif c == "`":
                end = text.find("`", i + 1)
                end = len(text) - 1 if end < 0 else end
                cur.plus(unknown(text[i:end + 1]))
                i = end + 1
            else:
                cur.text += c
                i += 1
        raise ScriptError("unterminated double quote")

    # ------------------------------------------------------------------ $...

    def _dollar(self, text: str, i: int) -> tuple[Value, int]:
        """The expansion starting at ``text[i] == '$'`` and the index after it."""
        rest = text[i + 1:]
        if rest.startswith("(("):
            end = matching(text, i + 1)
            return self.arith(text[i + 3:end - 1]), end + 1
        if rest.startswith("("):
            end = matching(text, i + 1)
            return unknown(text[i:end + 1]), end + 1
        if rest.startswith("{"):
            end = closing_brace(text, i + 1)
            return self._braced(text[i + 2:end]), end + 1
        if rest[:1] in ("@", "*") or rest[:1].isdigit():
            self.positional = True  # the script's own arguments: nothing to expand here
            return [] if rest[:1] in ("@", "*") else Word(""), i + 2
        if rest[:1] in ("$", "!", "?", "#", "-"):
            return unknown(text[i:i + 2]), i + 2  # pid, status...: never known here
        m = _NAME.match(rest)
        if m is None:
            return Word("$"), i + 1
        name = m.group(0)
        value = self.lookup(name)
        return (missing(name) if value is None else value), i + 1 + len(name)

    def _braced(self, inner: str) -> Value:
        m = _BRACED.fullmatch(inner)
        if m is None or inner.startswith("!"):
            return unknown("${" + inner + "}")
        length, name, index, op = m.group(1), m.group(2), m.group(3), m.group(4)
        if name in ("@", "*") or name.isdigit():
            self.positional = True
            return Word("")
        value = self.lookup(name)
        if index is not None:
            value = self._element(name, value, index[1:-1])
        if length:
            if value is None or (isinstance(value, Word) and value.unresolved):
                return missing(name)
            return Word(str(len(value) if isinstance(value, list) else len(value.text)))
        if not op:
            return missing(name) if value is None else value
        return self._operator(name, value, op)

    def _element(self, name: str, value: Value | None, index: str) -> Value | None:
        if index in ("@", "*"):
            if value is None or isinstance(value, list):
                return value if index == "@" or value is None else joined(value)
            return [value]
        if value is None:
            return None
        items = value if isinstance(value, list) else [value]
        try:
            k = _eval_int(index, self._int_of)
        except ScriptError:
            return unknown("${" + name + "[" + index + "]}")
        return items[k] if -len(items) <= k < len(items) else Word("")

    def _operator(self, name: str, value: Value | None, op: str) -> Value:
        """``${NAME<op>...}``: defaults, alternatives, prefix/suffix removal, substitution."""
        word = None if value is None else joined(value)
        m = re.fullmatch(r"(:?)([-=+?])(.*)", op, re.DOTALL)
        if m is not None:
            colon, kind, arg = m.groups()
            unset = word is None or (colon == ":" and word.text == "" and not word.unresolved)
            if kind == "+":
                return Word("") if unset else self.word(arg)
            if not unset:
                return value if value is not None else Word("")
            if kind == "?":
                return missing(name)
            default = self.word(arg)
            default.defaults[name] = default.text
            if kind == "=":
                self.vars[name] = default
            return default
        if word is None:
            return missing(name)
        if word.unresolved:
            return word
        return self._transform(name, word, op)

    def _transform(self, name: str, word: Word, op: str) -> Word:
        text = word.text
        for prefix, longest, cut in (("##", True, "front"), ("#", False, "front"),
                                     ("%%", True, "back"), ("%", False, "back")):
            if op.startswith(prefix):
                return Word(_remove(text, self.word(op[len(prefix):]).text, cut, longest))
        if op in ("^^", ",,"):
            return Word(text.upper() if op == "^^" else text.lower())
        m = re.fullmatch(r"/(/?)([^/]*)/?(.*)", op, re.DOTALL)
        if m is not None and "*" not in m.group(2) and "?" not in m.group(2):
            old, new = self.word(m.group(2)).text, self.word(m.group(3)).text
            return Word(text.replace(old, new) if m.group(1) else text.replace(old, new, 1))
        return unknown("${" + name + op + "}")

    # ------------------------------------------------------------------ arithmetic

    def _int_of(self, name: str) -> int:
        value = self.lookup(name)
        word = None if value is None else joined(value)
        if word is None or word.unresolved:
            raise _Unknown(name)
        try:
            return int(word.text or 0)
        except ValueError:
            raise ScriptError(f"{name} = {word.text!r} is not a number") from None

    def arith(self, expr: str) -> Word:
        """``$((expr))``: bash integer arithmetic, without running anything."""
        text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)  # $x means x here
        try:
            return Word(str(_eval_int(text, self._int_of)))
        except _Unknown as exc:
            known = self.lookup(exc.name)
            out = Word("$((" + expr + "))")
            out.unresolved |= {exc.name} if known is None else joined(known).unresolved
            return out
        except ScriptError as exc:
            raise ScriptError(f"$(({expr})): {exc}") from None

    def truth(self, expr: str) -> bool | None:
        """``(( expr ))`` as a condition; None when a variable in it is unknown."""
        text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)
        try:
            return _eval_int(text, self._int_of) != 0
        except _Unknown:
            return None


class _Unknown(Exception):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def unknown(text: str) -> Word:
    """A value the reader never knows (``$(command)``...): kept as written, reported."""
    return Word(text, {text})


def missing(name: str) -> Word:
    """An unset variable: ``${NAME}`` in the text, NAME reported."""
    return Word("${" + name + "}", {name})


def _remove(text: str, pattern: str, cut: str, longest: bool) -> str:
    spans = range(len(text), -1, -1) if longest == (cut == "front") else range(len(text) + 1)
    for k in spans:
        part = text[:k] if cut == "front" else text[len(text) - k:]
        if fnmatchcase(part, pattern):
            return text[k:] if cut == "front" else text[:len(text) - k]
    return text


_BINOPS: dict[type, Callable[[int, int], int]] = {
    ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
    ast.Mod: operator.mod, ast.Pow: operator.pow,
}
_COMPARE: dict[type, Callable[[int, int], bool]] = {
    ast.Lt: operator.lt, ast.LtE: operator.le, ast.Gt: operator.gt, ast.GtE: operator.ge,
    ast.Eq: operator.eq, ast.NotEq: operator.ne,
}


class _Arith(ast.NodeVisitor):
    """Evaluates a parsed bash arithmetic expression (integers only)."""

    def __init__(self, value_of: Callable[[str], int]) -> None:
        self.value_of = value_of

    def generic_visit(self, node: ast.AST) -> int:
        raise ScriptError("not arithmetic this reader understands")

    def visit_Expression(self, node: ast.Expression) -> int:
        return self.visit(node.body)

    def visit_Constant(self, node: ast.Constant) -> int:
        if type(node.value) is not int:
            return self.generic_visit(node)
        return node.value

    def visit_Name(self, node: ast.Name) -> int:
        return self.value_of(node.id)

    def visit_UnaryOp(self, node: ast.UnaryOp) -> int:
        value = self.visit(node.operand)
        if isinstance(node.op, ast.Not):
            return int(not value)
        return -value if isinstance(node.op, ast.USub) else value

    def visit_BoolOp(self, node: ast.BoolOp) -> int:
        values = [self.visit(v) for v in node.values]
        return int(all(values) if isinstance(node.op, ast.And) else any(values))

    def visit_Compare(self, node: ast.Compare) -> int:
        if len(node.ops) != 1 or type(node.ops[0]) not in _COMPARE:
            return self.generic_visit(node)
        return int(_COMPARE[type(node.ops[0])](self.visit(node.left),
                                              self.visit(node.comparators[0])))

    def visit_BinOp(self, node: ast.BinOp) -> int:
        a, b = self.visit(node.left), self.visit(node.right)
        if isinstance(node.op, ast.Div | ast.FloorDiv):
            if b == 0:
                raise ScriptError("division by zero")
            return int(a / b)  # bash truncates towards zero
        if type(node.op) not in _BINOPS:
            return self.generic_visit(node)
        return _BINOPS[type(node.op)](a, b)


def _eval_int(expr: str, value_of: Callable[[str], int]) -> int:
    """Bash integer arithmetic: ``+ - * / % **``, comparisons, ``&& || !``, parentheses."""
    text = expr.strip().replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    try:
        tree = ast.parse(text or "0", mode="eval")
    except SyntaxError:
        raise ScriptError("not arithmetic this reader understands") from None
    return _Arith(value_of).visit(tree)


def closing_brace(text: str, open_at: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_at``; nested ``${...}`` and quotes skipped."""
    depth, j, quote = 0, open_at, ""
    while j < len(text):
        c = text[j]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "{":
            depth += 1
        elif c == "}":
            depth -= 1
            if depth == 0:
                return j
        j += 1
    raise ScriptError("unterminated ${")


def matching(text: str, open_at: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_at`` (``$(...)``, ``$((...))``)."""
    depth, quote = 0, ""
    for j in range(open_at, len(text)):
        c = text[j]
        if quote:
            if c == quote:
                quote = ""
        elif c in "'\"":
            quote = c
        elif c == "(":
            depth += 1
        elif c == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ScriptError("unbalanced parentheses after $")
