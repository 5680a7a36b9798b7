"""The Hydra overrides of a verl launch script: the arguments of its ``verl.trainer.main_ppo`` call.

verl's example scripts are plain bash: variable assignments (``n_resp=16``,
``NNODES=${NNODES:-1}``, ``max_len=$((1024 * 8))``), then one long ``python3 -m
verl.trainer.main_ppo`` command split over lines with ``\\``. This reads exactly that much
bash: top-level assignments in order, single and double quotes, backslash escapes,
``$NAME`` / ``${NAME}`` / ``${NAME:-default}`` / ``$((arithmetic))``, and comments. It runs
nothing: a ``$(command)``, and any variable that neither the script nor ``--var`` sets (such
as ``$HOME``), is *unresolved* and reported, never guessed.

``--var NAME=VALUE`` plays the environment: the script's own assignments still win over it,
as they would in bash, and ``${NAME:-default}`` takes it over the default.
"""

from __future__ import annotations

import ast
import operator
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_ASSIGN = re.compile(r"^([A-Za-z_][A-Za-z0-9_]*)=")
_ENTRY = ("verl.trainer.main_ppo", "verl/trainer/main_ppo.py")


class ScriptError(ValueError):
    """The script has no (or more than one) ``verl.trainer.main_ppo`` call, or odd quoting."""


@dataclass
class Word:
    """One shell word after expansion, with the variables it could not resolve."""

    text: str = ""
    unresolved: set[str] = field(default_factory=set)
    quoted: bool = False
    defaults: dict[str, str] = field(default_factory=dict)
    """``${NAME:-default}`` expansions that took the default, NAME -> default."""


@dataclass(frozen=True)
class ScriptCall:
    """The ``main_ppo`` call of a launch script."""

    path: str
    line: int
    """Line of the script where the call starts (1-based)."""
    overrides: tuple[str, ...]
    """Hydra overrides, in order, expanded (unresolved variables stay as ``${NAME}``)."""
    hydra_flags: dict[str, str]
    """``--config-name`` / ``--config-path`` and other ``--flag=value`` arguments."""
    unresolved: dict[str, tuple[str, ...]]
    """Variable -> the overrides that use it, for every variable nothing resolved."""
    defaults_taken: dict[str, str]
    """``${NAME:-default}`` whose NAME nothing set: NAME -> the default the script used."""
    passes_extra_args: bool
    """The call forwards ``$@``: the script's own command-line arguments are more overrides."""


# --------------------------------------------------------------------------- expansion


