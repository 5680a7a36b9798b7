"""Reading what ``rlctl config migrate`` is given, safely: a launch script, an overrides file,
a YAML config. Each is a regular UTF-8 text file of bounded size; a YAML is checked event by
event (bounded nesting, aliases and expanded size, no ``!!python`` tags) before anything builds
it, so a billion-laughs file or a code-running tag fails in milliseconds with one line.
"""

from __future__ import annotations

from pathlib import Path

import yaml

MAX_TEXT_BYTES = 1 << 20
"""Launch scripts and override files are kilobytes."""
MAX_YAML_BYTES = 8 << 20
"""verl's composed config is ~40 KB."""
MAX_YAML_DEPTH = 64
MAX_YAML_ALIASES = 256
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)  # libyaml when PyYAML was built with it
MAX_YAML_VALUES = 200_000
"""Scalars and collections after aliases are expanded (verl's config: ~2,000)."""


class InputError(ValueError):
    """An input that is not what it should be: missing, not a file, binary, too big, bad YAML."""


def read_text(path: Path, what: str, limit: int = MAX_TEXT_BYTES) -> str:
    """The text of the regular file ``path``; never opens a FIFO or a device (they can block)."""
    if not path.exists():
        raise InputError(f"{path}: {what} not found")
    if not path.is_file():
        raise InputError(f"{path}: {what} is not a regular file (a FIFO, a directory, a "
                         "device?); give the file itself")
    try:
        with path.open("rb") as fh:
            data = fh.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{path}: cannot read the {what}: {exc.strerror or exc}") from None
    if len(data) > limit:
        raise InputError(f"{path}: over {_size(limit)}, too big for a {what}")
    if b"\0" in data:
        raise InputError(f"{path}: a binary file, not a {what}")
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InputError(f"{path}: not UTF-8 text (byte {exc.start}), not a {what}") from None


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"


def check_yaml(text: str, where: str) -> None:
    """Refuse YAML that is malformed, nested too deeply, alias-bombed or tagged to run code."""
    bounds = _Bounds(where)
    try:
        for event in yaml.parse(text, Loader=_LOADER):
            bounds.see(event)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        line = f"line {mark.line + 1}: " if mark is not None else ""
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise InputError(f"{where}: {line}not valid YAML: {problem}") from None


class _Bounds:
    """Counts a YAML event stream: nesting, aliases, and values once aliases are expanded."""

    def __init__(self, where: str) -> None:
        self.where = where
        self.depth = 0
        self.aliases = 0
        self.sizes: dict[str, int] = {}
        """Anchor -> values in the anchored node (expanded), for the aliases that repeat it."""
        self.frames: list[list] = [[None, 0]]  # [anchor of an open collection, values in it]

    def see(self, event: object) -> None:
        line = event.start_mark.line + 1  # type: ignore[attr-defined]
        tag = getattr(event, "tag", None)
        if tag and tag != "!" and (tag.startswith("tag:yaml.org,2002:python/")
                                   or not tag.startswith("tag:yaml.org,2002:")):
            short = tag.replace("tag:yaml.org,2002:", "!!")
            raise InputError(f"{self.where}: line {line}: a {short} tag: YAML that constructs "
                             "objects is refused (nothing was run; verl's configs have no tags)")
        if isinstance(event, yaml.AliasEvent):
            self.aliases += 1
            if self.aliases > MAX_YAML_ALIASES:
                raise InputError(f"{self.where}: more than {MAX_YAML_ALIASES} YAML aliases: not "
                                 "a verl config (verl's use none)")
            self.frames[-1][1] += self.sizes.get(event.anchor, 1)
        elif isinstance(event, yaml.ScalarEvent):
            self.frames[-1][1] += 1
            if event.anchor:
                self.sizes[event.anchor] = 1
        elif isinstance(event, yaml.CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_YAML_DEPTH:
                raise InputError(f"{self.where}: line {line}: nested deeper than "
                                 f"{MAX_YAML_DEPTH} levels: not a verl config")
            self.frames.append([event.anchor, 1])
        elif isinstance(event, yaml.CollectionEndEvent):
            self.depth -= 1
            anchor, size = self.frames.pop()
            if anchor:
                self.sizes[anchor] = size
            self.frames[-1][1] += size
        if sum(f[1] for f in self.frames) > MAX_YAML_VALUES:
            raise InputError(f"{self.where}: expands to more than {MAX_YAML_VALUES:,} values "
                             "(YAML aliases repeating each other: a 'billion laughs'?): not a "
                             "verl config")
