"""What became of every verl key, and the rlctl recipe being written.

Each leaf key of the resolved verl config ends in exactly one entry:

* ``mapped`` - its value went into the rlctl keys named (possibly with others');
* ``dropped`` - it has no effect in rlctl (a profiler switch, a kernel choice, a feature at
  its off value);
* ``ignored`` - rlctl lacks the setting, and the value is not the neutral one, but it does
  not change the math (an offload, a parallel layout, a memory knob): reported, not fatal;
* ``error`` - rlctl cannot reproduce it faithfully: the migration exits 2 naming the key.

Only what the user changed from verl's defaults is refused (:meth:`Ledger.error`): a key at
verl's default, or under a table switched off (``enable: false``), is never an error whatever
rlctl makes of it. :meth:`Ledger.conflict` is for settings that cannot hold together (a
minibatch that does not divide the step): those are refused even when one side is a default,
since the user's other setting is what breaks them. :meth:`Ledger.need` asks for an input the
config cannot give (``--reward``, ``--train-rows``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

from rlctl.migrate.verl_config import VerlConfig

Fate = Literal["mapped", "dropped", "ignored", "error"]
FATES: tuple[Fate, ...] = ("mapped", "dropped", "ignored", "error")


@dataclass(frozen=True)
class Problem:
    """A verl setting that cannot be migrated faithfully (exit 2)."""

    key: str
    """The verl key (or a shell variable / CLI option) at fault."""
    message: str
    fix: str = ""

    def render(self) -> str:
        return f"{self.key}: {self.message}" + (f"\n    fix: {self.fix}" if self.fix else "")


@dataclass
class Entry:
    key: str
    value: Any
    changed: bool
    """The user's setting: not verl's default (an override, or their own YAML)."""
    touched: bool
    """Set by an override (the script, the overrides file or an argument)."""
    fate: Fate
    note: str
    """mapped: the rlctl key(s); otherwise the reason."""


@dataclass
class Ledger:
    """Accounts for every verl key while the translators build the recipe."""

    cfg: VerlConfig
    entries: dict[str, Entry] = field(default_factory=dict)
    problems: list[Problem] = field(default_factory=list)
    recipe: dict[str, Any] = field(default_factory=dict)
    """The rlctl recipe being written (nested tables)."""
    comments: dict[str, str] = field(default_factory=dict)
    """rlctl key path -> where its value came from (written as a trailing comment)."""
    notes: list[str] = field(default_factory=list)
    """Free-text remarks for the report (script defaults used, values derived...)."""

    # ------------------------------------------------------------------ reading verl

    def value(self, key: str, default: Any = None) -> Any:
        """The resolved value of ``key`` without accounting for it."""
        return self.cfg.get(key, default)

    def is_open(self, key: str) -> bool:
        return key in self.cfg and key not in self.entries

    def _record(self, key: str, fate: Fate, note: str) -> None:
        if key not in self.cfg:
            return  # an older or newer verl without this key: nothing to account for
        old = self.entries.get(key)
        if old is not None:
            if old.fate == "mapped" and fate == "mapped" and note not in old.note.split(", "):
                old.note += f", {note}"
            if fate == "error":
                old.fate, old.note = fate, note
            return
        self.entries[key] = Entry(key, self.cfg.get(key), self.cfg.changed(key),
                                  key in self.cfg.touched, fate, note)

    def take(self, key: str, target: str) -> Any:
        """Read ``key`` and account for it as mapped to the rlctl key ``target``."""
        self._record(key, "mapped", target)
        return self.cfg.get(key)

    def drop(self, key: str, reason: str) -> None:
        self._record(key, "dropped", reason)

    def ignore(self, key: str, reason: str) -> None:
        self._record(key, "ignored", reason)

    def error(self, key: str, message: str, fix: str = "") -> None:
        """Refuse ``key``'s value, if the user chose it: a default or a switched-off key is
        reported, never refused."""
        switch = self.cfg.off_switch(key)
        if key in self.cfg and switch is not None:
            self.entries.pop(key, None)
            self.drop(key, f"off ({switch} is false)")
        elif key in self.cfg and not self.cfg.changed(key):
            self.entries.pop(key, None)
            self.drop(key, f"verl's default, not refused: {message}")
            self.notes.append(f"{key} = {self.cfg.get(key)!r} is verl's default, so it is not "
                              f"refused, but: {message}")
        else:
            self.conflict(key, message, fix)

    def conflict(self, key: str, message: str, fix: str = "") -> None:
        """Refuse a combination that cannot hold, whichever side the user set."""
        self._record(key, "error", message)
        self.problems.append(Problem(key, message, fix))

    def need(self, option: str, message: str, fix: str) -> None:
        """Ask for an input the config cannot give (``--reward``, ``--train-rows``)."""
        self.problems.append(Problem(option, message, fix))

    def drop_tree(self, prefix: str, reason: str) -> None:
        """Drop every key at or below ``prefix`` that nothing accounted for yet."""
        for key in list(self.cfg.under(prefix)):
            if key not in self.entries:
                self.drop(key, reason)

    def same_or_ignore(self, key: str, expected: Any, what: str) -> None:
        """Drop ``key`` when it equals ``expected`` (what rlctl does), else ignore it."""
        if self.value(key) == expected:
            self.drop(key, f"same as {what}")
        else:
            self.ignore(key, f"rlctl uses {what} ({expected!r}) here")

    def same_or_error(self, key: str, expected: Any, what: str, fix: str) -> None:
        """Drop ``key`` when it equals ``expected``; a different value changes the math."""
        if self.value(key) == expected:
            self.drop(key, f"same as {what}")
        else:
            self.conflict(key, f"{self.value(key)!r} differs from {what} ({expected!r}), and rlctl "
                       "has one setting for both", fix)

    # ------------------------------------------------------------------ writing rlctl

    def put(self, path: str, value: Any, comment: str) -> None:
        """Set the rlctl key ``path`` (dotted) in the recipe, remembering its verl origin."""
        table = self.recipe
        *parents, leaf = path.split(".")
        for part in parents:
            table = table.setdefault(part, {})
        table[leaf] = value
        # actor_rollout_ref.actor / .rollout / .model / .ref read as actor. rollout. model. ref.
        self.comments[path] = comment.replace("actor_rollout_ref.", "")

    def get(self, path: str, default: Any = None) -> Any:
        table: Any = self.recipe
        for part in path.split("."):
            if not isinstance(table, dict) or part not in table:
                return default
            table = table[part]
        return table
