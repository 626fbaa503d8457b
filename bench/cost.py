"""What a user pays: billed input tokens of votes asked with `n`, and the prefix cache of section
runs.

Why: a vote of 8 over a long page used to send 8 requests with the whole prompt each. Votes of one
wave share model and temperature by default and go as one request with `n`
(runtime/wave_request.py), and a section run's slices put what they share first and send slice 0
ahead (runtime/prefix_lead.py). This measures both through the real path (the solve graph,
ChatOpenAI) against the scripted server of testkit/billing_server.py, which bills as OpenAI
documents (prompt tokens per request, once for all `n` choices; cached input at a share of the
price: 0.1, the GPT-5 family's 90% discount, and 0.5, GPT-4o's 50%, both reported) and caches
prefixes block by block as vLLM does; tokens are words. When a prompt's blocks enter the cache is
run both ways (`--timings`): `scheduled`, as vLLM v1 (when the request is scheduled: separate
requests sent together share the first one's reading), and `read` (once its prompt is read: they all
miss, as on hosted APIs). Latency: 50 ms + 0.02 ms per uncached prompt token + 2 ms per completion
token (`--base-ms`, ...).

1. Votes: adaptive votes of at most 8 at the default vote temperature on `--questions` questions
   (bench/adaptive_vote.py's `mostly-easy` mix: the k-th vote of a question gets the k-th sample of
   its seeded stream, so both configurations see the same answers), each over its own page of
   `--prompt-tokens` words, `--parallel` questions at a time. `separate`: an endpoint that refuses
   `n` (Parallax then asks each vote on its own, a wave's requests at once); `n`: the same endpoint
   taking `n`. Goals (issue 32): billed input <= 0.3x separate, same accuracy and `ok` share, wall
   <= 1.1x. `floor_ratio`: the least any asking could bill (each page read once in full, the judge
   as billed) over separate's bill.
2. Section: one run of `--slices` slices whose shared prefix (system text, brief, a long question)
   is about `--prefix-tokens` words. Goal: >= 90% of the shared prefix tokens of slices 2.. cached.
3. `--embedded`: the same votes against the embedded llama.cpp server (does it honour `n` and reuse
   a cached prompt?), with its own usage figures. Slow on a shared CPU: off by default.
4. Plans (`plans`): what a question's adaptive vote of at most 8 costs under its priced plan
   (logic/vote_plan.py), against all votes in one request and against today's waves (3, then at
   least 3), at each prompt size of `--plan-prompts` words, with and without the server's prefix
   cache, at two price tables (gpt-4o-mini: cached input at half price; gpt-4.1: at a quarter), on
   the endpoint taking `n`, replies of `--reply-words` words of working. Cost per question is the
   server's bill at the table's prices (the judge's calls included); each configuration sees the
   same answers. Goals: the priced plan never more than 1.02x the cheaper of the two at any point,
   below both at one point at least, accuracy within 0.5 points of the waves'.

    python -m bench.cost                   # small: 40 questions, 2,000-token pages, 20 slices, 8
    plan questions python -m bench.cost --questions 200   # the issue's size python -m bench.cost
    --only plans --plan-questions 200   # the plans sweep alone
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from typing import Any

from bench.adaptive_vote import Question, Voter, make_questions
from parallax.runtime.settings import Settings
from testkit.billing_server import BillingServer, Pricing

DEFAULTS: dict[str, Any] = {
    name: Settings.model_fields[name].default
    for name in ("vote_temperature_min", "vote_temperature_max")
}
"""The votes' temperatures: Parallax's defaults (every vote at 0.7, so a wave can be one request),
whatever the environment says."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def page(question: Question, tokens: int) -> str:
    """The question's own page: `tokens` words no other question's page starts with."""
    return " ".join(f"b{question.number}w{i}" for i in range(tokens))


def point_at(url: str) -> None:
    from parallax.runtime.chat_models import forget_clients
    from parallax.runtime.services import renew_process_services
    from parallax.runtime.settings import reload_settings

    os.environ["OPENAI_BASE_URL"] = url
    os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_schema")
    # what the process learned about `n` is forgotten between configurations
    renew_process_services()
    reload_settings()
    forget_clients()