class _Expander:
    """Expands one logical line into words with the variables known so far."""

    def __init__(self, variables: dict[str, Word], env: Mapping[str, str]) -> None:
        self.vars = variables
        self.env = env
        self.positional = False

    def lookup(self, name: str) -> Word | None:
        if name in self.vars:
            return self.vars[name]
        if name in self.env:
            return Word(self.env[name])
        return None

    def words(self, line: str) -> list[Word]:
        out: list[Word] = []
        cur: Word | None = None
        i, n = 0, len(line)
        while i < n:
            c = line[i]
            if c in " \t":
                if cur is not None:
                    out.append(cur)
                    cur = None
                i += 1
                continue
            if c == "#" and cur is None:
                break  # a comment runs to the end of the line
            if c in ";&|" and cur is None:
                out.append(Word(c))  # a command separator: callers split on it
                i += 1
                continue
            cur = cur if cur is not None else Word()
            if c == "'":
                end = line.find("'", i + 1)
                if end < 0:
                    raise ScriptError("unterminated single quote")
                cur.text += line[i + 1:end]
                cur.quoted = True
                i = end + 1
            elif c == '"':
                i = self._double_quoted(line, i + 1, cur)
                cur.quoted = True
            elif c == "\\":
                cur.text += line[i + 1:i + 2]
                i += 2
            elif c == "$":
                i = self._dollar(line, i, cur)
            elif c == "`":
                end = line.find("`", i + 1)
                self._unresolved(cur, line[i:end + 1] if end > 0 else line[i:])
                i = end + 1 if end > 0 else n
            else:
                cur.text += c
                i += 1
        if cur is not None:
            out.append(cur)
        return out

    def _double_quoted(self, line: str, i: int, cur: Word) -> int:
        while i < len(line):
            c = line[i]
            if c == '"':
                return i + 1
            if c == "\\" and i + 1 < len(line) and line[i + 1] in '$`"\\':
                cur.text += line[i + 1]
                i += 2
            elif c == "$":
                i = self._dollar(line, i, cur)
            else:
                cur.text += c
                i += 1
        raise ScriptError("unterminated double quote")

    def _unresolved(self, cur: Word, text: str) -> None:
        cur.text += text
        cur.unresolved.add(text)

    def _append(self, cur: Word, word: Word) -> None:
        cur.text += word.text
        cur.unresolved |= word.unresolved
        cur.defaults.update(word.defaults)

    def _dollar(self, line: str, i: int, cur: Word) -> int:
        rest = line[i + 1:]
        if rest.startswith("(("):
            end = _matching(line, i + 1)
            expr = line[i + 3:end - 1]
            self._append(cur, self._arith(expr))
            return end + 1
        if rest.startswith("("):
            end = _matching(line, i + 1)
            self._unresolved(cur, line[i:end + 1])
            return end + 1
        if rest.startswith("{"):
            end = _closing_brace(line, i + 1)
            self._append(cur, self._braced(line[i + 2:end]))
            return end + 1
        if rest[:1] in ("@", "*") or rest[:1].isdigit():
            self.positional = True  # the script's own arguments: nothing to expand here
            return i + 2
        m = _NAME.match(rest)
        if m is None:
            cur.text += "$"
            return i + 1
        name = m.group(0)
        value = self.lookup(name)
        if value is None:
            self._unresolved_name(cur, name)
        else:
            self._append(cur, value)
        return i + 1 + len(name)

    def _unresolved_name(self, cur: Word, name: str) -> None:
        cur.text += "${" + name + "}"
        cur.unresolved.add(name)

    def _braced(self, inner: str) -> Word:
        m = re.fullmatch(r"([A-Za-z_][A-Za-z0-9_]*)(?:(:?[-=])(.*))?", inner, re.DOTALL)
        if m is None:
            out = Word()
            self._unresolved(out, "${" + inner + "}")
            return out
        name, op, default = m.group(1), m.group(2), m.group(3)
        value = self.lookup(name)
        empty = value is None or (op is not None and op.startswith(":") and value.text == "")
        if op is None or not empty:
            if value is None:
                out = Word()
                self._unresolved_name(out, name)
                return out
            return value
        expanded = self.words(default or "")
        word = Word(" ".join(w.text for w in expanded))
        for w in expanded:
            word.unresolved |= w.unresolved
            word.defaults.update(w.defaults)
        word.defaults[name] = word.text
        if op.endswith("="):
            self.vars[name] = word
        return word

    def _arith(self, expr: str) -> Word:
        unresolved: set[str] = set()

        def value_of(name: str) -> int:
            word = self.lookup(name)
            if word is None or word.unresolved:
                unresolved.add(name)
                return 0
            try:
                return int(word.text or 0)
            except ValueError:
                raise ScriptError(f"$(({expr})): {name} = {word.text!r} is not a number") from None

        # $name inside arithmetic means the same as name
        text = re.sub(r"\$\{?([A-Za-z_][A-Za-z0-9_]*)\}?", r"\1", expr)
        result = _eval_int(text, value_of)
        if unresolved:
            word = Word("$((" + expr + "))")
            word.unresolved = unresolved
            return word
        return Word(str(result))


_BINOPS = {ast.Add: operator.add, ast.Sub: operator.sub, ast.Mult: operator.mul,
           ast.Mod: operator.mod, ast.Pow: operator.pow}


def _eval_int(expr: str, value_of) -> int:  # type: ignore[no-untyped-def]
    """Bash integer arithmetic (``+ - * / % **`` and parentheses) without running anything."""
    try:
        tree = ast.parse(expr.strip() or "0", mode="eval")
    except SyntaxError:
        raise ScriptError(f"$(({expr})) is not arithmetic this reader understands") from None

    def ev(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return ev(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return value_of(node.id)
        if isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.USub, ast.UAdd)):
            return -ev(node.operand) if isinstance(node.op, ast.USub) else ev(node.operand)
        if isinstance(node, ast.BinOp):
            a, b = ev(node.left), ev(node.right)
            if isinstance(node.op, (ast.Div, ast.FloorDiv)):
                if b == 0:
                    raise ScriptError(f"$(({expr})): division by zero")
                return int(a / b)  # bash truncates towards zero
            if type(node.op) in _BINOPS:
                return _BINOPS[type(node.op)](a, b)
        raise ScriptError(f"$(({expr})) is not arithmetic this reader understands")

    return ev(tree)


