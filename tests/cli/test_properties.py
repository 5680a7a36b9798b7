"""Property tests: random mutations of the shipped recipes always give exit 2, the key path of
each problem, and no traceback.

Mutations: unknown keys, wrong types, out-of-range values, unknown registry names, broken
TOML; several at once must all be reported together.
"""

from __future__ import annotations

import re
import tempfile
import tomllib
import typing
from pathlib import Path
from typing import Any

import tomli_w
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from rlctl.cli.app import build_app
from rlctl.config.problems import key_path
from rlctl.config.recipe import Recipe
from rlctl.registry import build_registry
from tests.cli.cli_helpers import ROOT, invoke

RECIPES = {p.name: tomllib.loads(p.read_text()) for p in sorted((ROOT / "recipes").glob("*.toml"))}
TEXTS = {p.name: p.read_text() for p in sorted((ROOT / "recipes").glob("*.toml"))}
APP = build_app(plugin_commands=False)
REGISTRY = build_registry(external="none")

Loc = tuple[str | int, ...]
PROFILE = settings(max_examples=40, deadline=None,
                   suppress_health_check=[HealthCheck.function_scoped_fixture])

# (key path, kind) of every registry name a recipe selects
NAME_SLOTS: list[tuple[Loc, str]] = [
    (("engines", "train", "backend"), "model_engine"),
    (("engines", "rollout", "backend"), "rollout_engine"),
    (("engines", "rollout", "weight_sync"), "weight_sync"),
    (("data_plane", "backend"), "data_plane"),
    (("algorithm", "estimator"), "advantage_estimator"),
    (("algorithm", "loss", "policy_loss"), "policy_loss"),
    (("rollout", "agent_loop"), "agent_loop"),
    (("algorithm", "staleness", "policy"), "staleness_policy"),
    (("rewards", 0, "name"), "reward_function"),
    (("logging", "sinks", 0), "metric_sink"),
]
OUT_OF_RANGE: list[tuple[Loc, Any]] = [
    (("run", "seed"), -1),
    (("algorithm", "prompts_per_step"), 0),
    (("algorithm", "group_size"), -4),
    (("algorithm", "minibatches"), 0),
    (("algorithm", "gamma"), 1.5),
    (("algorithm", "lam"), -0.1),
    (("algorithm", "kl", "coef"), -0.001),
    (("algorithm", "optim", "lr"), 0.0),
    (("algorithm", "optim", "min_lr_ratio"), 2.0),
    (("algorithm", "loss", "clip_ratio_c"), 0.5),
    (("rollout", "top_p"), 1.5),
    (("rollout", "temperature"), -1.0),
    (("rollout", "max_new_tokens"), 0),
    (("engines", "train", "ranks"), 0),
    (("engines", "train", "micro_batch_size"), 0),
    (("resources", "nodes"), 0),
    (("schedule", "total_steps"), 0),
]
IDENT = st.from_regex(r"[a-z][a-z0-9_]{2,12}", fullmatch=True)


def _all_field_names() -> set[str]:
    """Every key that is valid somewhere (fields and aliases of sections and option models)."""
    from pydantic import BaseModel

    models: list[type[BaseModel]] = [Recipe]
    models += [r.options for k in REGISTRY.kinds() for r in REGISTRY.all(k) if r.options]
    names: set[str] = set()
    while models:
        model = models.pop()
        for name, info in model.model_fields.items():
            names |= {name, info.alias or name}
            for tp in (info.annotation, *typing.get_args(info.annotation)):
                if isinstance(tp, type) and issubclass(tp, BaseModel):
                    models.append(tp)
    return names


VALID_KEYS = _all_field_names()
NEW_KEY = IDENT.filter(lambda k: k not in VALID_KEYS)
BROKEN_LINES = ["= 1", "[unclosed", 'key = "unterminated', "key = = 2", "[[", "a.b = ]",
                "x = 1 2", "[run]\nname = 'dup'\n[run]"]


def _tables(node: Any, loc: Loc = ()) -> list[Loc]:
    out: list[Loc] = []
    if isinstance(node, dict):
        out.append(loc)
        for k, v in node.items():
            out += _tables(v, loc + (k,))
    elif isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        for i, v in enumerate(node):
            out += _tables(v, loc + (i,))
    return out


