"""Serving benchmark: solve runs through the deployed graph API (Aegra), one replica and two.

Why: the graph API adds HTTP, PostgreSQL checkpoints, a Redis queue and a worker hand-off to
every run; this measures what that costs and shows that under load no accepted run is lost
or executed twice. Each phase starts its own throwaway database and replicas exactly as the
docs/deploy.md does (`parallax serve`, one after the other; testkit/aegra_cluster.py),
then `--clients` concurrent langgraph-sdk clients submit `--runs` vote runs between them
(a new thread and `runs.stream` each, retried on 429 as docs/deploy.md shows; `runs.wait` would add
up to 2 s per run, because Aegra's Redis executor polls for a finished run every 2 s), and
measures:

  runs_per_s              finished runs per second of wall time
  p50_s, p95_s            end-to-end latency per run (submit to result, nearest rank)
  lost_runs               runs submitted that did not end `success` with an `ok` answer
  duplicated_runs         runs whose graph executed more than once (traces stored beyond one
                          per run's own task text, read from the store table; every run of every
                          phase, waits included, asks a task text of its own)
  extra_model_calls       completions beyond votes x runs (a re-executed branch would show here).
                          Counted in completions, not requests: a wave of votes is one request
                          with `n` (`model_requests` says how many requests carried them)
  peak_rss_mb             peak resident memory per replica (sampled every 0.25 s)
  replica_cpu_s_per_run   CPU seconds the replicas spent per run (all of them together)

and the same runs through the same graph in this process (`in_process`: InMemory checkpointer
and store, same endpoint, same concurrency), so `server_overhead_s` = server p50 - in-process p50;
`in_process.cpu_s_per_run` is this process's CPU per run (the fault server's share included), to
set against `replica_cpu_s_per_run`. On a 2-core machine that also runs the clients and the model,
CPU is what limits runs/s, so a second replica adds little here; on separate hosts it would.

The model is testkit/fault_server.py with no faults and `--latency-ms` per call, an
OpenAI-compatible HTTP endpoint both the replicas and the in-process runs call: the sleeping model
of bench/fanout.py can only be handed to a graph in code (Context.chat_model), which an API caller
cannot do. Top-level `lost_runs` and `duplicated_runs` sum both phases and both faces (goal: 0 and
0).

Each phase then sends the same number of vote runs, with the same clients and replicas, through the
OpenAI-compatible face (`openai`: the official SDK's `chat.completions.create` on `/v1`, retried on
429 after Retry-After like the langgraph-sdk clients), which makes each of them a graph API run
through the server's own endpoints (server/openai_face.py): `runs_per_s`, `p50_s`, `p95_s`,
`lost_runs`, `duplicated_runs`, `extra_model_calls`, `replica_cpu_s_per_run`, and what the face
adds, `p50_over_sdk_s` (its p50 minus the langgraph-sdk p50) and `runs_per_s_over_sdk` (the ratio of
runs/s).

    python -m bench.serve --runs 200 --clients 20 --latency-ms 50 --json

Each phase also measures the waits (`waits`, issue 31): `--waits` runs one after the other through
the first replica, each run four ways, in turn: `runs.stream` to its end (the baseline),
`runs.wait`, `runs.create` + `runs.join`, and the stateless `runs.wait`, each from the call to its
return; and each run's own duration (its row's updated_at - created_at, from creation to the moment
it was finished). Aegra polled for a run's end every 2 s, so a wait took at least 2 s (median 2,031
ms for a 118 ms run); server/run_done.py wakes it when the run ends. Reported: p50 of each,
`wait_over_stream` (wait p50 / stream p50, goal <= 1.2), `wait_minus_run_p50_s` (p50 of wait - the
run's own duration, goal <= 0.15; `stream_minus_run_p50_s` is the same for the stream: what the HTTP
request, the insert and the delivery of the end cost either way), `wait_minus_stream_p50_s`, where
the rest goes (`*_call_to_row_p50_s`: from the call until the run's row exists;
`*_finished_to_return_p50_s`: from the row's last update until the call returned) and
`executed_elsewhere` (runs, of the 4 x `--waits`, a worker of the other replica executed, read from
the first replica's `parallax_runs_total`: with two replicas, about half).

    python -m bench.serve --runs 0 --waits 20 --json    # the waits only

Needs the server venv (Python 3.12, `pip install -e '.[server,test]'`), PostgreSQL and Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import tempfile
import threading
import time
from pathlib import Path

from parallax.runtime.settings import reload_settings
from testkit.aegra_cluster import Cluster, missing_services, readme_retry_helper
from testkit.fault_server import FaultConfig, FaultServer

TENANT, KEY = "bench", "key-bench"
ENV = {
    "PARALLAX_RESPONSE_FORMAT": "json_schema",
    "PARALLAX_MODEL": "fault-model",
    "PARALLAX_STRAGGLER_FACTOR": "0",
    "PARALLAX_MAX_TOKENS": "64",
}


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def nearest_rank(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return (
        round(ordered[min(len(ordered) - 1, max(0, int(round(q * len(ordered))) - 1))], 3)
        if ordered
        else 0.0
    )


def figures(latencies: list[float], wall_s: float) -> dict:
    return {
        "runs_per_s": round(len(latencies) / wall_s, 2),
        "p50_s": nearest_rank(latencies, 0.5),
        "p95_s": nearest_rank(latencies, 0.95),
        "wall_s": round(wall_s, 2),
    }


def task(n: int, way: str = "") -> dict:
    """Run n's input: a task text of its own, so its trace is told from every other run's (a waits
    run is named by its way too: the four ways of one n are four runs)."""
    return {
        "task": f"What is 6 * 7? ({way + ' ' if way else ''}request {n})",
        "mode": "vote",
        "votes": VOTES,
    }


def completions(log: list[dict]) -> tuple[int, int]:
    """(completions, requests) the model server answered: a request with `n` carries n
    completions."""
    answered = [e for e in log if e.get("messages_hash") and e["status"] == 200]
    return sum(int(e.get("choices") or 1) for e in answered), len(answered)


VOTES = 3


async def load(runs: int, clients: int, submit) -> tuple[list[float], list, float]:
    """`clients` workers share `runs` submissions; (latencies of successes, outcomes, wall
    seconds)."""
    queue: asyncio.Queue[int] = asyncio.Queue()
    for n in range(runs):
        queue.put_nowait(n)
    latencies: list[float] = []
    outcomes: list = []

    async def worker() -> None:
        while not queue.empty():
            n = queue.get_nowait()
            started = time.perf_counter()
            try:
                out = await submit(n)
            except Exception as exc:  # noqa: BLE001 - a lost run, counted below
                outcomes.append((n, f"{type(exc).__name__}: {exc}"[:200]))
                continue
            latencies.append(time.perf_counter() - started)
            outcomes.append((n, out))

    started = time.perf_counter()
    await asyncio.gather(*(worker() for _ in range(clients)))
    return latencies, outcomes, time.perf_counter() - started


def ok(out) -> bool:
    return (
        isinstance(out, dict)
        and out.get("status") == "ok"
        and out.get("vote_counts") == {"42": VOTES}
    )


async def in_process(runs: int, clients: int, url: str) -> dict:
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.solve import builder

    os.environ.update({"OPENAI_BASE_URL": url, **ENV})
    reload_settings()
    graph = builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())

    async def submit(n: int) -> dict:
        return await graph.ainvoke(task(n), {"configurable": {"thread_id": f"t-{n}"}})

    await submit(-1)  # warm-up: clients, prompts, imports
    cpu = time.process_time()
    latencies, outcomes, wall = await load(runs, clients, submit)
    return {
        **figures(latencies, wall),
        "lost_runs": sum(not ok(o) for _, o in outcomes),
        "cpu_s_per_run": round((time.process_time() - cpu) / runs, 4),
    }


def sample_rss(cluster: Cluster, peaks: dict, stop: threading.Event) -> None:
    while not stop.is_set():
        for port, rss in cluster.peak_rss().items():
            peaks[port] = max(peaks.get(port, 0), rss)
        stop.wait(0.25)


def replica_cpu(cluster: Cluster) -> float:
    """CPU seconds (user + system) the live replicas have used so far."""
    import psutil

    total = 0.0
    for replica in cluster.replicas:
        try:
            times = psutil.Process(replica.pid).cpu_times()
            total += times.user + times.system
        except psutil.Error:
            pass
    return total


async def waits(cluster: Cluster, count: int) -> dict:
    """`count` runs each way (stream, wait, join, stateless wait) through the first replica, one at
    a time."""
    import httpx
    import psycopg
    from langgraph_sdk import get_client

    client = get_client(url=cluster.replicas[0].url, api_key=KEY, timeout=600)
    took: dict[str, list[float]] = {"stream": [], "wait": [], "join": [], "stateless_wait": []}
    own: dict[str, list[float]] = {"stream": [], "wait": [], "join": []}
    before_row: dict[str, list[float]] = {"stream": [], "wait": [], "join": []}
    after_row: dict[str, list[float]] = {"stream": [], "wait": [], "join": []}
    over: list[float] = []
    elsewhere = 0

    def own_seconds(run_id: str) -> tuple[float, float, float]:
        """(the run's own duration, its row's created_at and updated_at as epoch seconds: same host,
        same clock)."""
        with psycopg.connect(cluster.database_url) as conn:
            created, updated = conn.execute(
                "SELECT extract(epoch FROM created_at), extract(epoch FROM updated_at) "
                "FROM runs WHERE run_id = %s",
                (run_id,),
            ).fetchone()
        return float(updated) - float(created), float(created), float(updated)

    async def solve_runs_here() -> float:
        """Solve runs the first replica has finished (its /metrics): which replica executed a run,
        since Aegra clears the run's claim when it ends."""
        async with httpx.AsyncClient(trust_env=False) as h:
            text = (await h.get(f"{cluster.replicas[0].url}/metrics")).text
        return sum(
            float(line.rpartition(" ")[2])
            for line in text.splitlines()
            if line.startswith('parallax_runs_total{graph="solve"')
        )

    async def one(way: str, n: int) -> None:
        nonlocal elsewhere
        ask = task(n, f"wait {way}")
        here = await solve_runs_here()
        thread = (await client.threads.create())["thread_id"] if way != "stateless_wait" else None
        started, wall = time.perf_counter(), time.time()
        if way == "stream":
            async for part in client.runs.stream(thread, "solve", input=ask, stream_mode="values"):
                if part.event == "error":
                    raise RuntimeError(f"run failed: {part.data}")
        elif way == "wait" or way == "stateless_wait":
            out = await client.runs.wait(thread, "solve", input=ask)
            assert ok(out), out
        else:
            run = await client.runs.create(thread, "solve", input=ask)
            await client.runs.join(thread, run["run_id"])
        took[way].append(time.perf_counter() - started)
        ended = wall + took[way][-1]
        elsewhere += await solve_runs_here() == here
        if thread is not None:
            seconds, created, updated = own_seconds(
                (await client.runs.list(thread, limit=1))[0]["run_id"]
            )
            own[way].append(seconds)
            before_row[way].append(created - wall)
            after_row[way].append(ended - updated)
            if way == "wait":
                over.append(took[way][-1] - seconds)

    for n in range(count):
        for way in ("stream", "wait", "join", "stateless_wait"):
            await one(way, 10_000 + n)
    result = {f"{way}_p50_s": nearest_rank(values, 0.5) for way, values in took.items()}
    result["run_p50_s"] = nearest_rank([v for values in own.values() for v in values], 0.5)
    result["wait_over_stream"] = round(result["wait_p50_s"] / result["stream_p50_s"], 2)
    result["join_over_stream"] = round(result["join_p50_s"] / result["stream_p50_s"], 2)
    result["stateless_wait_over_stream"] = round(
        result["stateless_wait_p50_s"] / result["stream_p50_s"], 2
    )
    result["wait_minus_run_p50_s"] = nearest_rank(over, 0.5)
    result["wait_minus_stream_p50_s"] = round(result["wait_p50_s"] - result["stream_p50_s"], 3)
    result["stream_minus_run_p50_s"] = nearest_rank(
        [t - r for t, r in zip(took["stream"], own["stream"], strict=True)], 0.5
    )
    for way in (
        before_row
    ):  # where the time outside the run goes: before its row exists, after it is finished
        result[f"{way}_call_to_row_p50_s"] = nearest_rank(before_row[way], 0.5)
        result[f"{way}_finished_to_return_p50_s"] = nearest_rank(after_row[way], 0.5)
    result["runs_each_way"] = count
    result["executed_elsewhere"] = elsewhere
    return result


