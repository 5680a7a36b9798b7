"""The import graph of ``rlctl``: no circles, and no lower layer importing ``rlctl.plugins``.

Built from the source with ``ast`` (no module is imported), counting every import: at module
level, inside functions, and under ``if TYPE_CHECKING`` (a type-only circle still ties two
modules together for a reader). An edge goes to the module imported (``from a.b import c``
is ``a.b.c`` when that is a module, else ``a.b``), not to the packages above it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import networkx as nx

import rlctl

ROOT = Path(rlctl.__file__).resolve().parent
# Layers below the plugins: they are what plugins register, so they never import plugins.
LOWER = ("rlctl.engines", "rlctl.trainer", "rlctl.agents", "rlctl.dataplane", "rlctl.config",
         "rlctl.algorithms", "rlctl.protocol", "rlctl.models", "rlctl.rewards", "rlctl.tasks",
         "rlctl.sinks", "rlctl.checkpoint", "rlctl.inspect", "rlctl.bench", "rlctl.testing",
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
