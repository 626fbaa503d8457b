"""Chaos benchmark: many real solve runs against a model server that misbehaves.

Why: retries, backoff, the circuit breaker, straggler backups and the merge's degrade
paths only count if, under faults, every run still ends with a status, no finished
branch's result goes missing and no vote is counted twice. This runs the real solve
graph (with a store, so traces and dead letters are written too) against
`testkit.fault_server` over HTTP, which at `--fault-rate` answers 429 + Retry-After, 500,
hangs, malformed JSON, truncated output or a slow tail, and measures, twice in the same
process (straggler backups on, then off):

  runs                    runs started
  terminated_with_status  runs that ended ok, needs_review or failed (must equal runs)
  statuses                how many ended each way
  lost_branch_results     completed branches missing from the merged result (must be 0)
  double_counted_votes    votes counted beyond the completed vote branches (must be 0)
  p50_s, p95_s            run wall time
  backups                 backup copies started

The checks recount from the branch records, independently of the merge code. The
top-level figures are those with stragglers on; `stragglers_on` / `stragglers_off` hold
both. Prints one JSON object on stdout; progress goes to stderr.

    python -m bench.chaos --runs 200 --fault-rate 0.2 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import statistics
import sys
import time
from collections import Counter

from langgraph.store.memory import InMemoryStore

from parallax.runtime.services import renew_process_services
from parallax.runtime.settings import reload_settings
from testkit.fault_server import ALL_KINDS, FaultConfig, FaultServer, default_reply

QUESTION = "How many meetings were held?"
VOTE_TASK = "What is 6 * 7?"
SECTION_TASK = "\n\n".join(
    f"# Part {i}\nThe committee met on day {i} and agreed item {i}." for i in range(3)
)
SLICE_CHARS = 70  # the section task is three parts of about 60 characters: one slice each
STATUSES = ("ok", "needs_review", "failed")
ENDPOINT_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "PARALLAX_RESPONSE_FORMAT")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def reply(body: dict) -> str:
    """The server's schema-shaped reply, except that a slice reports the part it read, so
    section runs have findings to merge (and to lose, if the merge dropped one)."""
    text = json.dumps(body.get("messages", []))
    part = next((f"met on day {i}" for i in range(3) if f"day {i}" in text), None)
    if part and "points" in json.dumps(body.get("response_format", {})):
        return json.dumps({"relevant": True, "points": [{"quote": part, "point": part}]})
    return default_reply(body)


def payload_for(index: int) -> dict:
    """Mostly 5-vote runs, with every fifth a 3-slice section run and every seventh a direct one."""
    if index % 5 == 4:
        return {"task": SECTION_TASK, "question": QUESTION, "mode": "section"}
    if index % 7 == 6:
        return {"task": "Explain why the sky is blue.", "mode": "direct"}
    return {"task": VOTE_TASK, "mode": "vote", "votes": 5}


def check(out: dict) -> tuple[int, int]:
    """(lost branch results, double-counted votes) of one run, recounted from its branch records."""
    from parallax.logic.vote import final_value, normalize_answer

    business = [b for b in out.get("branches", []) if b["kind"] in ("direct", "slice", "vote")]
    completed = [b for b in business if b["status"] == "ok"]
    duplicates = len(business) - len({b["id"] for b in business})
    if out["mode"] == "vote":
        recount = Counter(
            final_value(b["output"]["answer"]) for b in completed
        )  # votes count final values
        counted = Counter(out.get("vote_counts", {}))
        lost = sum((recount - counted).values())
        return lost, sum((counted - recount).values()) + duplicates
    if out["mode"] == "section":
        answer = {
            normalize_answer(line.lstrip("- ")) for line in out.get("answer", "").splitlines()
        }
        points = {
            normalize_answer(p["point"])
            for b in completed
            if b["output"].get("relevant")
            for p in b["output"]["points"]
        }
        return len(points - answer), duplicates
    lost = int(
        bool(completed)
        and out.get("answer", "").strip() != completed[0]["output"]["answer"].strip()
    )
    return lost, duplicates


async def one_run(graph, index: int, ctx, limit: asyncio.Semaphore) -> dict:
    async with limit:
        started = time.perf_counter()
        try:
            out = await graph.ainvoke(payload_for(index), context=ctx)
        except Exception as exc:  # a run that raised did not terminate with a status
            return {
                "status": f"raised {type(exc).__name__}: {exc}"[:200],
                "seconds": time.perf_counter() - started,
            }
        lost, doubled = check(out)
        backups = sum(1 for b in out.get("branches", []) if b.get("backup"))
        return {
            "status": out.get("status"),
            "seconds": time.perf_counter() - started,
            "lost": lost,
            "doubled": doubled,
            "backups": backups,
        }


async def campaign(args: argparse.Namespace, stragglers: bool) -> dict:
    from parallax.graphs.solve import builder
    from parallax.state.context import Context

    renew_process_services()
    graph = builder.compile(store=InMemoryStore())
    ctx = Context(
        early_stop=False,  # all 5 votes of a run, recounted from their records
        request_timeout_s=args.timeout_s,
        max_attempts=args.max_attempts,
        max_concurrency=args.concurrency,
        straggler_factor=3.0 if stragglers else 0.0,
        straggler_min_s=args.straggler_min_s,
        slice_chars=SLICE_CHARS,
    )
    limit = asyncio.Semaphore(args.parallel)
    done = 0

    async def tracked(i: int) -> dict:
        nonlocal done
        result = await one_run(graph, i, ctx, limit)
        done += 1
        if done % 25 == 0 or done == args.runs:
            log(f"  stragglers {'on' if stragglers else 'off'}: {done}/{args.runs} runs")
        return result

    started = time.perf_counter()
    results = await asyncio.gather(*(tracked(i) for i in range(args.runs)))
    seconds = sorted(r["seconds"] for r in results)
    statuses = Counter(r["status"] for r in results)
    return {
        "runs": len(results),
        "terminated_with_status": sum(statuses[s] for s in STATUSES),
        "statuses": dict(statuses),
        "lost_branch_results": sum(r.get("lost", 0) for r in results),
        "double_counted_votes": sum(r.get("doubled", 0) for r in results),
        "p50_s": round(statistics.median(seconds), 3),
        "p95_s": round(seconds[min(len(seconds) - 1, int(0.95 * len(seconds)))], 3),
        "max_s": round(seconds[-1], 3),
        "backups": sum(r.get("backups", 0) for r in results),
        "wall_s": round(time.perf_counter() - started, 1),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--runs", type=int, default=200, help="solve runs per campaign (default 200)"
    )
    parser.add_argument(
        "--fault-rate",
        type=float,
        default=0.2,
        help=(
            "share of model requests that misbehave, spread evenly over 429, 500, hang, "
            "malformed, truncated and slow (default 0.2)"
        ),
    )
    parser.add_argument(
        "--latency-ms", type=float, default=20.0, help="latency of every model reply (default 20)"
    )
    parser.add_argument(
        "--slow-tail-ms",
        type=float,
        default=3000.0,
        help="extra delay of a slow reply (default 3000)",
    )
    parser.add_argument(
        "--timeout-s", type=float, default=2.0, help="per-attempt request timeout (default 2)"
    )
    parser.add_argument(
        "--max-attempts", type=int, default=3, help="attempts per model call (default 3)"
    )
    parser.add_argument(
        "--straggler-min-s", type=float, default=0.3, help="no backup before this (default 0.3)"
    )
    parser.add_argument(
        "--parallel", type=int, default=8, help="runs in flight at once (default 8)"
    )
    parser.add_argument(
        "--concurrency", type=int, default=8, help="model calls in flight per run (default 8)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument(
        "--json", action="store_true", help="print only the JSON object (the default output anyway)"
    )
    args = parser.parse_args(argv)
    if args.runs < 1 or not 0.0 <= args.fault_rate <= 1.0:
        parser.error("--runs must be at least 1 and --fault-rate between 0 and 1")

    share = args.fault_rate / len(ALL_KINDS)
    config = FaultConfig(
        **{f"rate_{kind}": share for kind in ALL_KINDS},
        latency_ms=args.latency_ms,
        slow_tail_ms=args.slow_tail_ms,
        hang_s=60.0,
        retry_after_s=0.2,
        seed=args.seed,
        reply=reply,
    )
    server = FaultServer(config)
    saved = {k: os.environ.get(k) for k in ENDPOINT_VARIABLES}
    try:
        with server as url:
            os.environ.update(
                OPENAI_BASE_URL=url, OPENAI_API_KEY="chaos", PARALLAX_RESPONSE_FORMAT="json_schema"
            )
            reload_settings()
            figures = {}
            for stragglers in (True, False):
                log(
                    f"campaign: {args.runs} runs, fault rate {args.fault_rate}, stragglers"
                    f" {'on' if stragglers else 'off'}"
                )
                figures[stragglers] = asyncio.run(campaign(args, stragglers))
            faults = Counter(entry["fault"] for entry in server.log())
    finally:
        for key, value in saved.items():
            os.environ.pop(key, None) if value is None else os.environ.__setitem__(key, value)
        reload_settings()
    on, off = figures[True], figures[False]
    report = {
        **{
            k: on[k]
            for k in (
                "runs",
                "terminated_with_status",
                "lost_branch_results",
                "double_counted_votes",
                "p50_s",
                "p95_s",
            )
        },
        "fault_rate": args.fault_rate,
        "faults_injected": dict(faults),
        "stragglers_on": on,
        "stragglers_off": off,
        "p95_ratio_on_vs_off": round(on["p95_s"] / off["p95_s"], 3) if off["p95_s"] else None,
        "goals_met": {
            "all_terminated": all(f["terminated_with_status"] == f["runs"] for f in (on, off)),
            "no_lost_results": on["lost_branch_results"] == off["lost_branch_results"] == 0,
            "no_double_votes": on["double_counted_votes"] == off["double_counted_votes"] == 0,
        },
    }
    print(json.dumps(report))
    return 0 if all(report["goals_met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
