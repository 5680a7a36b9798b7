"""The migration report: what became of every verl key, and the batch numbers on both sides.

Grouped for the user: what they set (in an override or in their own YAML) and was mapped (to
which rlctl key), what they set that has no effect here (and why), what is refused (and why;
the fixes go to stderr), and how many keys are at verl's default. ``full=True`` (``--verbose``
and the ``--report FILE`` text) lists the defaults one by one too, so every key is accounted
for by name.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from typing import Any

from rlctl.migrate.ledger import Entry
from rlctl.migrate.run import Migration

_SHOWN = 60  # longest value shown in full


def _show(value: Any) -> str:
    text = repr(value) if isinstance(value, str) else str(value)
    if isinstance(value, bool):
        text = "true" if value else "false"
    elif value is None:
        text = "null"
    return text if len(text) <= _SHOWN else text[:_SHOWN - 3] + "..."


def _sources(m: Migration) -> str:
    counts: dict[str, int] = defaultdict(int)
    for o in m.overrides:
        counts[o.origin.split(":")[0]] += 1
    parts = [f"{n} from {origin}" for origin, n in counts.items()]
    return f"{len(m.overrides)} overrides" + (f" ({', '.join(parts)})" if parts else "")


def batch_table(m: Migration, rlctl: Mapping[str, int] | None) -> list[str]:
    """verl's batch numbers next to what ``rlctl config show`` derives from the recipe."""
    b = m.verl_batch
    if b is None:
        return []
    verl = b.as_dict()
    why = {
        "samples_per_step": (
            f"data.train_batch_size {b.prompts_per_step} x rollout.n {b.group_size}"
        ),
        "prompts_per_minibatch": "actor.ppo_mini_batch_size (prompts)",
        "minibatch_size": f"{b.prompts_per_minibatch} prompts x n {b.group_size}",
        "data_parallel_size": "GPUs / model-parallel size",
        "minibatch_size_per_rank": "verl's normalised ppo_mini_batch_size",
        "micro_batches_per_rank": f"per rank / micro-batch {b.micro_batch_size}"
        + (" (dynamic in verl)" if b.dynamic else ""),
        "grad_accumulation_steps": "= micro-batches per rank",
        "optimizer_steps_per_train_step": f"{b.minibatches} minibatches x {b.epochs} epochs",
    }
    lines = ["batch (verl's numbers; `rlctl config show` derives the same):",
             f"   {'':32}{'verl':>8}{'rlctl':>8}"]
    for key, value in verl.items():
        theirs = rlctl.get(key) if rlctl is not None else None
        flag = "" if theirs in (None, value) else "   <- differs"
        shown = "" if theirs is None else str(theirs)
        lines.append(f"   {key:32}{value:>8}{shown:>8}  {why[key]}{flag}")
    return lines


def _header(m: Migration) -> list[str]:
    out = [f"verl config {m.inputs.verl_yaml} + {_sources(m)}"]
    if m.call is not None:
        out.append(f"   launch script {m.call.path}: main_ppo call at line {m.call.line}")
        taken = [f"{name}={value}" for name, value in m.call.defaults_taken.items()]
        if taken:
            out.append("   the script's defaults used (--var NAME=VALUE changes one): "
                       + ", ".join(taken))
        if m.call.passes_extra_args:
            out.append("   the call forwards \"$@\": give extra overrides as arguments")
    lg = m.ledger
    if lg is not None:
        out.append(f"   verl's defaults: {lg.cfg.baseline.how}")
        for g in lg.cfg.groups:
            out.append(f"   {g.text} ({g.origin}): {g.note}")
        for o in lg.cfg.hydra_keys:
            out.append(f"   {o.text}: Hydra's own setting, not part of the run's config")
        for key, o in lg.cfg.deleted.items():
            out.append(f"   {o.text} ({o.origin}): {key} deleted; the migration reads it as "
                       "unset (verl falls back to its code's default)")
    return out


def _yours(e: Entry) -> str:
    mark = "*" if e.touched else "y"
    return f" {mark} {e.key} = {_show(e.value)}"


def _by_reason(entries: list[Entry]) -> list[str]:
    """Default keys summarised: how many, by what became of them."""
    reasons: dict[str, int] = defaultdict(int)
    for e in entries:
        reasons["mapped to the recipe" if e.fate == "mapped" else
                "no effect in rlctl" if e.fate == "dropped" else
                "unsupported, no effect on the math"] += 1
    return [f"   {n:4} {why}" for why, n in sorted(reasons.items(), key=lambda kv: -kv[1])]


def render_report(m: Migration, *, rlctl_derived: Mapping[str, int] | None = None,
                  full: bool = False) -> str:
    """The report text, grouped for the user: what they set (mapped, no effect, refused), and
    how many keys are at verl's default (``full``: each of those too)."""
    lg = m.ledger
    out = _header(m)
    if lg is None:
        return "\n".join(out) + "\n"
    entries = sorted(lg.entries.values(), key=lambda e: e.key)
    refused = [e for e in entries if e.fate == "error"]
    yours = [e for e in entries if e.changed and e.fate != "error"]
    mapped = [e for e in yours if e.fate == "mapped"]
    no_effect = [e for e in yours if e.fate in ("dropped", "ignored")]
    default = [e for e in entries if not e.changed and e.fate != "error"]
    out.append(f"   {len(entries)} verl keys: {len(mapped) + len(no_effect)} set by you and "
               f"migrated ({len(mapped)} mapped, {len(no_effect)} with no effect here), "
               f"{len(refused)} refused, {len(default)} at verl's default")
    table = batch_table(m, rlctl_derived)
    if table:
        out += ["", *table]
    if lg.notes:
        out += ["", "notes:", *[f"   {n}" for n in lg.notes]]
    legend = "(*: set by an override; y: in your YAML, not verl's default)"
    if refused:
        fixes = {p.key: p.fix for p in m.problems if p.fix}
        out += ["", f"refused ({len(refused)}): cannot be migrated faithfully; why, and the fix"]
        for e in refused:
            out.append((_yours(e) if e.changed else f"   {e.key} = {_show(e.value)}")
                       + f": {e.note}")
            if e.key in fixes:
                out.append(f"       fix: {fixes[e.key]}")
    out += ["", f"set by you and mapped ({len(mapped)}): verl key = value -> rlctl key {legend}"]
    out += [_yours(e) + f" -> {e.note}" for e in mapped]
    if no_effect:
        out += ["", f"set by you, no effect here ({len(no_effect)}): why"]
        out += [_yours(e) + f": {e.note}" for e in no_effect]
    out += ["", f"at verl's default ({len(default)}):"]
    if full:
        out += [f"   {e.key} = {_show(e.value)}" + (f" -> {e.note}" if e.fate == "mapped"
                                                     else f": {e.note}") for e in default]
    else:
        out += _by_reason(default)
        out.append("   (--verbose, or the --report file, lists each)")
    return "\n".join(out) + "\n"
