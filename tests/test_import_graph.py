"""The import graph of ``rlctl``: the layers of docs/design.md, no circles, no folders that
import each other, no private-name imports.

Built from the source with ``ast`` (no module is imported), counting every import: at module
level, inside functions, and under ``if TYPE_CHECKING`` (a type-only circle still ties two
modules together for a reader). An edge goes to the module imported (``from a.b import c``
is ``a.b.c`` when that is a module, else ``a.b``), not to the packages above it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import networkx as nx

import rlctl

ROOT = Path(rlctl.__file__).resolve().parent
DESIGN = ROOT.parent / "docs" / "design.md"
ENTRY = "rlctl.__main__"  # `python -m rlctl`: the program's entry, above every folder
# Layers below the plugins: they are what plugins register, so they never import plugins.
LOWER = ("rlctl.engines", "rlctl.trainer", "rlctl.agents", "rlctl.dataplane", "rlctl.config",
         "rlctl.algorithms", "rlctl.protocol", "rlctl.models", "rlctl.rewards", "rlctl.tasks",
         "rlctl.sinks", "rlctl.checkpoint", "rlctl.inspect", "rlctl.bench", "rlctl.testing",
         "rlctl.evals",
         "rlctl.registry", "rlctl.hookspecs")


def module_names() -> dict[str, Path]:
    out = {}
    for path in sorted(ROOT.rglob("*.py")):
        parts = path.relative_to(ROOT.parent).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = path
    return out


def imports_of(name: str, path: Path, modules: set[str]) -> set[str]:
    """rlctl modules ``name`` imports anywhere in its source."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            targets = [f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base
                       for alias in node.names]
        else:
            continue
        for target in targets:
            while target and target not in modules:  # `import a.b.c as x` of a submodule path
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def import_graph() -> nx.DiGraph:
    modules = module_names()
    graph = nx.DiGraph()
    for name, path in modules.items():
        graph.add_node(name)
        for target in imports_of(name, path, set(modules)):
            graph.add_edge(name, target)
    return graph


def test_the_graph_sees_function_level_and_type_checking_imports():
    graph = import_graph()
    # rollout_worker imports the registry inside a method; fsdp's engine at module level
    assert graph.has_edge("rlctl.trainer.worker.rollout_worker", "rlctl.registry")
    assert graph.has_edge("rlctl.engines.train.fsdp.engine", "rlctl.engines.distributed")
    assert graph.has_edge("rlctl.engines.rollout.contract", "rlctl.config.recipe")  # TYPE_CHECKING


def test_rlctl_has_no_import_circle():
    graph = import_graph()
    circles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    shown = []
    for component in circles:
        cycle = nx.find_cycle(graph.subgraph(component))
        shown.append(" -> ".join([a for a, _ in cycle] + [cycle[0][0]]))
    assert not shown, "import circles:\n" + "\n".join(shown)


def test_no_lower_layer_imports_the_plugins():
    graph = import_graph()
    bad = sorted(
        f"{a} -> {b}" for a, b in graph.edges
        if b.startswith("rlctl.plugins") and a.startswith(LOWER)
    )
    assert not bad, ("a lower layer imports rlctl.plugins (plugins register it, not the "
                     "reverse):\n" + "\n".join(bad))


def layer_table() -> list[tuple[str, list[str]]]:
    """``(layer, packages)`` from docs/design.md's layer table, top layer first."""
    text = DESIGN.read_text(encoding="utf-8").split("### Layers", 1)[1]
    rows = re.findall(r"^\| ([a-z' ]+) \| ((?:`rlctl[\w.]*`(?:, )?)+) \|", text, flags=re.MULTILINE)
    return [(name, re.findall(r"`(rlctl[\w.]*)`", packages)) for name, packages in rows]


def layer_of(module: str, table: list[tuple[str, list[str]]]) -> int:
    """Index of the layer whose longest package contains ``module`` (0 = the top)."""
    best, found = -1, None
    for index, (_, packages) in enumerate(table):
        for package in packages:
            if (module == package or module.startswith(package + ".")) and len(package) > best:
                best, found = len(package), index
    assert found is not None, f"{module} is in no layer of docs/design.md"
    return found


def test_the_layer_table_covers_every_package():
    table = layer_table()
    assert [name for name, _ in table][:2] == ["entry", "plugins"] and table[-1][0] == "core"
    for name in module_names():
        layer_of(name, table)


def test_every_import_goes_down_the_layers():
    table = layer_table()
    graph = import_graph()
    bad = sorted(
        f"{a} ({table[layer_of(a, table)][0]}) -> {b} ({table[layer_of(b, table)][0]})"
        for a, b in graph.edges if layer_of(a, table) > layer_of(b, table)
    )
    assert not bad, "imports up the layers of docs/design.md:\n" + "\n".join(bad)


def folder_of(module: str, modules: dict[str, Path]) -> str:
    return str(modules[module].resolve().parent.relative_to(ROOT.parent))


def test_no_two_folders_import_each_other():
    modules = module_names()
    edges: dict[tuple[str, str], str] = {}
    for a, b in import_graph().edges:
        if ENTRY in (a, b):
            continue
        fa, fb = folder_of(a, modules), folder_of(b, modules)
        if fa != fb:
            edges.setdefault((fa, fb), f"{a} -> {b}")
    mutual = sorted(f"{x} <-> {y}: {edges[(x, y)]}; {edges[(y, x)]}"
                    for (x, y) in edges if (y, x) in edges and x < y)
    assert not mutual, "folders that import each other:\n" + "\n".join(mutual)


def test_no_module_imports_another_modules_private_names():
    bad = []
    for name, path in module_names().items():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            if isinstance(node, ast.ImportFrom) and (node.module or "").startswith("rlctl"):
                bad += [f"{name}: from {node.module} import {alias.name}"
                        for alias in node.names
                        if alias.name.startswith("_") and not alias.name.startswith("__")]
    assert not bad, "private names imported across modules:\n" + "\n".join(bad)