async def vote_config(
    name: str, questions: list[Question], tokens: int, parallel: int, context: dict[str, Any]
) -> dict[str, Any]:
    from parallax.graphs.solve import graph
    from parallax.logic.vote import final_value
    from parallax.state.context import Context

    ctx = Context(early_stop=True, straggler_factor=0.0, **context)
    gate = asyncio.Semaphore(parallel)
    rows: list[dict[str, Any]] = []

    async def one(question: Question) -> None:
        async with gate:
            began = time.perf_counter()
            out = await graph.ainvoke(
                {
                    "task": f"{page(question, tokens)}\n\n{question.text()}",
                    "mode": "vote",
                    "votes": 8,
                },
                context=ctx,
            )
            votes = out["branches"]  # the judge's call is billed too
            rows.append(
                {
                    "status": out["status"],
                    "answer": out.get("answer", ""),
                    "right": question.right,
                    "asked": out.get("votes_asked", 8),
                    "seconds": time.perf_counter() - began,
                    "prompt": sum(b["tokens"]["prompt"] for b in votes),
                    "cached": sum(b["tokens"].get("cached_tokens", 0) for b in votes),
                }
            )

    began = time.perf_counter()
    await asyncio.gather(*(one(q) for q in questions))
    wall = time.perf_counter() - began
    return {
        "config": name,
        "questions": len(rows),
        "accuracy": round(sum(final_value(r["answer"]) == r["right"] for r in rows) / len(rows), 4),
        "ok_share": round(sum(r["status"] == "ok" for r in rows) / len(rows), 4),
        "votes_per_question": round(statistics.mean(r["asked"] for r in rows), 3),
        "wall_s": round(wall, 2),
        "mean_run_s": round(statistics.mean(r["seconds"] for r in rows), 3),
        "recorded_prompt_tokens": sum(r["prompt"] for r in rows),
        "recorded_cached_tokens": sum(r["cached"] for r in rows),
    }


PLAN_PRICES = {
    "gpt-4o-mini": "cached input at 1/2 the input price",
    "gpt-4.1": "cached input at 1/4",
}
"""The two price tables of the plans sweep (runtime/prices.py's defaults)."""
POLICIES = ("priced", "one_request", "waves")


def plan_reply(voter: Voter, words: int) -> Any:
    """The voter's answers with `words` words of working; any other call (the judge) a valid reply
    of its schema."""
    from testkit.fault_server import _requested_schema, schema_instance

    def reply(body: dict[str, Any], k: int) -> str:
        name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
        if name != "VoteAnswer":
            _, schema = _requested_schema(body)
            return json.dumps(schema_instance(schema) if schema is not None else {"answer": "42"})
        answer = json.loads(voter(body))
        answer["reasoning"] = " ".join(f"step{i}" for i in range(words))
        return json.dumps(answer)

    return reply


async def plan_config(
    questions: list[Question], tokens: int, parallel: int, model: str
) -> dict[str, Any]:
    from parallax.graphs.solve import graph
    from parallax.logic.vote import final_value
    from parallax.state.context import Context

    ctx = Context(early_stop=True, straggler_factor=0.0, model=model, **DEFAULTS)
    gate = asyncio.Semaphore(parallel)
    rows: list[dict[str, Any]] = []

    async def one(question: Question) -> None:
        async with gate:
            out = await graph.ainvoke(
                {
                    "task": f"{page(question, tokens)}\n\n{question.text()}",
                    "mode": "vote",
                    "votes": 8,
                },
                context=ctx,
            )
            rows.append(
                {
                    "right": final_value(out.get("answer", "")) == question.right,
                    "ok": out["status"] == "ok",
                    "asked": out.get("votes_asked", 8),
                    "plan": out.get("vote_plan") or {},
                }
            )

    await asyncio.gather(*(one(q) for q in questions))
    last = rows[-1]["plan"]
    return {
        "accuracy": round(sum(r["right"] for r in rows) / len(rows), 4),
        "ok_share": round(sum(r["ok"] for r in rows) / len(rows), 4),
        "votes_per_question": round(statistics.mean(r["asked"] for r in rows), 3),
        "plans_chosen": dict(
            sorted(
                statistics_counts(
                    f"{r['plan'].get('first_wave')}/{r['plan'].get('min_wave')}" for r in rows
                ).items()
            )
        ),
        "last_plan_expected": {
            k: last.get(k) for k in ("plan", "first_wave", "min_wave", "expected_cost")
        },
        "last_priced_on": last.get("priced_on"),
    }


