"""The migration report: what became of every verl key, and the batch numbers on both sides.

The printed report lists every key the overrides set and every mapped, ignored or refused
key; keys dropped at the YAML's own values are summarised by reason. ``full=True`` (the
``--report FILE`` text) lists those one by one too, so every key is accounted for by name.
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


def _line(e: Entry, with_note: bool = True) -> str:
    mark = "*" if e.changed else " "
    text = f" {mark} {e.key} = {_show(e.value)}"
    return text + (f": {e.note}" if with_note else "")


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


def render_report(m: Migration, *, rlctl_derived: Mapping[str, int] | None = None,
                  full: bool = False) -> str:
    """The report text (``full``: every dropped key by name)."""
    lg = m.ledger
    out = [f"verl config {m.inputs.verl_yaml} + {_sources(m)}"]
    if m.call is not None:
        out.append(f"   launch script {m.call.path}: main_ppo call at line {m.call.line}")
        for name, value in m.call.defaults_taken.items():
            out.append(f"   ${name} unset: the script's default {value!r} "
                       f"(--var {name}=... to change it)")
        if m.call.passes_extra_args:
            out.append("   the call forwards \"$@\": give extra overrides as arguments")
    if m.problems and lg is None:
        return "\n".join(out) + "\n"
    assert lg is not None
    by_fate: dict[str, list[Entry]] = defaultdict(list)
    for e in sorted(lg.entries.values(), key=lambda e: e.key):
        by_fate[e.fate].append(e)
    total = len(lg.entries)
    changed = sum(e.changed for e in lg.entries.values())
    out.append(f"   {total} verl keys, {changed} set by the overrides (*): "
               f"{len(by_fate['mapped'])} mapped, {len(by_fate['dropped'])} dropped (no effect "
               f"in rlctl), {len(by_fate['ignored'])} unsupported but no effect on the math, "
               f"{len(by_fate['error'])} refused")
    for o in lg.cfg.hydra_keys:
        out.append(f"   {o.text}: Hydra's own setting, not part of the run's config")
    table = batch_table(m, rlctl_derived)
    if table:
        out += ["", *table]
    if lg.notes:
        out += ["", "notes:", *[f"   {n}" for n in lg.notes]]
    if by_fate["error"]:
        out += ["", f"refused ({len(by_fate['error'])}): cannot be migrated faithfully"]
        out += [_line(e) for e in by_fate["error"]]
    out += ["", f"mapped ({len(by_fate['mapped'])}): verl key = value -> rlctl key"]
    out += [_line(e, False) + f" -> {e.note}" for e in by_fate["mapped"]]
    if by_fate["ignored"]:
        out += ["", f"unsupported, ignored ({len(by_fate['ignored'])}): no effect on the math"]
        out += [_line(e) for e in by_fate["ignored"]]
    dropped_set = [e for e in by_fate["dropped"] if e.changed]
    dropped_default = [e for e in by_fate["dropped"] if not e.changed]
    if dropped_set:
        out += ["", f"dropped, set by the overrides ({len(dropped_set)}): no effect in rlctl"]
        out += [_line(e) for e in dropped_set]
    if dropped_default:
        out += ["", f"dropped at the YAML's values ({len(dropped_default)}): no effect in rlctl"]
        if full:
            out += [_line(e) for e in dropped_default]
        else:
            reasons: dict[str, list[str]] = defaultdict(list)
            for e in dropped_default:
                reasons[e.note].append(e.key)
            ranked = sorted(reasons.items(), key=lambda kv: (-len(kv[1]), kv[0]))
            rest = [keys for _, keys in ranked if len(keys) < 3]
            for reason, keys in ranked:
                if len(keys) >= 3:
                    out.append(f"   {len(keys):4} {reason}")
            if rest:
                out.append(f"   {sum(map(len, rest)):4} for {len(rest)} other reasons")
            out.append("   (`--report FILE` lists each key with its reason)")
    return "\n".join(out) + "\n"