def _closing_brace(line: str, open_at: int) -> int:
    """Index of the ``}`` closing the ``{`` at ``open_at``; nested ``${...}`` and quotes skipped."""
    depth, j, quote = 0, open_at, ""
    while j < len(line):
        c = line[j]
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


def _matching(line: str, open_at: int) -> int:
    """Index of the ``)`` closing the ``(`` at ``open_at`` (for ``$(...)`` and ``$((...))``)."""
    depth = 0
    for j in range(open_at, len(line)):
        if line[j] == "(":
            depth += 1
        elif line[j] == ")":
            depth -= 1
            if depth == 0:
                return j
    raise ScriptError("unbalanced parentheses after $")


# --------------------------------------------------------------------------- the script


def _logical_lines(text: str) -> list[tuple[int, str]]:
    """Lines with ``\\``-continuations joined, each with the number of its first line."""
    out: list[tuple[int, str]] = []
    buf, start = "", 0
    for number, raw in enumerate(text.splitlines(), start=1):
        if not buf:
            start = number
        if raw.endswith("\\") and not raw.endswith("\\\\"):
            buf += raw[:-1] + " "
            continue
        out.append((start, buf + raw))
        buf = ""
    if buf:
        out.append((start, buf))
    return out


def _commands(words: list[Word]) -> list[list[Word]]:
    out: list[list[Word]] = [[]]
    for w in words:
        if not w.quoted and w.text in (";", "&", "|", "&&", "||"):
            out.append([])
        else:
            out[-1].append(w)
    return [c for c in out if c]


def _entry_index(words: list[Word]) -> int | None:
    for i, w in enumerate(words):
        if w.text in _ENTRY or w.text.endswith("/verl/trainer/main_ppo.py"):
            return i
    return None


def read_script(path: str | Path, env: Mapping[str, str] | None = None) -> ScriptCall:
    """The ``main_ppo`` call of the bash script at ``path``; raises :class:`ScriptError`."""
    text = Path(path).read_text(encoding="utf-8")
    variables: dict[str, Word] = {}
    expander = _Expander(variables, dict(env or {}))
    calls: list[tuple[int, list[Word], bool]] = []
    for number, line in _logical_lines(text):
        expander.positional = False
        try:
            words = expander.words(line)
        except ScriptError as exc:
            raise ScriptError(f"{path}:{number}: {exc}") from None
        for command in _commands(words):
            head = command[0].text
            if head == "export":
                command = command[1:]
            if command and all(_ASSIGN.match(w.text) for w in command):
                for w in command:  # NAME=value NAME2=value: assignments, in order
                    name, value = w.text.split("=", 1)
                    variables[name] = Word(value, set(w.unresolved), defaults=dict(w.defaults))
                continue
            entry = _entry_index(command)
            if entry is not None:
                calls.append((number, command[entry + 1:], expander.positional))
    if not calls:
        raise ScriptError(f"{path}: no `python3 -m verl.trainer.main_ppo` call found")
    if len(calls) > 1:
        lines = ", ".join(str(n) for n, _, _ in calls)
        raise ScriptError(f"{path}: {len(calls)} verl.trainer.main_ppo calls (lines {lines}); "
                          "give one launch script per run")
    number, args, positional = calls[0]
    overrides: list[str] = []
    flags: dict[str, str] = {}
    unresolved: dict[str, list[str]] = {}
    defaults: dict[str, str] = {}
    pending_flag: str | None = None
    for w in args:
        if pending_flag is not None:
            flags[pending_flag] = w.text
            pending_flag = None
            continue
        if w.text.startswith("--") or w.text in ("-cn", "-cp"):
            name, eq, value = w.text.partition("=")
            if eq:
                flags[name] = value
            else:
                pending_flag = name
            continue
        if not w.text:
            continue  # "$@" with no arguments
        overrides.append(w.text)
        defaults.update(w.defaults)
        for name in sorted(w.unresolved):
            unresolved.setdefault(name, []).append(w.text)
    return ScriptCall(
        path=str(path), line=number, overrides=tuple(overrides), hydra_flags=flags,
        unresolved={k: tuple(v) for k, v in unresolved.items()},
        defaults_taken=dict(sorted(defaults.items())), passes_extra_args=positional,
    )
