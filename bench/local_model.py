"""Does the embedded model answer a vote of five side by side? A vote of N against a single call.

Starts the embedded llama.cpp server (the product's `LocalModelServer`) once per slot setting,
each from cold (a fresh process, one warm-up call that is not timed), and sends the same vote
prompt either once or N times at once, `--repeats` times, alternating. The request is what a
vote branch sends: the solve prompt, the `Answer` JSON schema, the temperature spread of votes.

    python -m bench.local_model --repeats 10 --votes 5 --json

Prints JSON: for each slot setting (the default, and `--compare-parallel`, 1 by default),
`single_s` and `vote_s` (medians), `ratio_vote_vs_single` (median of the per-repeat ratios),
`tokens_per_s` (completion tokens over wall time, single and vote) and the server's peak RSS;
`ratio_vote5_vs_single` is the headline for the default setting (goal <= 2.0).

It splits into two factors, measured apart in the same run: `step_ratio_forced`, what one
decode step for N slots costs against a step for one (`--forced-tokens` tokens forced with
`ignore_eos` through llama.cpp's native `/completion`, so every reply has the same length: the
machine's share), and `reply_length_factor`, the rest (a vote waits for its longest reply: the
model's share). Batching that were free would make the first 1.0.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import sys
import time

import httpx
import openai

from parallax.logic.branch_kinds import spread
from parallax.prompts.solve import answer_messages
from parallax.runtime.model_server import LocalModelServer, default_threads, peak_rss_mb
from parallax.runtime.settings import load
from parallax.runtime.structured_call import response_format
from parallax.state.payloads import Answer

QUESTION = "A farmer has 17 sheep and buys 5 more. How many sheep does he have?"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def request(temperature: float, max_tokens: int) -> dict:
    """A vote branch's request; the seed makes its reply the same in every repeat and setting."""
    messages = [
        {"role": "system" if m.type == "system" else "user", "content": m.content}
        for m in answer_messages(QUESTION, "", [], short=True)
    ]
    return {
        "messages": messages,
        "temperature": temperature,
        "max_tokens": max_tokens,
        "seed": 7,
        "response_format": response_format(Answer, "json_schema"),
    }


async def timed(client: openai.AsyncOpenAI, model: str, bodies: list[dict]) -> tuple[float, int]:
    """Wall seconds and completion tokens of `bodies` sent at once."""
    started = time.perf_counter()
    replies = await asyncio.gather(
        *(client.chat.completions.create(model=model, **body) for body in bodies)
    )
    return time.perf_counter() - started, sum(r.usage.completion_tokens for r in replies)


async def forced_steps(base_url: str, votes: int, tokens: int, repeats: int = 3) -> dict:
    """Milliseconds per decode step with one slot and with `votes` slots, every reply exactly
    `tokens` long."""
    body = {
        "prompt": QUESTION,
        "n_predict": tokens,
        "ignore_eos": True,
        "temperature": 0.8,
        "seed": 7,
        "cache_prompt": False,
    }

    async def timed_steps(client: httpx.AsyncClient, n: int) -> float:
        started = time.perf_counter()
        replies = await asyncio.gather(
            *(client.post(f"{base_url}/completion", json=body) for _ in range(n))
        )
        for reply in replies:
            reply.raise_for_status()
            predicted = reply.json()["tokens_predicted"]
            if predicted != tokens:
                raise RuntimeError(f"forced decode gave {predicted} tokens, expected {tokens}")
        return (time.perf_counter() - started) / tokens * 1000

    async with httpx.AsyncClient(trust_env=False, timeout=600) as client:
        singles, batches = [], []
        for _ in range(repeats):
            singles.append(await timed_steps(client, 1))
            batches.append(await timed_steps(client, votes))
    single, batch = statistics.median(singles), statistics.median(batches)
    return {
        "tokens": tokens,
        "single_ms": round(single, 1),
        f"slots_{votes}_ms": round(batch, 1),
        "step_ratio": round(batch / single, 3),
    }