def _leaves(node: Any, loc: Loc = ()) -> list[Loc]:
    if isinstance(node, dict) and node:
        return [leaf for k, v in node.items() for leaf in _leaves(v, loc + (k,))]
    if isinstance(node, list) and node and all(isinstance(v, dict) for v in node):
        return [leaf for i, v in enumerate(node) for leaf in _leaves(v, loc + (i,))]
    return [loc]


def _get(data: Any, loc: Loc) -> Any:
    for part in loc:
        data = data[part]
    return data


def _set(data: dict[str, Any], loc: Loc, value: Any) -> None:
    node: Any = data
    for part in loc[:-1]:
        if isinstance(node, dict):
            node = node.setdefault(part, {} if not isinstance(part, int) else [])
        else:
            node = node[part]
    node[loc[-1]] = value


@st.composite
def mutation(draw: st.DrawFn, data: dict[str, Any]) -> str:
    """Mutate ``data`` in place; return the key path the report must name."""
    kind = draw(st.sampled_from(["unknown_key", "wrong_type", "out_of_range", "unknown_name"]))
    if kind == "unknown_key":
        table = draw(st.sampled_from(_tables(data)))
        node = _get(data, table)
        key = draw(NEW_KEY.filter(lambda k: k not in node))
        node[key] = 1
        return key_path(table) or key
    if kind == "wrong_type":
        leaf = draw(st.sampled_from(_leaves(data)))
        value = _get(data, leaf)
        # a table where a scalar belongs, a number where a list/table belongs: never valid
        _set(data, leaf, 7 if isinstance(value, (list, dict)) else {"x": 1})
        return key_path(leaf)
    if kind == "out_of_range":
        loc, bad = draw(st.sampled_from(OUT_OF_RANGE))
        _set(data, loc, bad)
        return key_path(loc)
    slots = [(loc, k) for loc, k in NAME_SLOTS if loc[0] != "rewards" or data.get("rewards")]
    loc, registry_kind = draw(st.sampled_from(slots))
    name = draw(IDENT.filter(lambda n: REGISTRY.find(registry_kind, n) is None))
    _set(data, loc, name)
    return key_path(loc)


def _validate(text: str) -> tuple[str, str]:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "mutated.toml"
        path.write_text(text)
        result = invoke(APP, ["config", "validate", str(path)], 2)  # asserts exit 2, no crash
    assert "Traceback" not in result.stdout + result.stderr
    assert result.stdout == ""
    return result.stderr, str(path)


@PROFILE
@given(name=st.sampled_from(sorted(RECIPES)), data=st.data())
def test_one_mutation_is_reported_with_its_key_path(name: str, data: st.DataObject) -> None:
    recipe = tomllib.loads(TEXTS[name])
    expected = data.draw(mutation(recipe))
    stderr, _ = _validate(tomli_w.dumps(recipe))
    assert stderr.startswith("error: the recipe has ")
    assert f"  {expected}" in stderr


@PROFILE
@given(name=st.sampled_from(sorted(RECIPES)), data=st.data(), n=st.integers(2, 4))
def test_several_mutations_are_all_reported_at_once(
    name: str, data: st.DataObject, n: int
) -> None:
    recipe = tomllib.loads(TEXTS[name])
    expected = [data.draw(mutation(recipe)) for _ in range(n)]
    stderr, _ = _validate(tomli_w.dumps(recipe))
    for path in expected:
        # A later mutation may make an earlier one moot (a list replaced whole, a backend
        # whose options can no longer be checked): then a problem in an enclosing table
        # must be named.
        assert any(f"  {p}" in stderr for p in _enclosing(path)), (path, stderr)


def _enclosing(path: str) -> list[str]:
    """``a.b[0].c`` -> [``a.b[0].c``, ``a.b[0]``, ``a.b``, ``a``]."""
    cuts = [m.start() for m in re.finditer(r"[.\[]", path)]
    return [path] + [path[:i] for i in reversed(cuts)]


@PROFILE
@given(name=st.sampled_from(sorted(TEXTS)), data=st.data())
def test_broken_toml_names_file_line_and_column(name: str, data: st.DataObject) -> None:
    lines = TEXTS[name].splitlines()
    at = data.draw(st.integers(0, len(lines)))
    lines.insert(at, data.draw(st.sampled_from(BROKEN_LINES)))
    stderr, path = _validate("\n".join(lines) + "\n")
    assert "TOML syntax error" in stderr
    assert f"[from {path}:" in stderr or f"  {path}:" in stderr