def statistics_counts(values: Any) -> dict[str, int]:
    counted: dict[str, int] = {}
    for value in values:
        counted[value] = counted.get(value, 0) + 1
    return counted


def plans_sweep(args: argparse.Namespace) -> dict[str, Any]:
    """Cost per question of each policy at each point of the grid (see the module docstring, 4.)."""
    from parallax.runtime.prices import DEFAULT_PRICES

    questions = make_questions(args.plan_questions, args.seed, "mostly-easy")
    voter = Voter(questions, args.seed)
    base = dict(
        base_ms=args.base_ms,
        prefill_ms_per_token=args.prefill_ms,
        decode_ms_per_token=args.decode_ms,
    )
    server = BillingServer(plan_reply(voter, args.reply_words), Pricing(**base))
    points: list[dict[str, Any]] = []
    with server as url:
        for tokens in args.plan_prompts:
            for cache in (True, False):
                for model in PLAN_PRICES:
                    price = DEFAULT_PRICES[model]
                    point: dict[str, Any] = {
                        "prompt_words": tokens,
                        "prefix_cache": cache,
                        "prices": model,
                    }
                    for policy in POLICIES:
                        voter.reset()
                        server.reset(Pricing(**base, prefix_cache=cache))
                        os.environ["PARALLAX_VOTE_PLAN"] = policy
                        point_at(url)
                        report = asyncio.run(plan_config(questions, tokens, args.parallel, model))
                        entries = server.log()
                        usd = sum(
                            (
                                (e["prompt_tokens"] - e["cached_tokens"]) * price.input
                                + e["cached_tokens"] * (price.cached_input or price.input)
                                + e["completion_tokens"] * price.output
                            )
                            / 1e6
                            for e in entries
                        )
                        point[policy] = {
                            "usd_per_question": round(usd / len(questions), 9),
                            "requests_per_question": round(len(entries) / len(questions), 3),
                            **report,
                        }
                    cheaper = min(
                        point["one_request"]["usd_per_question"], point["waves"]["usd_per_question"]
                    )
                    point["priced_over_cheaper"] = round(
                        point["priced"]["usd_per_question"] / cheaper, 4
                    )
                    point["priced_below_both"] = point["priced"]["usd_per_question"] < cheaper
                    point["accuracy_delta_pp_vs_waves"] = round(
                        100 * (point["priced"]["accuracy"] - point["waves"]["accuracy"]), 2
                    )
                    points.append(point)
                    log(
                        json.dumps(
                            {
                                k: point[k]
                                for k in (
                                    "prompt_words",
                                    "prefix_cache",
                                    "prices",
                                    "priced_over_cheaper",
                                    "priced_below_both",
                                    "accuracy_delta_pp_vs_waves",
                                )
                            }
                            | {p: point[p]["usd_per_question"] for p in POLICIES}
                        )
                    )
    os.environ.pop("PARALLAX_VOTE_PLAN", None)
    worst = max(p["priced_over_cheaper"] for p in points)
    return {
        "points": points,
        "questions": len(questions),
        "reply_words": args.reply_words,
        "prices": PLAN_PRICES,
        "worst_priced_over_cheaper": worst,
        "points_priced_below_both": sum(p["priced_below_both"] for p in points),
        "worst_accuracy_delta_pp_vs_waves": min(p["accuracy_delta_pp_vs_waves"] for p in points),
        "goals_met": {
            "never_over_1.02x_the_cheaper": worst <= 1.02,
            "below_both_somewhere": any(p["priced_below_both"] for p in points),
            "accuracy_within_0.5pp": all(
                abs(p["accuracy_delta_pp_vs_waves"]) <= 0.5 for p in points
            ),
        },
        "counts": (
            "usd_per_question is the server's bill at the table's prices; requests are HTTP"
            " requests"
        ),
    }