async def served(
    replicas: int, runs: int, clients: int, server: FaultServer, work: Path, wait_runs: int = 0
) -> dict:
    from langgraph_sdk import get_client
    from openai import AsyncOpenAI, RateLimitError

    retry_on_429 = readme_retry_helper()
    cluster = Cluster(
        work,
        {
            **ENV,
            "OPENAI_BASE_URL": server.url,
            "PARALLAX_API_KEYS": f"{KEY}:{TENANT}",
            "PARALLAX_MAX_PENDING": str(max(clients * 2, 20)),
        },
    ).create()
    try:
        for _ in range(replicas):
            cluster.start_replica()
        sdk = [get_client(url=r.url, api_key=KEY, timeout=600) for r in cluster.replicas]

        async def submit(n: int) -> dict:
            client = sdk[n % len(sdk)]
            thread = await retry_on_429(lambda: client.threads.create())

            async def stream() -> dict:
                last = {}
                async for part in client.runs.stream(
                    thread["thread_id"], "solve", input=task(n), stream_mode="values"
                ):
                    if part.event == "values":
                        last = part.data
                    elif part.event == "error":
                        raise RuntimeError(f"run failed: {part.data}")
                return last

            return await retry_on_429(stream)

        openai_clients = [
            AsyncOpenAI(base_url=f"{r.url}/v1", api_key=KEY, max_retries=0, timeout=600)
            for r in cluster.replicas
        ]

        async def submit_openai(n: int) -> dict:
            """The same run through the OpenAI face; a reply counts as the run's output when its
            answer is "42"."""
            client = openai_clients[n % len(openai_clients)]
            for attempt in range(30):
                try:
                    reply = await client.chat.completions.create(
                        model="parallax-vote",
                        messages=[
                            {"role": "user", "content": f"What is 6 * 7? (openai request {n})"}
                        ],
                        extra_body={"parallax": {"votes": VOTES}},
                    )
                    break
                except RateLimitError as exc:
                    if attempt == 29:
                        raise
                    await asyncio.sleep(float(exc.response.headers.get("retry-after", "1")))
            return {**reply.parallax, "answer": reply.choices[0].message.content}

        await submit(-1)
        await submit_openai(-1)
        measured_waits = await waits(cluster, wait_runs) if wait_runs else None
        if not runs:
            return {"waits": measured_waits}
        server.reset()
        peaks: dict[int, int] = {}
        stop = threading.Event()
        sampler = threading.Thread(target=sample_rss, args=(cluster, peaks, stop), daemon=True)
        sampler.start()
        cpu = replica_cpu(cluster)
        latencies, outcomes, wall = await load(runs, clients, submit)
        cpu = replica_cpu(cluster) - cpu
        stop.set()
        sampler.join()
        calls, requests = completions(server.log())
        server.reset()
        openai_cpu = replica_cpu(cluster)
        openai_latencies, openai_outcomes, openai_wall = await load(runs, clients, submit_openai)
        openai_cpu = replica_cpu(cluster) - openai_cpu
        openai_calls, openai_requests = completions(server.log())
        import psycopg

        with psycopg.connect(cluster.database_url) as conn:
            rows = conn.execute(
                "SELECT value->>'task_preview', count(*) FROM store WHERE prefix = %s GROUP BY 1",
                (f"traces.{TENANT}",),
            ).fetchall()
        per_run = {
            preview: count
            for preview, count in rows
            if "request -1)" not in preview
            and "(openai " not in preview
            and "(wait " not in preview
        }
        per_openai_run = {
            p: count for p, count in rows if "(openai request" in p and "request -1)" not in p
        }
        openai = {
            **figures(openai_latencies, openai_wall),
            "lost_runs": sum(not (ok(o) and o.get("answer") == "42") for _, o in openai_outcomes),
            "duplicated_runs": sum(count > 1 for count in per_openai_run.values()),
            "runs_with_a_trace": len(per_openai_run),
            "extra_model_calls": openai_calls - VOTES * runs,
            "model_completions": openai_calls,
            "model_requests": openai_requests,
            "replica_cpu_s_per_run": round(openai_cpu / runs, 4),
            "failures": [o for _, o in openai_outcomes if not ok(o)][:3],
        }
        openai["p50_over_sdk_s"] = round(openai["p50_s"] - nearest_rank(latencies, 0.5), 3)
        openai["runs_per_s_over_sdk"] = round(openai["runs_per_s"] / (len(latencies) / wall), 2)
        return {
            **figures(latencies, wall),
            "lost_runs": sum(not ok(o) for _, o in outcomes),
            "duplicated_runs": sum(count > 1 for count in per_run.values()),
            "runs_with_a_trace": len(per_run),
            "extra_model_calls": calls - VOTES * runs,
            "model_completions": calls,
            "model_requests": requests,
            "waits_duplicated_runs": sum(count > 1 for p, count in rows if "(wait " in p),
            "replica_cpu_s_per_run": round(cpu / runs, 4),
            "peak_rss_mb": {
                str(port): round(rss / 2**20, 1) for port, rss in sorted(peaks.items())
            },
            "failures": [o for _, o in outcomes if not ok(o)][:3],
            "openai": openai,
            "waits": measured_waits,
        }
    finally:
        cluster.close()


