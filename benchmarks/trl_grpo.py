"""TRL's GRPOTrainer on rlctl's tiny task: the TRL half of ``benchmarks/vs_trl.py``.

Runs in the TRL env (``benchmarks/build_trl_env.sh``) with the rlctl source tree on
``PYTHONPATH``. The model, tokenizer, prompts and reward are rlctl's own builders with the
values of ``recipes/tiny_grpo.toml`` (read from the recipe, so the two sides cannot drift),
built offline and handed to TRL as objects: nothing is downloaded. The settings are the
recipe's: fp32 on CPU, HF generate, 64 prompts x 8 samples per step, 3 new tokens, sampling at
temperature 1, beta 0 (no reference model), ``loss_type="dapo"`` (token-mean over the batch,
like the recipe's ``token-mean``), clip 0.2, AdamW lr 3e-3 constant, grad clip 1.0, one
optimizer step per generation batch.

``--workload real`` runs ``recipes/smollm2_grpo.toml`` instead: the converted SmolLM2-135M-Instruct
(``rlctl models install smollm2-135m``; the directory is read, nothing downloaded) in fp32,
reasoning-gym's 2-digit sums from rlctl's ``reasoning_gym`` task (its train split: the held-out
questions never appear), chat-formatted by TRL with the model's template, scored by rlctl's
``reasoning_gym`` reward on TRL's completion ids; 16 prompts x 4 samples, 16 new tokens, lr 1e-5
constant, beta 0. ``--save DIR`` writes the trained model there, so that the driver scores it
with ``rlctl eval`` exactly as it scores rlctl's.

Writes one JSON object per optimizer step to ``--out``: ``{"step", "t", "completion_len",
"reward"}``, ``t`` being ``time.perf_counter()`` at the step's end (``"t0"`` on the first line
is the training start), so the driver measures TRL's steps exactly like rlctl's.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def recipe_values(path: Path) -> dict:
    with path.open("rb") as f:
        return tomllib.load(f)


def build_dataset(count: int, seed: int):  # type: ignore[no-untyped-def]
    """The first ``count`` prompts of rlctl's count_digits stream, with ``<bos>`` in the text:
    TRL tokenises prompts without special tokens, rlctl's tokenizer prepends ``<bos>``, and the
    tokenizer matches the literal ``<bos>`` as its special token, so the ids are the same."""
    from datasets import Dataset

    from rlctl.models.tiny import BOS
    from rlctl.tasks.synthetic import CountDigitsOptions, count_digits

    task = count_digits(CountDigitsOptions(), seed=seed, split="train")
    rows = []
    for _, prompt in zip(range(count), task, strict=False):
        rows.append({"prompt": BOS + prompt.text, "answer": prompt.ground_truth["ground_truth"]})
    return Dataset.from_list(rows)


def make_reward(tokenizer):  # type: ignore[no-untyped-def]
    """rlctl's ``digits_match`` on TRL's completion ids (cut at the first eos, as rlctl does)."""
    from rlctl.models.tiny import EOS_ID
    from rlctl.rewards.base import RewardInput
    from rlctl.rewards.match import digits_match

    def digits_match_reward(prompts, completions, completion_ids, answer, **_):  # type: ignore[no-untyped-def]
        scores = []
        for ids, target in zip(completion_ids, answer, strict=True):
            sample = RewardInput.from_tokens(
                tokenizer,
                prompt_ids=[],
                response_ids=ids,
                ground_truth={"ground_truth": target},
                data_source="count_digits",
                eos_token_ids=[EOS_ID],
            )
            scores.append(digits_match(sample)["score"])
        return scores

    return digits_match_reward


def build_real_dataset(recipe: dict, count: int):  # type: ignore[no-untyped-def]
    """The first ``count`` training prompts of the recipe's ``reasoning_gym`` task, as chat
    messages (TRL applies the model's chat template, as rlctl does), with the ground truth."""
    from datasets import Dataset

    from rlctl.tasks.reasoning_gym_task import ReasoningGymOptions, reasoning_gym_task

    options = ReasoningGymOptions(**recipe["data"]["task_options"])
    task = reasoning_gym_task(options, seed=recipe["run"]["seed"], split="train")
    rows = []
    for _, prompt in zip(range(count), task, strict=False):
        rows.append({"prompt": prompt.messages, "truth": json.dumps(prompt.ground_truth),
                     "source": prompt.data_source})
    return Dataset.from_list(rows)


def make_real_reward(tokenizer):  # type: ignore[no-untyped-def]
    """rlctl's ``reasoning_gym`` reward on TRL's completion ids (cut at the first eos)."""
    from rlctl.rewards.base import RewardInput
    from rlctl.rewards.reasoning_gym_reward import reasoning_gym

    def reasoning_gym_reward(prompts, completions, completion_ids, truth, source, **_):  # type: ignore[no-untyped-def]
        scores = []
        for ids, gt, src in zip(completion_ids, truth, source, strict=True):
            sample = RewardInput.from_tokens(
                tokenizer, prompt_ids=[], response_ids=ids, ground_truth=json.loads(gt),
                data_source=src, eos_token_ids=[tokenizer.eos_token_id], prompt_text="")
            scores.append(reasoning_gym(sample)["score"])
        return scores

    return reasoning_gym_reward


def build_workload(workload: str, r: dict, steps: int):  # type: ignore[no-untyped-def]
    """``(model, tokenizer, dataset, reward)`` of the workload, built offline."""
    import torch

    seed = r["run"]["seed"]
    count = r["algorithm"]["prompts_per_step"] * steps
    if workload == "real":
        from transformers import AutoModelForCausalLM, AutoTokenizer

        from rlctl.models.catalog import resolve_model_path

        path = resolve_model_path(r["model"]["path"])  # the installed directory
        tokenizer = AutoTokenizer.from_pretrained(path, local_files_only=True)
        tokenizer.padding_side = "left"
        model = AutoModelForCausalLM.from_pretrained(path, local_files_only=True,
                                                     dtype=torch.float32)
        return model, tokenizer, build_real_dataset(r, count), make_real_reward(tokenizer)
    from rlctl.config.recipe import TinyModelSection
    from rlctl.models.tiny import build_tiny_model, build_tiny_tokenizer

    tokenizer = build_tiny_tokenizer()
    model = build_tiny_model(TinyModelSection(**r["model"].get("tiny", {})), seed=seed)
    return model, tokenizer, build_dataset(count, seed), make_reward(tokenizer)


def grpo_config(GRPOConfig, r: dict, args: argparse.Namespace):  # type: ignore[no-untyped-def]
    """TRL's settings from the recipe's values (the same math as rlctl's run)."""
    alg, optim, rollout = r["algorithm"], r["algorithm"]["optim"], r["rollout"]
    prompts, group = alg["prompts_per_step"], alg["group_size"]
    seed = r["run"]["seed"]
    return GRPOConfig(
        output_dir=str(args.out.parent / "trl-output"),
        use_cpu=True,
        bf16=False,
        fp16=False,
        seed=seed,
        max_steps=args.steps,
        per_device_train_batch_size=prompts * group,  # completions per step
        num_generations=group,
        gradient_accumulation_steps=1,
        steps_per_generation=1,
        num_iterations=alg.get("epochs", 1),
        max_completion_length=rollout["max_new_tokens"],
        temperature=rollout.get("temperature", 1.0),
        top_p=1.0,
        top_k=0,
        beta=0.0,
        loss_type="dapo",
        scale_rewards="group",
        epsilon=0.2,
        learning_rate=optim["lr"],
        lr_scheduler_type="constant",
        warmup_steps=0,
        optim="adamw_torch",
        weight_decay=0.0,
        max_grad_norm=optim.get("grad_clip", 1.0),
        logging_steps=1,  # on_log after every step: the step clock
        report_to="none",
        save_strategy="no",
        disable_tqdm=True,
        dataloader_num_workers=0,
        remove_unused_columns=False,  # the reward needs the ground-truth columns
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, required=True)
    parser.add_argument("--out", type=Path, required=True)
    parser.add_argument("--workload", choices=("tiny", "real"), default="tiny")
    parser.add_argument("--recipe", type=Path, default=None,
                        help="default: recipes/tiny_grpo.toml (tiny), smollm2_grpo.toml (real)")
    parser.add_argument("--save", type=Path, default=None, help="save the trained model here")
    args = parser.parse_args()
    if args.recipe is None:
        name = "smollm2_grpo.toml" if args.workload == "real" else "tiny_grpo.toml"
        args.recipe = REPO / "recipes" / name

    import torch
    from transformers import TrainerCallback
    from trl import GRPOConfig, GRPOTrainer

    r = recipe_values(args.recipe)
    seed = r["run"]["seed"]
    model, tokenizer, dataset, reward = build_workload(args.workload, r, args.steps)
    torch.manual_seed(seed)

    out = args.out.open("w", encoding="utf-8")

    class StepClock(TrainerCallback):
        def on_train_begin(self, *_, **__):  # type: ignore[no-untyped-def]
            out.write(json.dumps({"t0": time.perf_counter()}) + "\n")

        def on_log(self, _args, state, _control, logs=None, **__):  # type: ignore[no-untyped-def]
            if logs and "completions/mean_length" in logs:
                out.write(json.dumps({
                    "step": state.global_step,
                    "t": time.perf_counter(),
                    "completion_len": logs["completions/mean_length"],
                    "reward": logs.get("reward"),
                }) + "\n")
                out.flush()

    config = grpo_config(GRPOConfig, r, args)
    trainer = GRPOTrainer(
        model=model,
        reward_funcs=[reward],
        args=config,
        train_dataset=dataset,
        processing_class=tokenizer,
        callbacks=[StepClock()],
    )
    trainer.train()
    out.close()
    if args.save is not None:
        trainer.save_model(str(args.save))
        tokenizer.save_pretrained(str(args.save))


if __name__ == "__main__":
    os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")
    sys.exit(main())
