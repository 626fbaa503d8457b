"""One learning epoch, batch 1 versus batch B, with a model that only sleeps.

    python -m bench.learn_speed --tasks 300 --latency-ms 50 --json

Runs the real learn graph (solve, score, reflect, curate, deterministic merge with the
real local embedder, gate, versioned commit to SQLite, SQLite checkpoints) twice in one
process on Formula training tasks: with `--batch 1` (sequential learning) and with
`--batch B` (default 100). The sleeping model answers every call after `latency-ms`:
the solver with a number, the reflector with a lesson about the task's formula, the
curator with that lesson as an entry, so the playbook really grows. Prints JSON.

`cpu_s` is the process's CPU time in a mode: batch B is bound by it on a small machine (every
task still runs its own solve subgraph, reflection, curation and merge), which is what
caps the speed-up; batch 1 is bound by the model's latency.

Both modes start alike: the embedding model is loaded before either is timed, and its
vector cache is emptied before each, so the second mode never reuses vectors of task
texts and lessons that the first one computed.

`skeleton` is a floor measured in the same run: every task as a bare LangGraph run shaped
like a direct-mode solve run (route, safety beside work, deferred merge, record_trace,
release_check; nodes that do nothing but the work node's sleep), then two more sleeps
for the reflection and the curation, in batches of B under the same cap. It is a strict
subset of batch B's work (no prompts, parsing, embeddings, merge, gate, store or
checkpoints), so `speedup_ceiling` (batch 1's seconds over the skeleton's) bounds the
speed-up any implementation of this design reaches on the machine at hand.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import operator
import os
import re
import resource
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Annotated, Literal

from langgraph.checkpoint.sqlite.aio import AsyncSqliteSaver
from langgraph.graph import END, START, StateGraph
from langgraph.types import Send
from typing_extensions import TypedDict

from bench.samples import SAMPLES, read_lines
from parallax.graphs.learn import builder
from parallax.logic.task_files import parse_task
from parallax.runtime import embeddings
from parallax.runtime.settings import reload_settings
from parallax.runtime.startup import freeze_startup_objects
from parallax.runtime.storage.stores import open_sqlite_store, playbooks_in
from parallax.state.context import Context
from testkit.sleeping_model import sleeping

DATA = SAMPLES / "formula" / "train.jsonl.gz"
FORMULA = re.compile(r"Use formula (.+?) to answer")


def reply_for(prompt: str) -> str:
    formula = (FORMULA.search(prompt) or re.search(r"(.)", "general")).group(1)
    lesson = f"For {formula}, apply the formula exactly as stated and round to 2 decimals."
    if "You review one solved task" in prompt:
        return json.dumps({"diagnosis": "rounding slip", "lessons": [lesson], "item_tags": []})
    if "You turn lessons into playbook entries" in prompt:
        formula = re.search(r"For (.+?), apply", prompt)
        name = formula.group(1) if formula else "general"
        text = f"For {name}, apply the formula exactly as stated and round to 2 decimals."
        return json.dumps({"entries": [{"section": name, "text": text, "about": [name.lower()]}]})
    return '{"reasoning": "r", "answer": "1.00"}'


async def learn_once(
    tasks: list[dict], batch: int, latency_s: float, concurrency: int, home: Path
) -> dict:
    embeddings.forget()
    home.mkdir(parents=True, exist_ok=True)
    async with (
        AsyncSqliteSaver.from_conn_string(str(home / "checkpoints.sqlite")) as saver,
        open_sqlite_store(home / "store.sqlite") as store,
    ):
        graph = builder.compile(checkpointer=saver, store=store)
        config = {"configurable": {"thread_id": uuid.uuid4().hex}, "recursion_limit": 100_000}
        ctx = Context(
            max_concurrency=concurrency,
            chat_model=sleeping(latency_s=latency_s, reply_for=reply_for),
        )
        started, cpu = time.perf_counter(), time.process_time()
        out = await graph.ainvoke(
            {"tasks": tasks, "batch": batch, "mode": "direct", "playbook": "bench"},
            config,
            context=ctx,
        )
        seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
        head = await playbooks_in(store).head("bench")
    return {
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_task": round(cpu / len(tasks) * 1000, 2),
        "batches": len(out["batches"]),
        "to_version": out["to_version"],
        "items_total": len(head.active),
        "accepted_batches": sum(b["accepted"] for b in out["batches"]),
    }


class SkeletonState(TypedDict, total=False):
    task: str
    branches: Annotated[list, operator.add]
    answer: str


def skeleton_solve(latency_s: float):
    """A direct-mode solve run's LangGraph shape with nodes that only pass (the work node
    sleeps)."""

    async def passing(state: SkeletonState) -> dict:
        return {}

    async def fan_out(state: SkeletonState) -> list[Send]:
        return [Send("safety", state), Send("work", state)]

    async def branch(state: SkeletonState) -> dict:
        await asyncio.sleep(latency_s)
        return {"branches": [{"answer": "1.00"}]}

    async def after_merge(state: SkeletonState) -> Literal["judge", "red_team", "record_trace"]:
        return "record_trace"

    builder = StateGraph(SkeletonState)
    for name in ("route", "safety", "judge", "red_team", "record_trace", "release_check"):
        builder.add_node(name, passing)
    builder.add_node("work", branch)
    builder.add_node("merge", passing, defer=True)
    builder.add_edge(START, "route")
    builder.add_conditional_edges("route", fan_out, ["safety", "work"])
    builder.add_edge("safety", "merge")
    builder.add_edge("work", "merge")
    builder.add_conditional_edges("merge", after_merge)
    builder.add_edge("judge", "record_trace")
    builder.add_edge("red_team", "record_trace")
    builder.add_edge("record_trace", "release_check")
    builder.add_edge("release_check", END)
    return builder.compile()


async def skeleton_epoch(tasks: int, batch: int, latency_s: float, concurrency: int) -> dict:
    """The floor: each task one skeleton solve run and two sleeps (reflect, curate), B at a time."""
    solve = skeleton_solve(latency_s)
    limit = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        async with limit:
            await solve.ainvoke({"task": str(i)})
            await asyncio.sleep(latency_s)  # the reflection
            await asyncio.sleep(latency_s)  # the curation

    started, cpu = time.perf_counter(), time.process_time()
    for first in range(0, tasks, batch):
        await asyncio.gather(*(one(i) for i in range(first, min(first + batch, tasks))))
    seconds, cpu = time.perf_counter() - started, time.process_time() - cpu
    return {
        "seconds": round(seconds, 3),
        "cpu_s": round(cpu, 3),
        "cpu_ms_per_task": round(cpu / tasks * 1000, 2),
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.learn_speed", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--tasks", type=int, default=300, help="training tasks from Formula train (default 300)"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=50.0, help="sleep of every model call (default 50)"
    )
    parser.add_argument(
        "--batch",
        type=int,
        default=100,
        help="the parallel batch size compared with 1 (default 100)",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help=(
            "training JSONL, may be gzipped (default: the first 300 Formula train tasks, in the"
            " repository)"
        ),
    )
    parser.add_argument(
        "--json", action="store_true", help="print JSON (always on; kept for the contract)"
    )
    args = parser.parse_args(argv)
    tasks = [
        {**parse_task(json.loads(line)), "id": f"train:{n}"}
        for n, line in enumerate(read_lines(args.data), 1)
    ]
    tasks = tasks[: args.tasks]
    embeddings.embed(["load the model before timing"])
    freeze_startup_objects()
    with tempfile.TemporaryDirectory(prefix="parallax-learn-speed-") as tmp:
        os.environ["PARALLAX_HOME"] = tmp
        reload_settings()
        latency = args.latency_ms / 1000
        print(f"batch 1 over {len(tasks)} tasks...", file=sys.stderr)
        sequential = asyncio.run(learn_once(tasks, 1, latency, args.batch, Path(tmp) / "batch-1"))
        print(f"batch {args.batch}...", file=sys.stderr)
        parallel = asyncio.run(
            learn_once(tasks, args.batch, latency, args.batch, Path(tmp) / f"batch-{args.batch}")
        )
        print("skeleton (the floor)...", file=sys.stderr)
        skeleton = asyncio.run(skeleton_epoch(len(tasks), args.batch, latency, args.batch))
    ceiling = sequential["seconds"] / skeleton["seconds"]
    result = {
        "benchmark": "learn_speed",
        "tasks": len(tasks),
        "latency_ms": args.latency_ms,
        "batch": args.batch,
        "batch_1": sequential,
        f"batch_{args.batch}": parallel,
        "skeleton": skeleton,
        "speedup": round(sequential["seconds"] / parallel["seconds"], 2),
        "speedup_ceiling": round(ceiling, 2),
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "loadavg_1m": round(os.getloadavg()[0], 2),
        "goal_met": sequential["seconds"] / parallel["seconds"] >= 50,
        "goal_reachable_here": ceiling >= 50,
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
