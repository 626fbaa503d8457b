"""Budgets that hold: runs of every mode with random budgets, none over beyond what was in flight.

Why: `max_cost` / `max_tokens` (logic/budget.py) promise that a run starts no model call once what it has spent
reaches its budget, so it ends at its budget plus at most the calls already in flight then, and that a run the
budget stopped ends `needs_review` (or `failed`, with nothing to give) with "budget reached" in its reason.

How: the real solve and plan graphs, ChatOpenAI and the scripted OpenAI-compatible server
(tests/support/fault_server.py, which bills `prompt_tokens` = prompt characters / 4 per request and the reply's
tokens) answering after `--latency-ms`. Model "gpt-4o-mini", priced by the default table (runtime/prices.py).
Per mode (direct, vote, section, speculate with a judge's tournament, plan of 2-8 solve/vote/section tasks),
`--runs` runs with random shapes (votes 3-16, 2-20 slices, 2-8 candidates, 2-8 tasks) and replies of random
length; a budget in tokens or in USD (half each), drawn from 0.05x to 1.3x the median spend of `--calibrate`
unlimited runs of that mode. `--parallel` runs at once, each with `max_concurrency` `--concurrency`.

Checked per run, from its branch records (every model call's tokens, cost, and timed lifecycle):
  crossing     the moment the finished calls' spend first reached the budget (end times, in order)
  in_flight    calls let start before the crossing (+ `--slack-ms`: transition times are kept to the ms) and
               ended at or after it: what was already in flight. A call's start is when the budget check let it
               start (`budget_seen.at` on its record), else its first IN_PROGRESS
  over         spend - budget (> 0 only past the crossing)
  violations   runs whose `over` exceeds the in-flight calls' spend, or that started a call after the crossing
  unsaid       runs that refused work for their budget (a call, a wave, a task) but do not say "budget reached"
               in their reason, or end `ok`
Goal: 0 violations and 0 unsaid in every mode.

Prints one JSON object on stdout (progress on stderr):

    python -m bench.budgets [--runs 300] [--latency-ms 20] [--parallel 8] [--concurrency 4]
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import statistics
import sys
import time
from collections import Counter
from typing import Any
from unittest import mock

import numpy as np

from parallax.runtime.settings import reload_settings
from tests.support.fault_server import FaultConfig, FaultServer, _requested_schema, schema_instance

MODES = ("direct", "vote", "section", "speculate", "plan")
WORDS = ("revenue", "margin", "growth", "segment", "cash", "debt", "risk", "guidance", "market", "cost")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


DRAWS: Counter[bytes] = Counter()
"""Samples drawn so far per prompt and temperature."""


def reply(body: dict[str, Any]) -> str:
    """A valid reply of the schema asked for, with working of random length and a vote among three answers."""
    _, schema = _requested_schema(body)
    if schema is None:
        return "42"
    value = schema_instance(schema)
    seed = hashlib.sha256(json.dumps(body.get("messages"), sort_keys=True).encode()).digest()
    key = seed + str(body.get("temperature")).encode()
    DRAWS[key] += 1  # the k-th sample of one prompt is its own draw: votes at one temperature (one request with `n`) differ
    rng = random.Random(key + str(DRAWS[key]).encode())
    if isinstance(value, dict):
        if "reasoning" in value:
            value["reasoning"] = " ".join(rng.choice(WORDS) for _ in range(rng.randint(5, 60)))[:290]
        if "answer" in value:
            value["answer"] = rng.choice(("41", "42", "42", "43"))
        if "better" in value:
            value["better"] = rng.choice(("A", "B"))
        if "points" in value:
            value["relevant"] = rng.random() < 0.5
            value["points"] = [{"quote": "revenue", "point": " ".join(rng.choice(WORDS) for _ in range(8))}
                               for _ in range(rng.randint(0, 3))]
    return json.dumps(value)


def embedder(texts: list[str]) -> Any:
    """A fake embedder (benchmarks only): a hashed bag of words, unit length."""
    rows = np.zeros((len(texts), 64))
    for i, text in enumerate(texts):
        for word in text.lower().split():
            rows[i, int(hashlib.md5(word.encode()).hexdigest(), 16) % 64] += 1.0
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return rows / np.where(norms == 0, 1, norms)


def text_of(rng: random.Random, chars: int, tag: str) -> str:
    words = [tag]
    while sum(len(w) + 1 for w in words) < chars:
        words.append(rng.choice(WORDS))
    return " ".join(words)


def shape(mode: str, rng: random.Random, tag: str) -> tuple[str, dict[str, Any]]:
    """(graph, input) of one run of `mode`, its size drawn from `rng`."""
    if mode == "direct":
        return "solve", {"task": text_of(rng, rng.randint(200, 2000), tag) + " What is it?", "mode": "direct"}
    if mode == "vote":
        return "solve", {"task": f"{tag} What is 6 times 7?", "mode": "vote", "votes": rng.randint(3, 16)}
    if mode == "section":
        return "solve", {"task": text_of(rng, rng.randint(2, 20) * 1000, tag), "question": "What about revenue?",
                         "mode": "section"}
    if mode == "speculate":
        return "solve", {"task": f"{tag} Write a short slogan for a bakery.", "mode": "speculate",
                         "candidates": rng.randint(2, 8)}
    kinds = ("solve", "vote", "section")
    tasks = [{"id": i, "goal": f"{tag} step {i}: what is {i} times 7?", "kind": rng.choice(kinds),
              "deps": [rng.randint(1, i - 1)] if i > 1 and rng.random() < 0.4 else []}
             for i in range(1, rng.randint(2, 8) + 1)]
    document = text_of(rng, rng.randint(2, 6) * 1000, tag)
    return "plan", {"task": document, "question": f"{tag} answer the steps", "mode": "plan", "votes": rng.randint(3, 8),
                    "max_replans": 0, "plan": {"tasks": tasks, "synthesis": "concat"}}


def records_of(out: dict[str, Any]) -> list[dict[str, Any]]:
    return [*out.get("branches", []), *(b for t in out.get("tasks", []) for b in t.get("branches", []))]


def interval(record: dict[str, Any]) -> tuple[float, float] | None:
    """(start, end) of a record's model call(s): when the budget let it start (`budget_seen.at`; else its first
    IN_PROGRESS, which a loaded event loop may stamp long after the check), and its last transition."""
    steps = record.get("transitions") or []
    starts = [s["at"] for s in steps if s["state"] == "IN_PROGRESS"]
    if not starts:
        return None
    seen = record.get("budget_seen") or {}
    return (float(seen.get("at", min(starts))), steps[-1]["at"])


def amount(record: dict[str, Any], unit: str) -> float:
    if unit == "tokens":
        return float((record.get("tokens") or {}).get("total", 0))
    return float(record.get("cost_usd") or 0.0)


def check(out: dict[str, Any], unit: str, limit: float, slack_s: float) -> dict[str, Any]:
    """The run's spend against its budget (see the module docstring)."""
    calls = [(r, span) for r in records_of(out) if (span := interval(r)) is not None and amount(r, unit) > 0]
    spend = sum(amount(r, unit) for r, _ in calls)
    crossing, running = None, 0.0
    for record, (_, end) in sorted(calls, key=lambda c: c[1][1]):
        running += amount(record, unit)
        if running >= limit:
            crossing = end
            break
    in_flight = after = 0.0
    started_after = 0
    late: list[str] = []
    if crossing is not None:
        for record, (start, end) in calls:
            if start > crossing + slack_s:
                started_after += 1
                late.append(f"{record['kind']} {record['id']} +{start - crossing:.3f}s")
                after += amount(record, unit)
            elif end >= crossing:  # the call that reached the budget was in flight too
                in_flight += amount(record, unit)
    over = spend - limit
    reason = str(out.get("reason") or "")
    refused = (any(r.get("cause") == "budget" for r in records_of(out))
               or any(t.get("cause") == "budget" for t in out.get("tasks", []))
               or reason.startswith("budget reached"))
    return {"spend": spend, "over": max(0.0, over), "in_flight": in_flight, "started_after": started_after, "late": late,
            "violation": (over > in_flight + 1e-9 and over > 0) or started_after > 0,
            "stopped": refused, "unsaid": refused and (not reason.startswith("budget reached") or out.get("status") == "ok"),
            "status": out.get("status"), "reason": reason[:160]}


