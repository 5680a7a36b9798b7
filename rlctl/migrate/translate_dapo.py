"""verl -> rlctl for DAPO: dynamic sampling (``algorithm.filter_groups``, ``data.gen_batch_size``)
and the dapo reward manager's overlong punishment, exactly as verl computes them.

* ``filter_groups`` keeps a prompt's group when the std of ``metric`` over its responses is
  above 0 -> ``[algorithm.dynamic_sampling]``. Its metrics: ``seq_reward`` (the summed
  sequence score) and ``seq_final_reward`` (the same, minus the KL when it is in the reward)
  are rlctl's ``score``; anything else (``acc``, ``score``...) is a key of the reward
  function's result dict, i.e. an rlctl reward's raw score or one of its components.
  ``max_num_gen_batches`` caps the draws -> ``max_draws`` (verl's "no limit" is refused: every
  rlctl wait has a bound); ``data.gen_batch_size`` prompts per draw -> ``prompts_per_draw``.
* The dapo reward manager adds ``min(-(len - (max_resp_len - buffer)) / buffer * factor, 0)``
  to each score when ``overlong_buffer_cfg.enable`` -> ``[algorithm.overlong]``. verl reads the
  settings from ``reward_model.reward_kwargs`` (``overlong_buffer_cfg``, ``max_resp_len``) or,
  in verl's DAPO recipe config, from ``reward_model.overlong_buffer`` (with ``max_resp_len``
  the response length).
"""

from __future__ import annotations

from typing import Any

from rlctl.migrate.ledger import Ledger
from rlctl.migrate.translate_reward_model import RewardKeys

FG = "algorithm.filter_groups"
DS = "algorithm.dynamic_sampling"
# verl's `acc` is a key of the reward function's dict; rlctl's built-ins name it differently
ACC = {"exact_match": "exact_match", "digits_match": "digits_match/exact", "gsm8k": "gsm8k"}


def translate_dynamic_sampling(lg: Ledger, rewards: list[str], reward_model: bool) -> None:
    gen = "data.gen_batch_size"
    enabled = bool(lg.take(f"{FG}.enable", f"{DS}.enabled")) if f"{FG}.enable" in lg.cfg else False
    if not enabled:
        for key in (f"{FG}.metric", f"{FG}.max_num_gen_batches"):
            lg.drop(key, "filter_groups is off")
        if lg.value(gen) not in (None, lg.value("data.train_batch_size")):
            lg.conflict(gen, f"{lg.value(gen)} prompts per step generated and trained on (verl's "
                     "dataloader batch) while train_batch_size is "
                     f"{lg.value('data.train_batch_size')}: rlctl has one prompt count per step",
                     "set data.gen_batch_size to data.train_batch_size, or enable "
                     "algorithm.filter_groups")
        else:
            lg.drop(gen, "same as data.train_batch_size (filter_groups is off)")
        return
    lg.put(f"{DS}.enabled", True, f"{FG}.enable")
    metric = _metric(lg, rewards, reward_model)
    if metric is not None:
        lg.put(f"{DS}.metric", metric, f"{FG}.metric")
    cap = lg.take(f"{FG}.max_num_gen_batches", f"{DS}.max_draws")
    if not isinstance(cap, int) or isinstance(cap, bool) or cap <= 0:
        lg.conflict(f"{FG}.max_num_gen_batches", f"{cap!r}: verl keeps generating without a limit; "
                 "rlctl bounds every wait", "set a positive cap, e.g. 10 (DAPO's)")
    else:
        lg.put(f"{DS}.max_draws", cap, f"{FG}.max_num_gen_batches")
    per_draw = lg.take(gen, f"{DS}.prompts_per_draw")
    if per_draw is not None and per_draw != lg.value("data.train_batch_size"):
        lg.put(f"{DS}.prompts_per_draw", int(per_draw), "data.gen_batch_size (prompts)")


def _metric(lg: Ledger, rewards: list[str], reward_model: bool) -> str | None:
    key = f"{FG}.metric"
    metric = lg.take(key, f"{DS}.metric")
    if metric in ("seq_reward", "seq_final_reward"):
        if metric == "seq_final_reward" and lg.value("algorithm.use_kl_in_reward"):
            lg.conflict(key, "seq_final_reward with the KL in the reward: verl filters on the "
                     "score minus the KL penalty, rlctl on the score", "use seq_reward")
            return None
        return "score"
    if metric is None:
        lg.conflict(key, "unset: verl's filter needs a metric", "set it, e.g. seq_reward or acc")
        return None
    if reward_model:
        lg.conflict(key, f'"{metric}": a key of the reward function\'s result, which verl does '
                 "not compute when the reward model scores", "use seq_reward")
        return None
    if len(rewards) != 1:
        lg.conflict(key, f'"{metric}": a key of the reward function\'s result, and --reward names '
                 f"{len(rewards)} rewards", "name one --reward, or use seq_reward")
        return None
    name = rewards[0]
    if metric == "score":  # the reward function's own score, before any shaping
        return name
    if metric == "acc" and name in ACC:
        lg.notes.append(f"{key} = acc: rlctl's {name} has no `acc`; {ACC[name]} varies in a "
                        "group exactly when correctness does")
        return ACC[name]
    lg.notes.append(f"{key} = {metric}: the {name} reward must return {metric!r} in its dict "
                    f"(rlctl reads it as {name}/{metric})")
    return f"{name}/{metric}"