RATES = (0.1, 0.5)
"""Cached input at 10% of the input price (OpenAI's GPT-5 family: a 90% discount) and at 50%
(GPT-4o's)."""
TIMINGS = ("scheduled", "read")
"""When a prompt's blocks enter the cache (testkit/billing_server.py): vLLM v1, or once read (hosted
APIs)."""


def billed(entries: list[dict[str, Any]], rate: float) -> float:
    """Input tokens at full price: uncached prompt tokens, and cached ones at `rate` of the
    price."""
    return sum(e["prompt_tokens"] - e["cached_tokens"] * (1 - rate) for e in entries)


def by_schema(entries: list[dict[str, Any]], rate: float) -> dict[str, dict[str, float]]:
    """Requests and billed input per kind of call (the schema it asked for: votes, the judge)."""
    kinds: dict[str, dict[str, float]] = {}
    for e in entries:
        kind = kinds.setdefault(e["schema"] or "?", {"requests": 0, "billed_input_tokens": 0.0})
        kind["requests"] += 1
        kind["billed_input_tokens"] = round(kind["billed_input_tokens"] + billed([e], rate), 1)
    return kinds


def floor(entries: list[dict[str, Any]], rate: float) -> float:
    """The least any way of asking these votes could bill: each question's vote prompt read once in
    full (no vote request can hit a page no earlier request sent), plus the judge's calls as billed.
    """
    once = {e["messages_hash"]: e["prompt_tokens"] for e in entries if e["schema"] == "VoteAnswer"}
    return sum(once.values()) + billed([e for e in entries if e["schema"] != "VoteAnswer"], rate)


def votes(args: argparse.Namespace) -> dict[str, Any]:
    """For each cache timing: `separate` (an endpoint that refuses `n`: a request per vote, a wave's
    requests sent together) and `n` (the same endpoint taking `n`), billed at each cached rate."""
    questions = make_questions(args.questions, args.seed, "mostly-easy")
    voter = Voter(questions, args.seed)
    base = dict(
        cached_rate=args.cached_rate,
        base_ms=args.base_ms,
        prefill_ms_per_token=args.prefill_ms,
        decode_ms_per_token=args.decode_ms,
    )
    server = BillingServer(lambda body, k: voter(body), Pricing(**base, n_support="refuse"))
    out: dict[str, Any] = {}
    os.environ["PARALLAX_VOTE_PLAN"] = (
        "waves"  # the same waves both ways: what `n` saves, not what a plan does
    )
    with server as url:
        for timing in args.timings:
            reports, logs = {}, {}
            for name, support in (("separate", "refuse"), ("n", "yes")):
                voter.reset()
                server.reset(Pricing(**base, n_support=support, cache_timing=timing))
                point_at(url)
                report = asyncio.run(
                    vote_config(name, questions, args.prompt_tokens, args.parallel, DEFAULTS)
                )
                logs[name] = server.log()
                report["bill"] = server.bill().as_dict()
                report["by_schema"] = by_schema(logs[name], args.cached_rate)
                reports[name] = report
                log(json.dumps({"cache_timing": timing, **report}))
            separate, n = reports["separate"], reports["n"]
            out[timing] = {
                "separate": separate,
                "n": n,
                # billed input of n over that of separate requests on the same endpoint, at each
                # cached rate
                "billed_input_ratio": {
                    str(r): round(billed(logs["n"], r) / billed(logs["separate"], r), 3)
                    for r in RATES
                },
                # over separate requests each billed its whole prompt (the issue's "8 requests, each
                # with the full prompt": an endpoint without a prefix cache, or one whose cache they
                # all miss)
                "billed_input_ratio_vs_separate_uncached": {
                    str(r): round(billed(logs["n"], r) / separate["bill"]["prompt_tokens"], 3)
                    for r in RATES
                },
                # the least any asking could bill (each page read once, the judge as billed), over
                # separate's bill
                "floor_ratio": {
                    str(r): round(floor(logs["n"], r) / billed(logs["separate"], r), 3)
                    for r in RATES
                },
                "requests_ratio": round(n["bill"]["requests"] / separate["bill"]["requests"], 3),
                "completion_tokens_ratio": round(
                    n["bill"]["completion_tokens"] / max(separate["bill"]["completion_tokens"], 1),
                    3,
                ),
                "wall_ratio": round(n["wall_s"] / separate["wall_s"], 3),
                "same_accuracy": n["accuracy"] == separate["accuracy"],
                "same_ok_share": n["ok_share"] == separate["ok_share"],
                # every request of the n configuration is some branch's: their recorded tokens sum
                # to the bill
                "n_recorded_equals_billed": (
                    (n["recorded_prompt_tokens"], n["recorded_cached_tokens"])
                    == (n["bill"]["prompt_tokens"], n["bill"]["cached_tokens"])
                ),
            }
    os.environ.pop("PARALLAX_VOTE_PLAN", None)
    out["goals"] = {"billed_input_ratio_max": 0.3, "wall_ratio_max": 1.1}
    out["baselines"] = {
        "separate": (
            "the same endpoint refusing n: Parallax asks each vote alone, a wave's requests at once"
        ),
        "separate_uncached": "the same requests, each billed its whole prompt",
        "scheduled": (
            "vLLM v1: a prompt's blocks are cached when it is scheduled, so a wave's separate"
            " requests sent at once share the first one's reading"
        ),
        "read": (
            "a prompt's blocks are cached once it has been read: a wave's separate requests all"
            " miss"
        ),
    }
    return out