async def run_mode(mode: str, args: argparse.Namespace, url: str) -> dict[str, Any]:
    from parallax.graphs.plan import graph as plan_graph
    from parallax.graphs.solve import graph as solve_graph
    from parallax.state.context import Context

    graphs = {"solve": solve_graph, "plan": plan_graph}
    context = Context(max_concurrency=args.concurrency, straggler_factor=0.0, slice_chars=1000, embedder=embedder)
    gate = asyncio.Semaphore(args.parallel)
    rng = random.Random(f"{args.seed}/{mode}")

    async def one(number: int, budget: dict[str, Any] | None) -> dict[str, Any]:
        graph, payload = shape(mode, random.Random(f"{args.seed}/{mode}/{number}"), f"[run {mode}-{number}]")
        async with gate:
            return dict(await graphs[graph].ainvoke({**payload, **(budget or {})}, context=context))

    calibration = await asyncio.gather(*(one(-1 - i, None) for i in range(args.calibrate)))
    reference = {unit: statistics.median(sum(amount(r, unit) for r in records_of(out)) for out in calibration)
                 for unit in ("tokens", "cost")}
    budgets = []
    for _ in range(args.runs):
        unit = rng.choice(("tokens", "cost"))
        limit = max(1e-9, reference[unit] * rng.uniform(0.05, 1.3))
        budgets.append((unit, round(limit) if unit == "tokens" else limit))
    began = time.perf_counter()
    outs = await asyncio.gather(*(one(i, {"max_tokens": max(1, int(limit))} if unit == "tokens" else {"max_cost": limit})
                                  for i, (unit, limit) in enumerate(budgets)))
    wall = time.perf_counter() - began
    checks = [check(out, unit, max(1, int(limit)) if unit == "tokens" else limit, args.slack_ms / 1000)
              for out, (unit, limit) in zip(outs, budgets, strict=True)]
    stopped = [c for c in checks if c["stopped"]]
    overs = [c["over"] / limit for c, (_, limit) in zip(checks, budgets, strict=True)]
    report = {
        "mode": mode, "runs": len(checks), "reference_spend": {"tokens": reference["tokens"],
                                                               "cost_usd": round(reference["cost"], 8)},
        "stopped_by_budget": len(stopped), "stopped_saying_so": sum(not c["unsaid"] for c in stopped),
        "unsaid": sum(c["unsaid"] for c in checks),
        "over_budget_runs": sum(c["over"] > 0 for c in checks),
        "over_beyond_in_flight": sum(c["violation"] for c in checks),
        "calls_started_after_budget_reached": sum(c["started_after"] for c in checks),
        "max_over_share_of_budget": round(max(overs), 3) if overs else 0.0,
        "statuses": {s: sum(c["status"] == s for c in checks) for s in ("ok", "needs_review", "failed")},
        "wall_s": round(wall, 1),
        "examples": [c["reason"] for c in stopped[:2]],
        "violations": [c for c in checks if c["violation"] or c["unsaid"]][:3],
    }
    log(json.dumps({k: v for k, v in report.items() if k not in ("violations", "examples")}))
    return report


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from parallax.runtime.chat_models import forget_clients

    # the environment this sets is undone after (patch.dict), so a caller in the same process (a test) keeps its own
    with mock.patch.dict(os.environ), FaultServer(FaultConfig(reply=reply, latency_ms=args.latency_ms)) as url:
        os.environ["OPENAI_BASE_URL"] = url
        os.environ["PARALLAX_MODEL"] = "gpt-4o-mini"
        os.environ["PARALLAX_RESPONSE_FORMAT"] = "json_schema"
        os.environ["PARALLAX_ENDPOINT_MAX_CONNECTIONS"] = str(args.parallel * args.concurrency * args.concurrency + 16)
        reload_settings()
        forget_clients()
        modes = [await run_mode(mode, args, url) for mode in args.modes]
    reload_settings()
    forget_clients()
    total = {"runs": sum(m["runs"] for m in modes), "stopped_by_budget": sum(m["stopped_by_budget"] for m in modes),
             "over_beyond_in_flight": sum(m["over_beyond_in_flight"] for m in modes),
             "calls_started_after_budget_reached": sum(m["calls_started_after_budget_reached"] for m in modes),
             "unsaid": sum(m["unsaid"] for m in modes)}
    return {"benchmark": "budgets", "runs_per_mode": args.runs, "latency_ms": args.latency_ms,
            "concurrency": args.concurrency, "parallel": args.parallel, "slack_ms": args.slack_ms, "seed": args.seed,
            "modes": {m["mode"]: m for m in modes}, "total": total,
            "goals_met": {"0_over_beyond_in_flight": total["over_beyond_in_flight"] == 0
                          and total["calls_started_after_budget_reached"] == 0,
                          "every_stopped_run_says_so": total["unsaid"] == 0},
            "note": "machine shared with other sessions: wall times are not comparable"}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    parser = argparse.ArgumentParser(prog="python -m bench.budgets", description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=300, help="runs per mode, each with a random budget")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=MODES)
    parser.add_argument("--calibrate", type=int, default=5, help="unlimited runs per mode the budgets are drawn against")
    parser.add_argument("--latency-ms", type=float, default=20.0)
    parser.add_argument("--parallel", type=int, default=8, help="runs at once")
    parser.add_argument("--concurrency", type=int, default=4, help="max_concurrency of each run")
    parser.add_argument("--slack-ms", type=float, default=2.0, help="a call let start this soon after the crossing "
                        "counts as in flight (transition times are rounded to the millisecond)")
    parser.add_argument("--seed", type=int, default=7)
    result: dict[str, Any] = asyncio.run(main_async(parser.parse_args(argv)))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
