"""The openai_agent gateway: a 1 MiB message next to another episode's request, and the
gateway's own cost per request.

    python benchmarks/gateway.py [--requests 200]

One gateway on the ``hf`` engine with the offline ``tiny-chat`` model (1,024 positions):

* two episodes at once: episode A sends a 1 MiB message (and a 3,000-character one, which
  passes the character bound but not the positions), episode B a short question; prints each
  answer's status and seconds (A must be a 400 at once, B a 200);
* ``--requests`` sequential requests, each from a fresh episode and ``openai`` client, with a
  scripted policy in place of the engine (the gateway and the HTTP round trip alone),
  streamed and not; then with the ``hf`` engine generating 8 tokens. Prints the median ms.

Nothing is downloaded or written.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import time

import aiohttp
import openai

from rlctl.agents.gateway import Gateway
from rlctl.config.pipeline import validate_recipe
from rlctl.config.recipe import Recipe
from rlctl.engines.rollout.contract import RolloutEngineSpec, SamplingParams
from rlctl.engines.rollout.hf.engine import HFRolloutEngine
from rlctl.models.loading import load_tokenizer
from rlctl.testing.agent_episode import ScriptedChatPolicy

POSITIONS = 1024


def engine_and_tokenizer() -> tuple[HFRolloutEngine, object]:
    recipe = Recipe.model_validate({
        "model": {"path": "tiny-chat", "dtype": "float32",
                  "tiny": {"max_position_embeddings": POSITIONS}},
        "data": {"task": "count_digits"}, "rollout": {"max_new_tokens": 8}})
    engine = HFRolloutEngine(RolloutEngineSpec.from_loaded(validate_recipe(recipe)))
    engine.load()
    return engine, load_tokenizer(recipe.model)


async def big_next_to_small(engine, tok) -> list[tuple[int, float]]:
    gateway = Gateway(tok, engine.generate, max_positions=POSITIONS)
    await gateway.start()
    a, b = (gateway.open(SamplingParams(8), max_turns=4, max_total_tokens=512) for _ in "ab")
    async with aiohttp.ClientSession() as http:
        async def post(key: str, content: str) -> tuple[int, float]:
            start = time.perf_counter()
            async with http.post(f"{gateway.base_url}/chat/completions",
                                 headers={"Authorization": f"Bearer {key}"},
                                 json={"messages": [{"role": "user", "content": content}]}) as r:
                await r.read()
                return r.status, time.perf_counter() - start

        answers = await asyncio.gather(post(a.key, "x" * (1 << 20)),
                                       post(b.key, "what is 2+3?"), post(a.key, "y" * 3000))
    await gateway.stop()
    return list(answers)


async def per_request(generate, tok, n: int, *, stream: bool) -> float:
    gateway = Gateway(tok, generate, max_positions=POSITIONS)
    await gateway.start()
    times = []
    for _ in range(n):
        session = gateway.open(SamplingParams(8), max_turns=4, max_total_tokens=512)
        client = openai.AsyncOpenAI(base_url=gateway.base_url, api_key=session.key,
                                    max_retries=0)
        start = time.perf_counter()
        reply = await client.chat.completions.create(
            model="policy", messages=[{"role": "user", "content": "hi"}], stream=stream)
        if stream:
            async for _ in reply:
                pass
        times.append(time.perf_counter() - start)
        await client.close()
        gateway.close(session)
    await gateway.stop()
    return statistics.median(times) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=200)
    args = parser.parse_args()
    engine, tok = engine_and_tokenizer()
    for name, (status, seconds) in zip(("1 MiB (A)", "short (B)", "3,000 chars (A)"),
                                       asyncio.run(big_next_to_small(engine, tok)), strict=True):
        print(f"{name:>16}: HTTP {status} in {seconds * 1000:.0f} ms")
    scripted = ScriptedChatPolicy(tok, lambda context: "hello there")
    for stream in (False, True):
        ms = asyncio.run(per_request(scripted, tok, args.requests, stream=stream))
        print(f"scripted policy, {'streamed' if stream else 'not streamed'}: {ms:.1f} ms/request")
    ms = asyncio.run(per_request(engine.generate, tok, max(args.requests // 4, 1), stream=False))
    print(f"hf engine, tiny-chat, 8 tokens: {ms:.1f} ms/request")


if __name__ == "__main__":
    main()
