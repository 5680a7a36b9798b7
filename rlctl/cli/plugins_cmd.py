"""``rlctl plugins list``: what every plugin registered, and which plugins failed to load."""

from __future__ import annotations

import json
from typing import Annotated, Any

import typer

plugins_app = typer.Typer(
    name="plugins",
    help="Inspect built-in and third-party plugins.",
    no_args_is_help=True,
)


def plugins_report(registry) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Plain data behind ``plugins list`` (the ``--json`` output)."""
    plugins = []
    for info in registry.plugins:
        registered: dict[str, list[dict[str, Any]]] = {}
        for reg in registry.by_plugin(info.name):
            registered.setdefault(reg.kind, []).append({
                "name": reg.name,
                "description": reg.description,
                "options": sorted(reg.options.model_fields) if reg.options is not None else [],
            })
        plugins.append({
            "name": info.name,
            "module": info.module,
            "distribution": info.distribution,
            "version": info.version,
            "builtin": info.builtin,
            "registered": registered,
        })
    failures = [{"name": f.name, "source": f.source, "error": f.error} for f in registry.failures]
    return {"plugins": plugins, "failures": failures}


def target_check(registry) -> dict[str, Any]:  # type: ignore[no-untyped-def]
    """Every registered target checked without importing it (``plugins list --check``)."""
    regs = [reg for kind in registry.kinds() for reg in registry.all(kind)]
    broken = []
    for reg in regs:
        problem = reg.target_problem()
        if problem is not None:
            broken.append({
                "kind": reg.kind,
                "name": reg.name,
                "plugin": reg.plugin.name,
                "target": reg.target,
                "problem": problem,
                "describe": reg.describe(),
            })
    return {"checked": len(regs), "broken": broken}


def render_check(check: dict[str, Any]) -> str:
    if not check["broken"]:
        return f"target check: all {check['checked']} targets resolve"
    lines = [f"target check: {len(check['broken'])} of {check['checked']} targets are broken:"]
    lines += [f"  {b['describe']}: target {b['target']!r}: {b['problem']}" for b in check["broken"]]
    return "\n".join(lines)


def render_plugin(plugin: dict[str, Any]) -> str:
    """One plugin as text: a header line, then one line per kind it registered."""
    origin = "built-in" if plugin["builtin"] else f"module {plugin['module']}"
    lines = [f"{plugin['name']}  ({plugin['distribution']} {plugin['version']}, {origin})"]
    for kind, regs in plugin["registered"].items():
        names = [r["name"] for r in regs]
        lines.append(f"  {kind.replace('_', ' ')}: {', '.join(names)}")
    if not plugin["registered"]:
        lines.append("  (registers commands or lifecycle hooks only)")
    return "\n".join(lines)


def render_report(report: dict[str, Any]) -> str:
    blocks = [render_plugin(p) for p in report["plugins"]]
    if report["failures"]:
        failed = ["failed to load:"] + [
            f"  {f['name']} ({f['source']}): {f['error']}" for f in report["failures"]
        ]
        blocks.append("\n".join(failed))
    return "\n\n".join(blocks) + "\n"


@plugins_app.command("list")
def list_plugins(
    as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False,
    check: Annotated[
        bool,
        typer.Option(
            "--check",
            help="Also check that every registered module:attr target exists (without "
            "importing it); exit 1 if one is broken or a plugin failed to load.",
        ),
    ] = False,
) -> None:
    """List plugins, what they registered, and failures.

    Each plugin shows its distribution, version and module.
    """
    from rlctl.cli.common import EXIT_RUN_FAILURE
    from rlctl.registry import get_registry

    registry = get_registry()
    report = plugins_report(registry)
    if check:
        report["target_check"] = target_check(registry)
    if as_json:
        typer.echo(json.dumps(report, indent=2))
    else:
        text = render_report(report)
        if check:
            text += "\n" + render_check(report["target_check"]) + "\n"
        typer.echo(text, nl=False)
    if check and (report["failures"] or report["target_check"]["broken"]):
        raise typer.Exit(EXIT_RUN_FAILURE)