async def measure(
    parallel: int,
    votes: int,
    repeats: int,
    max_tokens: int,
    batch_threads: int | None = None,
    forced_tokens: int = 48,
) -> dict:
    settings = load().model_copy(
        update={"base_url": None, "model_parallel": parallel, "model_batch_threads": batch_threads}
    )
    temperatures = spread(0.3, 1.0, votes)
    with LocalModelServer(settings) as server:
        client = openai.AsyncOpenAI(
            base_url=server.url, api_key="local", max_retries=0, timeout=600
        )
        model = settings.chat_model_name
        await timed(client, model, [request(0.3, max_tokens)])  # warm-up, not timed
        singles, batches, ratios = [], [], []
        for r in range(repeats):
            single = await timed(client, model, [request(temperatures[r % votes], max_tokens)])
            vote = await timed(client, model, [request(t, max_tokens) for t in temperatures])
            singles.append(single)
            batches.append(vote)
            ratios.append(vote[0] / single[0])
            log(
                f"parallel {parallel}, repeat {r + 1}/{repeats}: single {single[0]:.2f}s, vote of"
                f" {votes} {vote[0]:.2f}s"
            )
        await client.close()
        forced = (
            await forced_steps(server.url.removesuffix("/v1"), votes, forced_tokens)
            if forced_tokens
            else None
        )
        rss = peak_rss_mb(server.process.pid)
    ratio = statistics.median(ratios)
    threads = settings.model_threads or default_threads()
    return {
        "parallel": parallel,
        "threads": threads,
        "batch_threads": batch_threads or threads,
        "single_s": round(statistics.median(s for s, _ in singles), 3),
        "vote_s": round(statistics.median(v for v, _ in batches), 3),
        "ratio_vote_vs_single": round(ratio, 3),
        "forced": forced,
        "reply_length_factor": round(ratio / forced["step_ratio"], 3) if forced else None,
        "tokens_per_s": {
            "single": round(sum(t for _, t in singles) / sum(s for s, _ in singles), 1),
            "vote": round(sum(t for _, t in batches) / sum(v for v, _ in batches), 1),
        },
        "server_peak_rss_mb": rss,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--votes", type=int, default=5, help="branches of the vote (default 5)")
    parser.add_argument(
        "--repeats", type=int, default=10, help="timed single/vote pairs per setting (default 10)"
    )
    parser.add_argument(
        "--parallel",
        type=int,
        default=None,
        help="slots of the server (default: PARALLAX_MODEL_PARALLEL)",
    )
    parser.add_argument(
        "--compare-parallel",
        type=int,
        default=1,
        help="second slot setting measured the same way (0: none)",
    )
    parser.add_argument("--max-tokens", type=int, default=128, help="per reply (default 128)")
    parser.add_argument(
        "--batch-threads", type=int, default=None, help="PARALLAX_MODEL_BATCH_THREADS for this run"
    )
    parser.add_argument(
        "--forced-tokens",
        type=int,
        default=48,
        help="tokens per reply of the forced-length step probe (0: skip it; default 48)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="accepted for the CLI contract; the output is always JSON",
    )
    args = parser.parse_args(argv)
    parallel = args.parallel or load().model_parallel
    settings = [parallel] + ([args.compare_parallel] if args.compare_parallel else [])
    runs = {
        f"parallel_{p}": asyncio.run(
            measure(
                p, args.votes, args.repeats, args.max_tokens, args.batch_threads, args.forced_tokens
            )
        )
        for p in settings
    }
    main_run = runs[f"parallel_{parallel}"]
    out = {
        "benchmark": "local_model",
        "votes": args.votes,
        "repeats": args.repeats,
        "max_tokens": args.max_tokens,
        f"ratio_vote{args.votes}_vs_single": main_run["ratio_vote_vs_single"],
        "step_ratio_forced": (main_run["forced"] or {}).get("step_ratio"),
        "reply_length_factor": main_run["reply_length_factor"],
        **runs,
        "goal_met": main_run["ratio_vote_vs_single"] <= 2.0,
    }
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