def section_run(slices: int, prefix_tokens: int) -> dict[str, Any]:
    from parallax.graphs.solve import graph
    from parallax.state.context import Context

    question = "Which figures does this filing report? " + " ".join(
        f"term{i}" for i in range(prefix_tokens - 120)
    )
    pages = [
        f"Page {i}: item {i} costs {i * 7} dollars and grew {i} percent. " * 4
        for i in range(slices)
    ]
    began = time.perf_counter()
    out = graph.invoke(
        {"pages": pages, "question": question, "mode": "section"}, context=Context(slice_chars=400)
    )
    return {
        "slices": len([b for b in out["branches"] if b["kind"] == "slice"]),
        "status": out["status"],
        "wall_s": round(time.perf_counter() - began, 2),
    }


def shared_prefix_tokens(slices: int, prefix_tokens: int) -> int:
    """The words every slice's prompt starts with, as the billing server counts them."""
    from parallax.logic.branch_plans import branch_messages

    question = "Which figures does this filing report? " + " ".join(
        f"term{i}" for i in range(prefix_tokens - 120)
    )
    prompts = [
        [
            w
            for m in branch_messages(
                {
                    "kind": "slice",
                    "text": f"part {i}",
                    "question": question,
                    "playbook": [],
                    "index": i,
                    "total": slices,
                    "brief": "b",
                },
                None,
            )
            for w in f"{'system' if m.type == 'system' else 'user'}: {m.content}".split()
        ]
        for i in range(2)
    ]
    return next(i for i, (a, b) in enumerate(zip(*prompts, strict=False)) if a != b)