# --------------------------------------------------------------------------- overlong


def translate_reward_manager(lg: Ledger, reward_model: bool, keys: RewardKeys) -> None:
    """verl's reward manager: ``naive`` (nothing to map) or ``dapo`` (the overlong buffer)."""
    manager = lg.value(keys.manager)
    if manager != "dapo":
        return  # naive is dropped by the rules; any other manager is refused there
    lg.take(keys.manager, "algorithm.overlong")
    lg.take("reward_manager.name", "algorithm.overlong")
    kw = keys.kwargs
    if f"{kw}.overlong_buffer_cfg.enable" in lg.cfg:
        cfg, max_len_key = f"{kw}.overlong_buffer_cfg", f"{kw}.max_resp_len"
    elif "reward_model.overlong_buffer.enable" in lg.cfg:  # verl's DAPO recipe config
        cfg, max_len_key = "reward_model.overlong_buffer", "data.max_response_length"
    elif keys.new:  # v0.7.1+: the dapo manager without the buffer punishes nothing
        lg.notes.append(f"{keys.manager} = dapo without overlong_buffer_cfg: no overlong "
                        "punishment (verl's dapo manager then scores like naive)")
        return
    else:
        lg.conflict(keys.manager, "dapo without overlong_buffer_cfg: verl's dapo "
                    "manager reads overlong_buffer_cfg.enable", "add "
                    f"+{kw}.overlong_buffer_cfg.enable=False, or use the naive manager")
        return
    lg.drop(f"{cfg}.log", "metrics only: rlctl always logs reward/overlong")
    if not lg.take(f"{cfg}.enable", "algorithm.overlong.buffer_len"):
        for name in ("len", "penalty_factor"):
            lg.drop(f"{cfg}.{name}", "the overlong buffer is off")
        lg.drop(f"{kw}.max_resp_len", "the overlong buffer is off")
        return
    if reward_model:
        lg.conflict(f"{cfg}.enable", "the dapo manager returns the reward model's score alone, "
                 "without the overlong punishment; rlctl would add it",
                 "turn the overlong buffer off (it does nothing in verl with a reward model)")
        return
    _overlong(lg, cfg, max_len_key, kw)


def _overlong(lg: Ledger, cfg: str, max_len_key: str, kw: str) -> None:
    length = lg.take(f"{cfg}.len", "algorithm.overlong.buffer_len")
    factor = lg.take(f"{cfg}.penalty_factor", "algorithm.overlong.penalty_factor")
    max_len = lg.value(max_len_key)
    same = max_len == lg.value("data.max_response_length")
    lg.take(max_len_key, "algorithm.overlong.max_tokens" + (" (= rollout.max_new_tokens, unset)"
                                                           if same else ""))
    if max_len is None:
        lg.conflict(max_len_key, "unset: verl's dapo manager asserts max_resp_len is given with "
                    "overlong_buffer_cfg", f"set +{kw}.max_resp_len (the response length)")
        return
    if not _positive_int(length):
        lg.conflict(f"{cfg}.len", f"{length!r}: the buffer length must be a positive number of "
                 "tokens (verl divides by it)", "give the buffer in tokens, e.g. 4096")
        return
    if isinstance(factor, bool) or not isinstance(factor, int | float) or factor < 0:
        lg.conflict(f"{cfg}.penalty_factor", f"{factor!r}: the penalty must be a number >= 0",
                 "give it, e.g. 1.0 (DAPO's)")
        return
    if length > max_len:
        lg.conflict(f"{cfg}.len", f"{length} tokens, longer than max_resp_len {max_len}: verl "
                 "warns that every response is punished; rlctl refuses", f"use <= {max_len}")
        return
    lg.put("algorithm.overlong.buffer_len", int(length), f"{cfg.removeprefix('reward_model.')}.len")
    lg.put("algorithm.overlong.penalty_factor", float(factor),
           f"{cfg.removeprefix('reward_model.')}.penalty_factor")
    if not same:
        lg.put("algorithm.overlong.max_tokens", int(max_len), max_len_key)


def _positive_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value > 0
