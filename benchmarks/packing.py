"""Packed vs padded micro-batches on a variable-length batch: real tokens/s of the fsdp engine.

    python benchmarks/packing.py [--samples 64] [--min-response 16] [--repeats 3] [--threads 1]

One process, one FSDP rank on gloo, the engine rlctl trains with (``FSDPEngine``), a tiny Qwen3
built offline (wider than the tiny recipe's, so the model's arithmetic, not Python, is what is
timed). The batch: ``--samples`` prompts of 8-16 tokens whose responses vary 1-8x in length
(``--min-response`` to 8x that, uniformly), like a reasoning task's. Each layout runs the
log-prob pass (``compute_log_prob``) and one update (``train_minibatch``: forward, backward,
optimizer step) over the whole batch; real tokens/s is the batch's prompt and response tokens
(twice: two passes) over the two passes' time, best of ``--repeats`` after one warm-up; the
same per CPU second of this process (what the layout costs, less what other work on a shared
machine took from it).

Layouts (``[engines.train.options]`` of the fsdp engine):

* ``padded``: ``micro_batch_size`` rows per micro-batch, padded to the widest (the default);
* ``padded+budget``: ``max_tokens_per_micro_batch``, longest samples first, still padded;
* ``packed+budget``: the same budget with ``packing = true`` (no padding at all).

Prints each layout's tokens/s and the packed/padded ratio. Nothing is downloaded or written.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time

from rlctl.config.pipeline import validate_recipe

EXIT_USAGE = 2


def build_batch(samples: int, min_response: int, seed: int):  # type: ignore[no-untyped-def]
    import torch

    from rlctl.engines.train.batch import ModelBatch
    from rlctl.models.tiny import PAD_ID

    g = torch.Generator().manual_seed(seed)
    prompts, responses = [], []
    for _ in range(samples):
        p = int(torch.randint(8, 17, (1,), generator=g))
        r = int(torch.randint(min_response, 8 * min_response + 1, (1,), generator=g))
        prompts.append(torch.randint(4, 30, (p,), generator=g))
        responses.append(torch.randint(4, 30, (r,), generator=g))
    return ModelBatch.from_samples(prompts, responses, PAD_ID), torch.randn(samples, generator=g)


def recipe(args: argparse.Namespace, options: dict):  # type: ignore[no-untyped-def]
    from rlctl.config.recipe import Recipe

    longest = 16 + 8 * args.min_response
    return Recipe.model_validate({
        "run": {"seed": 0, "device": "cpu"},
        "data": {"task": "count_digits"},
        "model": {"path": "tiny", "dtype": "float32", "tiny": {
            "hidden_size": 256, "intermediate_size": 768, "num_hidden_layers": 4,
            "num_attention_heads": 4, "num_key_value_heads": 2, "head_dim": 64,
            "max_position_embeddings": max(64, longest)}},
        "algorithm": {"optim": {"lr": 1e-4}},
        "engines": {"train": {"micro_batch_size": args.micro_batch_size,
                              "log_prob_micro_batch_size": args.micro_batch_size,
                              "options": options}},
    })


def loss_fn(out, f):  # type: ignore[no-untyped-def]
    mask = f["response_mask"]
    return (-(out["log_probs"] * f["advantages"][:, None]) * mask).sum() / f["tokens"][0], {}


def time_layout(args: argparse.Namespace, name: str, options: dict, batch, adv) -> dict:  # type: ignore[no-untyped-def]
    import torch

    from rlctl.engines.train.contract import ModelEngineSpec
    from rlctl.engines.train.fsdp.engine import FSDPEngine

    loaded = validate_recipe(recipe(args, options))
    engine = FSDPEngine(ModelEngineSpec.from_loaded(loaded, "actor"))
    engine.init()
    fields = {"advantages": adv, "response_mask": batch.response_mask,
              "tokens": torch.full((batch.batch_size,), float(batch.response_mask.sum()))}
    real = int(batch.attention_mask.sum())
    times, cpu = [], []
    for rep in range(args.repeats + 1):
        t0, c0 = time.perf_counter(), time.process_time()
        engine.compute_log_prob(batch, temperature=1.0)
        engine.train_minibatch(batch, fields, loss_fn, temperature=1.0)
        if rep > 0:  # the first round warms up allocators and kernels
            times.append(time.perf_counter() - t0)
            cpu.append(time.process_time() - c0)
    engine.close()
    best = min(times)
    return {"layout": name, "options": options, "best_s": best,
            "median_s": statistics.median(times), "tokens_per_s": 2 * real / best,
            "cpu_s": min(cpu), "tokens_per_cpu_s": 2 * real / min(cpu)}


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description=__doc__.splitlines()[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--samples", type=int, default=64, help="samples in the batch")
    parser.add_argument("--min-response", type=int, default=16,
                        help="shortest response; the longest is 8x this")
    parser.add_argument("--micro-batch-size", type=int, default=16,
                        help="rows per micro-batch of the padded layout")
    parser.add_argument("--budget", type=int, default=0,
                        help="token budget of the budget layouts (default: the padded layout's "
                             "average micro-batch, in tokens)")
    parser.add_argument("--repeats", type=int, default=3, help="timed rounds (best is shown)")
    # One intra-op thread by default: on a small shared machine a second one mostly waits
    # for a core that other work holds (spin-waiting), which swamps the layouts' difference.
    parser.add_argument("--threads", type=int, default=1,
                        help="torch intra-op threads (0: torch's choice)")
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    args = parser.parse_args(argv)
    for name in ("samples", "min_response", "micro_batch_size", "repeats"):
        if getattr(args, name) < 1:
            parser.exit(EXIT_USAGE, f"error: --{name.replace('_', '-')} must be >= 1\n")
    if args.budget < 0 or (args.budget and args.budget < 16 + 8 * args.min_response):
        parser.exit(EXIT_USAGE, f"error: --budget must hold the longest sample "
                                f"({16 + 8 * args.min_response} tokens)\n")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    import torch

    if args.threads:
        torch.set_num_threads(args.threads)
    batch, adv = build_batch(args.samples, args.min_response, seed=0)
    # By default the budget is what a padded micro-batch of this batch costs on average,
    # so the budget layouts run about as many micro-batches as the padded one.
    rows, width = batch.batch_size, batch.input_ids.shape[1]
    budget = args.budget or max(16 + 8 * args.min_response,
                                args.micro_batch_size * width * 3 // 4)
    layouts = [
        ("padded", {}),
        ("padded+budget", {"max_tokens_per_micro_batch": budget}),
        ("packed+budget", {"max_tokens_per_micro_batch": budget, "packing": True}),
    ]
    results = [time_layout(args, name, opts, batch, adv) for name, opts in layouts]
    padded = results[0]["tokens_per_s"]
    lengths = batch.response_mask.sum(dim=1)
    summary = {
        "samples": rows, "response_tokens": [int(lengths.min()), int(lengths.max())],
        "real_tokens": int(batch.attention_mask.sum()), "padded_tokens": rows * width,
        "budget": budget, "threads": torch.get_num_threads(), "load": os.getloadavg()[0],
        "runs": results, "packed_vs_padded": results[2]["tokens_per_s"] / padded,
        "packed_vs_padded_cpu": results[2]["tokens_per_cpu_s"] / results[0]["tokens_per_cpu_s"],
    }
    if args.json:
        print(json.dumps(summary))
        return 0
    print(f"packing benchmark: {rows} samples, responses {summary['response_tokens'][0]}-"
          f"{summary['response_tokens'][1]} tokens, {summary['real_tokens']} real tokens "
          f"({rows * width} padded to the widest), budget {budget} tokens, "
          f"{summary['threads']} threads, load {summary['load']:.1f}")
    print(f"{'layout':<16}{'best s':>8}{'median s':>10}{'real tok/s':>12}{'vs padded':>11}"
          f"{'cpu s':>8}{'tok/cpu-s':>11}")
    for r in results:
        print(f"{r['layout']:<16}{r['best_s']:>8.3f}{r['median_s']:>10.3f}"
              f"{r['tokens_per_s']:>12.0f}{r['tokens_per_s'] / padded:>10.2f}x"
              f"{r['cpu_s']:>8.2f}{r['tokens_per_cpu_s']:>11.0f}")
    print(f"packed/padded tokens/s: {summary['packed_vs_padded']:.2f}x (wall, best round); "
          f"per CPU second: {summary['packed_vs_padded_cpu']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