def section(args: argparse.Namespace) -> dict[str, Any]:
    """One section run per cache timing; slice 0 goes ahead in both (runtime/prefix_lead.py)."""
    out: dict[str, Any] = {}
    shared = shared_prefix_tokens(args.slices, args.prefix_tokens)
    for timing in args.timings:
        server = BillingServer(
            lambda body, k: json.dumps({"relevant": False, "points": []}),
            Pricing(
                cached_rate=args.cached_rate,
                base_ms=args.base_ms,
                cache_timing=timing,
                prefill_ms_per_token=args.prefill_ms,
                decode_ms_per_token=args.decode_ms,
            ),
        )
        with server as url:
            point_at(url)
            run = section_run(args.slices, args.prefix_tokens)
            entries = server.log()
        later = entries[1:]
        share = (
            sum(min(e["cached_tokens"], shared) for e in later) / (shared * len(later))
            if later
            else 0.0
        )
        out[timing] = {
            **run,
            "requests": len(entries),
            "shared_prefix_tokens": shared,
            "first_slice_cached": entries[0]["cached_tokens"] if entries else None,
            "prefix_cached_share_after_first": round(share, 4),
            "bill": server.bill().as_dict(),
        }
        log(json.dumps({"cache_timing": timing, **out[timing]}))
    out["goal"] = {"prefix_cached_share_min": 0.9}
    return out


async def embedded_votes(
    name: str, products: list[tuple[int, int]], tokens: int, context: dict[str, Any]
) -> dict[str, Any]:
    """Adaptive votes of at most 8 on "what is a * b?" after a page of `tokens` words, one question
    at a time."""
    from parallax.graphs.solve import graph
    from parallax.logic.vote import final_value
    from parallax.state.context import Context

    ctx = Context(early_stop=True, straggler_factor=0.0, **context)
    rows = []
    began = time.perf_counter()
    for i, (a, b) in enumerate(products):
        filler = " ".join(
            f"{name[0]}{i}w{j}" for j in range(tokens)
        )  # own pages (s.., n..: as long) to read
        out = await graph.ainvoke(
            {"task": f"{filler}\n\nWhat is {a} * {b}?", "mode": "vote", "votes": 8}, context=ctx
        )
        rows.append(
            {
                "status": out["status"],
                "right": final_value(out.get("answer", "")) == str(a * b),
                "asked": out.get("votes_asked", 8),
                "prompt": sum(x["tokens"]["prompt"] for x in out["branches"]),
                "cached": sum(x["tokens"].get("cached_tokens", 0) for x in out["branches"]),
                "completion": sum(x["tokens"]["completion"] for x in out["branches"]),
            }
        )
    return {
        "config": name,
        "questions": len(rows),
        "accuracy": round(sum(r["right"] for r in rows) / len(rows), 3),
        "ok_share": round(sum(r["status"] == "ok" for r in rows) / len(rows), 3),
        "votes_per_question": round(statistics.mean(r["asked"] for r in rows), 2),
        "wall_s": round(time.perf_counter() - began, 1),
        "prompt_tokens": sum(r["prompt"] for r in rows),
        "cached_tokens": sum(r["cached"] for r in rows),
        "completion_tokens": sum(r["completion"] for r in rows),
        "completion_tokens_note": (
            "llama.cpp reports the first choice's completion tokens for a request with n; "
            "the others are estimated from it (runtime/wave_request.py share_usage)"
        ),
    }


class NeverN(dict[tuple[str, str], bool]):
    """A record of which endpoints take `n` that says none does (the `separate` run on the embedded
    server)."""

    def get(self, key: tuple[str, str], default: bool | None = None) -> bool:  # type: ignore[override]
        return False


