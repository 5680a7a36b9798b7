"""The Hydra overrides of a verl launch script: the arguments of its ``verl.trainer.main_ppo`` call.

verl's example scripts are bash: assignments (``n_resp=16``, ``NNODES=${NNODES:-1}``,
``len=$((1024 * 8))``), arrays of overrides (``ACTOR=( ... )``, ``EXTRA+=( ... )``), ``if`` and
``case`` on the hardware, then one ``python3 -m verl.trainer.main_ppo "${ACTOR[@]}" ...`` call.
tree-sitter's bash grammar parses the script; this module walks the tree the way bash would run
it, but runs nothing: assignments, arrays, ``if`` / ``case`` / ``&&`` / ``||`` on ``[ ]``
tests, functions, ``for`` over known words, ``exit``. A ``$(command)`` and a variable that
neither the script nor ``--var`` sets (such as ``$HOME``) are *unresolved* and reported, never
guessed. A branch the reader cannot decide (it tests an unresolved variable) is walked both
ways: what both ways agree on is kept, and a variable they set differently becomes unresolved,
reported with the variable the branch tests.

``--var NAME=VALUE`` plays the environment: the script's own assignments still win over it,
as they would in bash, and ``${NAME:-default}`` takes it over the default.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any, ClassVar

from rlctl.migrate.inputs import InputError, read_text
from rlctl.migrate.shell_conditions import Conditions
from rlctl.migrate.shell_words import Expander, ScriptError, Value, Word, missing

__all__ = ["ScriptCall", "ScriptError", "read_script"]

_ENTRY = ("verl.trainer.main_ppo", "verl/trainer/main_ppo.py")
_MAX_LOOP = 256
_MAX_DEPTH = 32
_MAX_STEPS = 20_000
"""Statements walked, forks included: verl's scripts take hundreds; this bounds a script built
to make the walk explode (nested undecidable branches double it at each level)."""
_IGNORED = frozenset({"set", "echo", "printf", "cd", "pushd", "popd", "mkdir", "rm", "cp", "mv",
                      "ln", "touch", "ulimit", "trap", "wait", "sleep", "shift", "source", ".",
                      "ray", "pip", "huggingface-cli", "hf", "wget", "curl", "nvidia-smi",
                      "tee", "cat", "ls", "date", "git", "sed", "grep", "export"})


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
    branches: dict[str, str] = field(default_factory=dict)
    """Unresolved variable -> the branch that made it so (``case "$DEVICE" (line 52)``)."""


@dataclass
class _Call:
    line: int
    args: list[Word]
    positional: bool


class _Exit(Exception):
    """``exit`` ran: the rest of the script does not."""


@dataclass
class _State:
    vars: dict[str, Value]
    calls: list[_Call]

    def copy(self) -> _State:
        return _State(dict(self.vars), list(self.calls))


def _same(a: Value | None, b: Value | None) -> bool:
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, Word) and isinstance(b, Word):
        return a.text == b.text and a.unresolved == b.unresolved
    return a is None and b is None


class _Runner:
    """Walks the parse tree like bash, running nothing."""

    _HANDLERS: ClassVar[dict[str, Callable[[_Runner, Any], bool | None]]]
    """Statement kind (tree-sitter node type) -> how to run it."""

    def __init__(self, source: bytes, env: Mapping[str, str]) -> None:
        self.src = source
        self.state = _State({}, [])
        self.env = dict(env)
        self.functions: dict[str, Any] = {}
        self.branches: dict[str, str] = {}
        self.depth = 0
        self.steps = 0
        self.cond = Conditions(self.text, lambda: self.ex)

    @property
    def ex(self) -> Expander:
        return Expander(self.state.vars, self.env)

    def text(self, node: Any) -> str:
        return self.src[node.start_byte:node.end_byte].decode("utf-8", "replace")

    # ------------------------------------------------------------------ statements

    def run_all(self, nodes: list[Any]) -> bool | None:
        status: bool | None = True
        for node in nodes:
            status = self.run(node)
        return status

    def run(self, node: Any) -> bool | None:
        """Run one statement; its exit status (None: the reader cannot tell)."""
        self.steps += 1
        if self.steps > _MAX_STEPS:
            raise ScriptError(f"more than {_MAX_STEPS:,} statements to walk (nested branches "
                              "the reader cannot decide?): not a launch script it can read")
        if node.type == "ERROR" or node.is_missing:
            raise ScriptError(f"line {node.start_point[0] + 1}: bash this reader cannot parse: "
                              f"{self.text(node)[:60]!r}")
        handler = self._HANDLERS.get(node.type)
        # comments, arithmetic and other statements that set nothing the reader tracks
        return True if handler is None else handler(self, node)

    def _block(self, node: Any) -> bool | None:
        return self.run_all(node.named_children)

    def _assignment(self, node: Any) -> bool | None:
        self.assign(node)
        return True

    def _declaration(self, node: Any) -> bool | None:
        for child in node.named_children:
            if child.type == "variable_assignment":
                self.assign(child)
        return True

    def _unset(self, node: Any) -> bool | None:
        for child in node.named_children[1:]:
            self.state.vars.pop(self.text(child), None)
        return True

    def _redirected(self, node: Any) -> bool | None:
        return self.run(node.child_by_field_name("body") or node.named_children[0])

    def _negated(self, node: Any) -> bool | None:
        status = self.run(node.named_children[0])
        return None if status is None else not status

    def _function(self, node: Any) -> bool | None:
        self.functions[self.text(node.child_by_field_name("name"))] = \
            node.child_by_field_name("body")
        return True

    def _loop(self, node: Any) -> bool | None:
        """``while`` / ``for ((;;))``: how often the body runs is unknown: zero times, or once."""
        body = node.child_by_field_name("body")
        return self.fork([lambda: True, lambda: self.run(body)], self.text(node)[:40], node,
                         set())

    def assign(self, node: Any) -> None:
        name_node = node.child_by_field_name("name")
        value_node = node.child_by_field_name("value")
        name = self.text(name_node)
        if name_node.type == "subscript":  # A[i]=...: the array is no longer known exactly
            base = self.text(name_node.child_by_field_name("name"))
            self.state.vars[base] = missing(base)
            return
        append = any(c.type == "+=" for c in node.children)
        if value_node is None:
            value: Value = Word("")
        elif value_node.type == "array":
            value = [w for child in value_node.named_children if child.type != "comment"
                     for w in self.ex.words(self.text(child))]
        else:
            value = self.ex.word(self.text(value_node))
        old = self.state.vars.get(name)
        if append and old is not None:
            if isinstance(value, list) or isinstance(old, list):
                old_items = old if isinstance(old, list) else [old]
                value = old_items + (value if isinstance(value, list) else [value])
            else:
                merged = Word()
                merged.plus(old)
                merged.plus(value)
                value = merged
        self.state.vars[name] = value

    def command(self, node: Any) -> bool | None:
        name_node = node.child_by_field_name("name")
        ex = self.ex
        words: list[Word] = []
        for child in node.named_children:
            if child.type in ("command_name", "word", "string", "raw_string", "concatenation",
                              "simple_expansion", "expansion", "number", "command_substitution",
                              "arithmetic_expansion", "ansi_c_string", "translated_string"):
                words += ex.words(self.text(child))
        if name_node is None or not words:
            return True
        head = words[0].text
        entry = next((k for k, w in enumerate(words)
                      if w.text in _ENTRY or w.text.endswith("/verl/trainer/main_ppo.py")), None)
        if entry is not None:
            self.state.calls.append(_Call(node.start_point[0] + 1, words[entry + 1:],
                                          ex.positional))
            return True
        if head == "exit":
            raise _Exit
        if head in ("true", ":"):
            return True
        if head == "false":
            return False
        if head in ("test", "["):
            return self.cond.test_words([w.text for w in words[1:] if w.text != "]"], words)
        if head in self.functions and self.depth < _MAX_DEPTH:
            self.depth += 1
            try:
                return self.run(self.functions[head])
            finally:
                self.depth -= 1
        return True if head in _IGNORED else None

    def andor(self, node: Any) -> bool | None:
        left, right = node.named_children[0], node.named_children[-1]
        op = next(c.type for c in node.children if c.type in ("&&", "||"))
        status = self.run(left)
        if status is None:
            return self.fork([lambda: None, lambda: self.run(right)], self.text(left), node,
                             self._names(left))
        if (status and op == "&&") or (not status and op == "||"):
            return self.run(right)
        return status

    # ------------------------------------------------------------------ branches

    def if_(self, node: Any) -> bool | None:
        """``if``/``elif``/``else``: the first decided-true branch runs; undecided ones fork."""
        arms: list[tuple[list[Any], list[Any]]] = []  # (condition, body)
        cond: list[Any] = []
        body: list[Any] = []
        part = "cond"
        for child in node.children:
            if child.type in ("if", "fi"):
                continue
            if child.type == "then":
                part = "body"
            elif child.type == "elif_clause":
                arms.append((cond, body))
                sub_cond, sub_body = self._split_clause(child)
                cond, body = sub_cond, sub_body
            elif child.type == "else_clause":
                arms.append((cond, body))
                cond, body = [], [c for c in child.named_children]
            elif child.is_named:
                (cond if part == "cond" else body).append(child)
        arms.append((cond, body))
        return self._arms(arms, node)

    def _split_clause(self, clause: Any) -> tuple[list[Any], list[Any]]:
        cond: list[Any] = []
        body: list[Any] = []
        part = cond
        for child in clause.children:
            if child.type == "then":
                part = body
            elif child.is_named:
                part.append(child)
        return cond, body

    def _arms(self, arms: list[tuple[list[Any], list[Any]]], node: Any) -> bool | None:
        for k, (cond, body) in enumerate(arms):
            if not cond:  # else
                return self.run_all(body)
            status = self.run_all(cond)
            if status is None:
                rest = arms[k + 1:] or [([], [])]
                names = set().union(*(self._names(c) for c in cond))
                return self.fork([lambda b=body: self.run_all(b),
                                  lambda r=rest: self._arms(r, node)],
                                 " ".join(self.text(c) for c in cond), node, names)
            if status:
                return self.run_all(body)
        return True

    def case(self, node: Any) -> bool | None:
        subject = self.ex.word(self.text(node.child_by_field_name("value")))
        items = [c for c in node.named_children if c.type == "case_item"]
        if subject.unresolved:
            names = self._names(node.child_by_field_name("value"))
            branches = [lambda it=it: self.run_all(self._item_body(it)) for it in items]
            has_default = any(self.text(p) == "*" for it in items
                              for p in it.children_by_field_name("value"))
            if not has_default:
                branches.append(lambda: True)
            return self.fork(branches, f"case {self.text(node.child_by_field_name('value'))}",
                             node, names)
        for item in items:
            patterns = [self.ex.word(self.text(p)).text
                        for p in item.children_by_field_name("value")]
            if any(fnmatchcase(subject.text, p) for p in patterns):
                return self.run_all(self._item_body(item))
        return True

    def _item_body(self, item: Any) -> list[Any]:
        values = {p.id for p in item.children_by_field_name("value")}
        return [c for c in item.named_children if c.id not in values]

    def for_(self, node: Any) -> bool | None:
        var = self.text(node.child_by_field_name("variable"))
        body = node.child_by_field_name("body")
        values = [w for v in node.children_by_field_name("value")
                  for w in self.ex.words(self.text(v))]
        if any(w.unresolved for w in values) or len(values) > _MAX_LOOP:
            return self.fork([lambda: True, lambda: self.run(body)], f"for {var}", node,
                             {var})
        status: bool | None = True
        for w in values:
            self.state.vars[var] = w
            status = self.run(body)
        return status

    def fork(self, branches: list, what: str, node: Any, names: set[str]) -> bool | None:
        """Walk each branch from the same state; keep what they agree on."""
        start = self.state
        ends: list[_State] = []
        for branch in branches:
            self.state = start.copy()
            try:
                branch()
            except _Exit:
                continue
            ends.append(self.state)
        if not ends:
            self.state = start
            raise _Exit
        merged = ends[0].copy()
        why = f"{what.strip()[:60]} (line {node.start_point[0] + 1})"
        for name in set().union(*(e.vars.keys() for e in ends)):
            values = [e.vars.get(name) for e in ends]
            if not all(_same(values[0], v) for v in values[1:]):
                unknown = Word("${" + name + "}", set(names) or {name})
                merged.vars[name] = unknown
                for n in unknown.unresolved:
                    self.branches.setdefault(n, why)
        if any(len(e.calls) != len(merged.calls) for e in ends):
            raise ScriptError(f"the verl.trainer.main_ppo call depends on {why}, which the "
                              "reader cannot decide" + _hint(names))
        self.state = merged
        return None

    def _names(self, node: Any) -> set[str]:
        """Unresolved variables a condition reads (what --var would decide)."""
        out: set[str] = set()
        stack = [node]
        while stack:
            n = stack.pop()
            if n.type == "command_substitution":
                out.add(self.text(n))
            elif n.type in ("simple_expansion", "expansion"):
                if self.ex.word(self.text(n)).unresolved:
                    # the variable itself (DEVICE), not what made it unknown: --var decides it
                    name = next((c for c in n.named_children if c.type == "variable_name"), n)
                    out.add(self.text(name))
            else:
                stack.extend(n.named_children)
        return out or {self.text(node).strip()[:40]}


_Runner._HANDLERS = {
    "program": _Runner._block, "compound_statement": _Runner._block,
    "subshell": _Runner._block, "do_group": _Runner._block, "pipeline": _Runner._block,
    "variable_assignments": _Runner._block,
    "variable_assignment": _Runner._assignment, "declaration_command": _Runner._declaration,
    "unset_command": _Runner._unset, "command": _Runner.command,
    "redirected_statement": _Runner._redirected, "negated_command": _Runner._negated,
    "list": _Runner.andor, "test_command": lambda r, n: r.cond.test(n), "if_statement": _Runner.if_,
    "case_statement": _Runner.case, "function_definition": _Runner._function,
    "for_statement": _Runner.for_, "while_statement": _Runner._loop,
    "c_style_for_statement": _Runner._loop,
}


def _hint(names: set[str]) -> str:
    plain = sorted(n for n in names if n.isidentifier())
    return f": pass --var {plain[0]}=VALUE" if plain else ""


def _parse(source: bytes) -> Any:
    import tree_sitter
    import tree_sitter_bash

    parser = tree_sitter.Parser(tree_sitter.Language(tree_sitter_bash.language()))
    return parser.parse(source)


def read_script(path: str | Path, env: Mapping[str, str] | None = None) -> ScriptCall:
    """The ``main_ppo`` call of the bash script at ``path``; raises :class:`ScriptError`."""
    source = _read(Path(path))
    runner = _Runner(source, env or {})
    try:
        runner.run(_parse(source).root_node)
    except RecursionError:
        raise ScriptError(f"{path}: nested too deeply for the reader") from None
    except _Exit:
        pass
    except ScriptError as exc:
        raise ScriptError(f"{path}: {exc}") from None
    calls = runner.state.calls
    if not calls:
        raise ScriptError(f"{path}: no `python3 -m verl.trainer.main_ppo` call found")
    if len(calls) > 1:
        lines = ", ".join(str(c.line) for c in calls)
        raise ScriptError(f"{path}: {len(calls)} verl.trainer.main_ppo calls (lines {lines}); "
                          "give one launch script per run")
    return _call(str(path), calls[0], runner.branches)


def _read(path: Path) -> bytes:
    """The script's bytes: a regular UTF-8 text file of at most a megabyte."""
    try:
        return read_text(path, "launch script").encode("utf-8")
    except InputError as exc:
        raise ScriptError(str(exc)) from None


def _call(path: str, call: _Call, branches: dict[str, str]) -> ScriptCall:
    overrides: list[str] = []
    flags: dict[str, str] = {}
    unresolved: dict[str, list[str]] = {}
    defaults: dict[str, str] = {}
    pending: str | None = None
    for w in call.args:
        if pending is not None:
            flags[pending] = w.text
            pending = None
            continue
        if w.text.startswith("--") or w.text in ("-cn", "-cp"):
            name, eq, value = w.text.partition("=")
            if eq:
                flags[name] = value
            else:
                pending = name
            continue
        if not w.text:
            continue  # "$@" with no arguments
        overrides.append(w.text)
        defaults.update(w.defaults)
        for name in sorted(w.unresolved):
            unresolved.setdefault(name, []).append(w.text)
    return ScriptCall(
        path=path, line=call.line, overrides=tuple(overrides), hydra_flags=flags,
        unresolved={k: tuple(v) for k, v in unresolved.items()},
        defaults_taken=dict(sorted(defaults.items())), passes_extra_args=call.positional,
        branches={k: v for k, v in branches.items() if k in unresolved},
    )