async def main(args: argparse.Namespace) -> dict:
    if missing := missing_services():
        raise SystemExit("bench.serve needs: " + "; ".join(missing))
    global VOTES
    VOTES = args.votes
    server = FaultServer(FaultConfig(latency_ms=args.latency_ms))
    url = server.start()
    try:
        with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
            result = {
                "runs": args.runs,
                "clients": args.clients,
                "latency_ms": args.latency_ms,
                "votes": args.votes,
            }
            if args.runs:
                log(f"in process: {args.runs} runs, {args.clients} at a time ...")
                local = result["in_process"] = await in_process(args.runs, args.clients, url)
                log(f"  {local}")
            for name, replicas in (("one_replica", 1), ("two_replicas", 2)):
                log(
                    f"{name}: {args.runs} runs through the API, {args.clients} sdk clients,"
                    f" {args.waits} waits ..."
                )
                result[name] = await served(
                    replicas, args.runs, args.clients, server, Path(tmp) / name, args.waits
                )
                log(f"  {result[name]}")
    finally:
        server.stop()
    if not args.runs:
        return result
    for name in ("one_replica", "two_replicas"):
        result[name]["server_overhead_s"] = round(result[name]["p50_s"] - local["p50_s"], 3)
    result["lost_runs"] = sum(
        result[name]["lost_runs"] + result[name]["openai"]["lost_runs"]
        for name in ("one_replica", "two_replicas")
    )
    result["duplicated_runs"] = sum(
        result[name]["duplicated_runs"]
        + result[name]["openai"]["duplicated_runs"]
        + result[name]["waits_duplicated_runs"]
        for name in ("one_replica", "two_replicas")
    )
    result["model_calls_counted_as"] = "completions (a request with n counts n)"
    result["two_over_one_runs_per_s"] = round(
        result["two_replicas"]["runs_per_s"] / result["one_replica"]["runs_per_s"], 2
    )
    return result


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=200)
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--latency-ms", type=float, default=50.0)
    parser.add_argument("--votes", type=int, default=3)
    parser.add_argument(
        "--waits",
        type=int,
        default=20,
        help="runs measured each way (stream, wait, join, stateless wait), one at a time; 0: none",
    )
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (the default)"
    )
    print(json.dumps(asyncio.run(main(parser.parse_args()))))


if __name__ == "__main__":
    cli()