def embedded(args: argparse.Namespace) -> dict[str, Any]:
    """The same vote runs against the embedded llama.cpp server, with the usage it reports (small
    sizes: it is slow on a shared CPU). Both at the default one vote temperature; `separate`: as if
    the endpoint refused `n` (a request per vote); `n`: as Parallax asks it (a wave in one request).
    """
    import httpx

    from parallax.runtime import model_server
    from parallax.runtime.chat_models import forget_clients
    from parallax.runtime.services import process_services, renew_process_services
    from parallax.runtime.settings import load, reload_settings

    os.environ.pop("OPENAI_BASE_URL", None)
    os.environ["PARALLAX_RESPONSE_FORMAT"] = "json_schema"
    renew_process_services()
    reload_settings()
    forget_clients()
    url = model_server.endpoint(load())
    messages = [
        {"role": "system", "content": "You answer with a number. " * 30},
        {"role": "user", "content": "What is 6 * 7?"},
    ]
    probe = httpx.post(
        f"{url}/chat/completions",
        json={"messages": messages, "n": 3, "max_tokens": 16},
        timeout=600,
    ).json()
    again = httpx.post(
        f"{url}/chat/completions", json={"messages": messages, "max_tokens": 16}, timeout=600
    ).json()
    products = [(3 + i, 7 + 2 * i) for i in range(args.embedded_questions)]
    report: dict[str, Any] = {
        "endpoint": url,
        "n_probe": {"choices": len(probe.get("choices", [])), "usage": probe.get("usage")},
        "same_prompt_again": {"usage": again.get("usage")},
    }
    for name in ("separate", "n"):
        renew_process_services()
        if (
            name == "separate"
        ):  # as if the endpoint refused `n`: a request per vote, on the same server
            process_services().takes_n = NeverN()
        result = asyncio.run(embedded_votes(name, products, args.embedded_prompt_tokens, DEFAULTS))
        result["takes_n"] = {f"{k[0]} {k[1]}": v for k, v in process_services().takes_n.items()}
        report[name] = result
        log(json.dumps(result))
    report["prompt_tokens_ratio"] = round(
        report["n"]["prompt_tokens"] / max(report["separate"]["prompt_tokens"], 1), 3
    )
    report["billed_input_ratio"] = {
        str(r): round(billed([report["n"]], r) / max(billed([report["separate"]], r), 1), 3)
        for r in RATES
    }
    return report


def main(argv: list[str] | None = None) -> dict[str, Any]:
    p = argparse.ArgumentParser(prog="python -m bench.cost", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--questions", type=int, default=40, help="vote questions (the issue's size: 200)"
    )
    p.add_argument("--prompt-tokens", type=int, default=2000, help="words of each question's page")
    p.add_argument("--parallel", type=int, default=20, help="questions asked at once")
    p.add_argument("--slices", type=int, default=20)
    p.add_argument(
        "--prefix-tokens", type=int, default=1000, help="about how many words the slices share"
    )
    p.add_argument(
        "--cached-rate",
        type=float,
        default=0.1,
        help=(
            "price of a cached input token, of a full one, in the bills shown (ratios: 0.1 and 0.5)"
        ),
    )
    p.add_argument(
        "--timings",
        nargs="+",
        choices=TIMINGS,
        default=list(TIMINGS),
        help="when the server caches a prompt's blocks: scheduled (vLLM v1), read (hosted APIs)",
    )
    p.add_argument("--base-ms", type=float, default=50.0)
    p.add_argument("--prefill-ms", type=float, default=0.02, help="ms per uncached prompt token")
    p.add_argument("--decode-ms", type=float, default=2.0, help="ms per completion token")
    p.add_argument("--seed", type=int, default=7)
    p.add_argument(
        "--embedded", action="store_true", help="also measure the embedded llama.cpp server (slow)"
    )
    p.add_argument("--embedded-questions", type=int, default=4)
    p.add_argument("--embedded-prompt-tokens", type=int, default=300)
    p.add_argument(
        "--only",
        nargs="+",
        choices=("votes", "section", "plans"),
        default=["votes", "section", "plans"],
    )
    p.add_argument(
        "--plan-questions",
        type=int,
        default=8,
        help="questions per point of the plans sweep (the issue: 200)",
    )
    p.add_argument(
        "--plan-prompts",
        type=int,
        nargs="+",
        default=[50, 500, 2000, 8000],
        help="prompt words of the sweep",
    )
    p.add_argument(
        "--reply-words",
        type=int,
        default=40,
        help="words of working in each vote's reply (plans sweep)",
    )
    args = p.parse_args(argv)
    result: dict[str, Any] = {
        "bench": "cost",
        "machine_note": "shared 2-core machine: wall times are noisy",
    }
    if "votes" in args.only:
        result["votes"] = votes(args)
    if "section" in args.only:
        result["section"] = section(args)
    if "plans" in args.only:
        result["plans"] = plans_sweep(args)
    if args.embedded:
        result["embedded"] = embedded(args)
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
