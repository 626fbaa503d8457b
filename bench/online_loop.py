"""bench.online_loop: a SIMULATED production in which the loop closes by itself, no person.

This is a simulation, not a measurement of a real model: a scripted model stands in for the
LLM, and simulated users give the feedback. Everything else is the product: the solve graph
serves each run the playbook its labels say (production, or the canary for its share of
threads), feedback and corrections go through logic/feedback.py, and the real `loop` graph
(graphs/loop.py) learns from the stored runs, gates, releases on canary, and the real rule
promotes or rolls back, all on one store.

The scripted world:
- tasks come from FAMILIES, each with a rule; the model answers a task right with probability
  `--base` (0.35), or `--with-rule` (0.9) when its prompt carries a lesson that names the
  family's rule;
- the reflector, shown a wrong run, proposes the family's rule; with probability `--harmful`
  (0.05) it proposes a harmful "shortcut" lesson instead, which, once in a prompt, cuts every
  answer's chance of being right to `--harm-factor` (0.3) of what it was;
- users score `--feedback` (80%) of the runs (1 right, 0 wrong) and correct `--corrections`
  (10%) of them with the right answer (a target the offline gate replays).

The bench plays two scenarios: users who also correct `--corrections` of the runs, and users
who only score them (no target anywhere: no offline gate claimed, the canary alone decides).

Rounds: `--runs` production runs (each on a new thread, 8 at a time), then one loop round
(the cron's period). In round `--kill-round` (or the first later round that has something to
learn) the loop is killed mid-way, during its reflections, and the round is run again once the
dead round's claims expire: what it had claimed must be learned by a later round, nothing lost.

Per round: production success (right answers / runs), the versions served, production and canary
after the loop, what the loop did. Goals, checked at the end: production success up by at least 20
points (mean of the last 3 rounds vs the first), every harmful candidate that went on canary rolled
back by the rule (or rejected before, by the offline gate) and none promoted, no run served a
version that was never released (production or canary), and no stored run with a signal lost.

    python -m bench.online_loop
    python -m bench.online_loop --rounds 14 --runs 160 --seed 3
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import time
import uuid
from collections import Counter
from typing import Any

import numpy as np
from langgraph.store.memory import InMemoryStore

from parallax.graphs.loop import builder as loop_builder
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.feedback import correct_answer, give_feedback
from parallax.logic.trace_signal import served_by, signal_of
from parallax.runtime.storage.stores import consumed_in, playbooks_in, traces_in
from testkit.scripted_model import scripted

FAMILIES = {
    "tariff": (
        "For a tariff total, always multiply unit price by quantity, then add the tariff fee.",
        "Tariff order {k}: unit price {a}, quantity {b}, tariff fee {c}. What is the tariff total?",
        lambda a, b, c: a * b + c,
    ),
    "discount": (
        (
            "For a discount total, always subtract the discount from the list price, then multiply"
            " by the units."
        ),
        "Discount sale {k}: list price {a}, discount {c}, units {b}. What is the discount total?",
        lambda a, b, c: (a - c) * b,
    ),
    "payroll": (
        "For a payroll gross, always multiply hourly wage by hours, then add the payroll bonus.",
        (
            "Payroll slip {k}: hourly wage {a}, hours {b}, payroll bonus {c}. What is the payroll"
            " gross?"
        ),
        lambda a, b, c: a * b + c,
    ),
}
HARMFUL = {
    name: (
        f"{name.capitalize()} shortcut: you should skip the checks and answer the first figure"
        " alone."
    )
    for name in FAMILIES
}
PLAYBOOK = "default"
VOCAB = sorted(
    {
        w.strip(".,:?").lower()
        for rule, task, _ in FAMILIES.values()
        for w in (rule + " " + task).split()
        if w.strip(".,:?{}").isalpha()
    }
    | {"shortcut", "skip", "checks", "first", "figure", "alone"}
)


WEIGHTS = {w: 5.0 for w in [*FAMILIES, "shortcut"]}


def bag_of_words(texts: list[str]) -> Any:
    """A deterministic stand-in for the sentence encoder (the merge, the lesson checks, the
    selection): a family's name and the word "shortcut" weigh most, so one family's rule is not
    merged into another's, nor into a harmful lesson."""
    rows = [[t.lower().count(w) * WEIGHTS.get(w, 1.0) for w in VOCAB] for t in texts]
    m = np.array(rows, dtype=float) + 1e-6
    return m / np.linalg.norm(m, axis=1, keepdims=True)


def chance(*parts: object) -> float:
    """A uniform draw in [0, 1) fixed by `parts`: the same run gets the same luck whatever the call
    order."""
    digest = hashlib.sha256("\n".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def family_of(text: str) -> str | None:
    return next((name for name in FAMILIES if f"{name} " in text.lower()), None)


class World:
    """The scripted model and the simulated users of one run of the bench."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.truth: dict[str, tuple[str, str]] = {}  # task text -> (family, right answer)
        self.reflections = 0

    def task(self, i: int) -> str:
        name = list(FAMILIES)[int(chance(self.args.seed, "family", i) * len(FAMILIES))]
        a, b, c = (2 + int(chance(self.args.seed, x, i) * 40) for x in "abc")
        _, template, right = FAMILIES[name]
        text = template.format(k=i, a=a, b=b, c=c)
        self.truth[text] = (name, str(right(a, b, c)))
        return text

    def reply(self, prompt: str, temperature: float, index: int) -> str:
        if "You review one solved task" in prompt:
            self.reflections += 1
            name = family_of(prompt.split("Task:", 1)[-1])
            if "Result: wrong" not in prompt or name is None:
                return json.dumps({"diagnosis": "fine", "lessons": [], "item_tags": []})
            harmful = chance(self.args.seed, "harm", prompt) < self.args.harmful
            lesson = HARMFUL[name] if harmful else FAMILIES[name][0]
            return json.dumps(
                {"diagnosis": "missed the rule", "lessons": [lesson], "item_tags": []}
            )
        if "You turn lessons into playbook entries" in prompt:
            lesson = prompt.split("Lessons:\n- ", 1)[-1].split("\n")[0].strip()
            name = family_of(lesson) or "general"
            return json.dumps({"entries": [{"section": name, "text": lesson, "about": [name]}]})
        task = next((t for t in self.truth if t in prompt), None)
        if task is None:  # the safety check, a judge: agree
            return json.dumps(
                {"reasoning": "fine", "answer": "yes", "objection": "none", "severity": "low"}
            )
        name, right = self.truth[task]
        lessons = (
            prompt.split("Lessons from earlier runs", 1)[-1]
            if "Lessons from earlier runs" in prompt
            else ""
        )
        p = self.args.with_rule if FAMILIES[name][0] in lessons else self.args.base
        if "shortcut:" in lessons:
            p *= self.args.harm_factor
        answer = right if chance(self.args.seed, "solve", prompt) < p else str(int(right) + 7)
        return json.dumps({"reasoning": "worked it out", "answer": answer})


async def production(
    world: World, store: Any, ctx: Any, first: int, n: int
) -> list[dict[str, Any]]:
    """n runs, each on a new thread, 8 at a time; users score some and correct a few."""
    solve = solve_builder.compile(store=store)
    limit = asyncio.Semaphore(8)

    async def one(i: int) -> dict[str, Any]:
        async with limit:
            text = world.task(i)
            out = await solve.ainvoke(
                {"task": text, "mode": "direct", "playbook": PLAYBOOK},
                {"configurable": {"thread_id": uuid.uuid4().hex}},
                context=ctx,
            )
            right = world.truth[text][1]
            ok = out.get("status") == "ok" and out.get("answer", "").strip() == right
            draw = chance(world.args.seed, "user", i)
            if draw < world.args.corrections:
                await correct_answer(store, "default", out["trace_id"], right, "user")
            elif draw < world.args.feedback:
                await give_feedback(
                    store, "default", out["trace_id"], 1.0 if ok else 0.0, "", "user"
                )
            trace = await traces_in(store).get_trace(out["trace_id"])
            return {
                "right": ok,
                "version": trace.get("playbook_version", 0),
                "arm": (trace.get("served") or {}).get(f"playbook/{PLAYBOOK}", {}).get("arm"),
            }

    return list(await asyncio.gather(*(one(i) for i in range(first, first + n))))


def loop_input(args: argparse.Namespace) -> dict[str, Any]:
    return {
        "playbook": PLAYBOOK,
        "share": args.share,
        "min_runs": args.min_runs,
        "max_runs": args.max_runs,
        "limit": args.limit,
        "lease_s": args.lease_s,
    }


async def killed_round(world: World, loop: Any, ctx: Any, args: argparse.Namespace) -> bool:
    """Start a round and kill it once it is reflecting; whether it was killed before it finished."""
    before = world.reflections
    task = asyncio.create_task(loop.ainvoke(loop_input(args), context=ctx))
    while not task.done() and world.reflections < before + 2:
        await asyncio.sleep(0.005)
    if task.done():
        return False
    task.cancel()
    try:
        await task
    except asyncio.CancelledError:
        pass
    await asyncio.sleep(args.lease_s + 0.2)  # the dead round's claims expire
    return True


async def run(args: argparse.Namespace) -> dict[str, Any]:
    store = InMemoryStore()
    world = World(args)
    ctx, _ = scripted(world.reply, embedder=bag_of_words)
    loop = loop_builder.compile(store=store)
    labels = playbooks_in(store).labels(PLAYBOOK)
    rounds, killed_at, started = [], None, time.perf_counter()
    for r in range(args.rounds):
        runs = await production(world, store, ctx, r * args.runs, args.runs)
        kill_now = (
            killed_at is None and r + 1 >= args.kill_round and not (await labels.get())["release"]
        )
        if kill_now and await killed_round(world, loop, ctx, args):
            killed_at = r + 1
        out = await loop.ainvoke(loop_input(args), context=ctx)
        now = await labels.get()
        rounds.append(
            {
                "round": r + 1,
                "success": round(sum(x["right"] for x in runs) / len(runs), 3),
                "served": {
                    f"v{v}": n for v, n in sorted(Counter(x["version"] for x in runs).items())
                },
                "loop": out["status"],
                "consumed": (out.get("traces") or {}).get("consumed", 0),
                "gate": (
                    None
                    if out.get("gate") is None
                    else ("replayed" if out["gate"]["claimed"] else "none claimed")
                ),
                "decided_this_round": (out.get("advanced") or {}).get("decision"),
                "production": now["production"],
                "canary": (
                    f"v{now['release']['version']} {now['release']['status']}"
                    if now["release"]
                    else "none"
                ),
                **({"killed_mid_way": True} if killed_at == r + 1 else {}),
            }
        )
    return {
        **await verdicts(store, world, rounds, killed_at),
        "rounds": rounds,
        "seconds": round(time.perf_counter() - started, 1),
    }


async def verdicts(
    store: Any, world: World, rounds: list[dict[str, Any]], killed_at: int | None
) -> dict[str, Any]:
    playbooks = playbooks_in(store)
    now = await playbooks.labels(PLAYBOOK).get()
    released = {
        e["to"]
        for e in now["events"]
        if e["label"] in ("production", "canary") and e["to"] is not None
    }
    decisions = {r["version"]: r["decision"] for r in now["releases"]}
    if now["release"]:
        decisions[now["release"]["version"]] = "running"

    def harmful(items: Any) -> bool:
        return any("shortcut:" in i.text for i in items if i.status == "active")

    history = await playbooks.history(PLAYBOOK)
    harmful_canaries = {
        v.version: decisions[v.version]
        for v in history
        if v.version in decisions and harmful(v.items)
    }
    rejected = [c for c in await playbooks.candidates(PLAYBOOK) if harmful(c.items)]
    promoted = [v for v, d in harmful_canaries.items() if d == "promote"]
    served_unreleased = sum(
        n for r in rounds for v, n in r["served"].items() if int(v[1:]) not in released
    )
    # nothing lost: every stored run with a signal was learned from, or is still free for the next
    # round
    traces = [
        t
        for t in await traces_in(store).traces()
        if served_by(t, PLAYBOOK) and signal_of(t) is not None
    ]
    records = await consumed_in(store, "default", PLAYBOOK).records()
    # a claim that ran out without its round ending it; a run released after a failed reflection
    # (its claim's own round failed it) waits for a later try and is not lost
    stuck = [
        t["trace_id"]
        for t in traces
        if (rec := records.get(t["trace_id"]))
        and rec["state"] == "claimed"
        and rec["until"] < time_iso()
        and (rec.get("last_failure") or {}).get("round") != rec["round"]
    ]
    first, last = rounds[0]["success"], float(np.mean([r["success"] for r in rounds[-3:]]))
    gain = round(100 * (last - first), 1)
    stopped = all(d == "rollback" for d in harmful_canaries.values() if d != "running")
    return {
        "simulated": True,
        "note": "a scripted model and simulated users (see the module docstring), not a real LLM",
        "settings": {k: v for k, v in vars(world.args).items() if k != "json"},
        "success_first_round": first,
        "success_last_3_rounds": round(last, 3),
        "gain_points": gain,
        "versions_released": sorted(released),
        "harmful_candidates_on_canary": len(harmful_canaries),
        "harmful_rolled_back": sum(d == "rollback" for d in harmful_canaries.values()),
        "harmful_still_on_canary": sum(d == "running" for d in harmful_canaries.values()),
        "harmful_rejected_by_offline_gate": len(rejected),
        "harmful_promoted": len(promoted),
        "runs_served_unreleased_version": served_unreleased,
        "killed_round": killed_at,
        "runs_with_signal": len(traces),
        "runs_consumed": sum(r["state"] == "consumed" for r in records.values()),
        "runs_lost": len(stuck),
        "goals": {
            "success_up_20_points": gain >= 20,
            "every_harmful_candidate_rolled_back_or_rejected": stopped and not promoted,
            "no_unreleased_version_served": served_unreleased == 0,
            "nothing_lost_after_a_kill": killed_at is not None and not stuck,
        },
    }


def time_iso() -> str:
    from parallax.runtime.timestamps import now_iso

    return now_iso()


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m bench.online_loop", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--rounds", type=int, default=10)
    p.add_argument("--runs", type=int, default=120, help="production runs per round")
    p.add_argument(
        "--base",
        type=float,
        default=0.35,
        help="chance of a right answer without the family's rule",
    )
    p.add_argument(
        "--with-rule", type=float, default=0.9, help="chance with a lesson naming the family's rule"
    )
    p.add_argument(
        "--harmful", type=float, default=0.05, help="share of lessons the reflector makes harmful"
    )
    p.add_argument(
        "--harm-factor",
        type=float,
        default=0.3,
        help="a harmful lesson multiplies every chance by this",
    )
    p.add_argument(
        "--feedback",
        type=float,
        default=0.8,
        help="share of runs users score (corrections included)",
    )
    p.add_argument(
        "--corrections",
        type=float,
        default=0.1,
        help="share of runs users correct with the right answer",
    )
    p.add_argument("--share", type=float, default=50.0, help="canary share, percent of threads")
    p.add_argument("--min-runs", type=int, default=20)
    p.add_argument("--max-runs", type=int, default=120)
    p.add_argument("--limit", type=int, default=20, help="most stored runs one round learns from")
    p.add_argument("--lease-s", type=float, default=1.0, help="how long a dead round's claims last")
    p.add_argument("--kill-round", type=int, default=3)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="(the output is always JSON)")
    args = p.parse_args(argv)
    if args.rounds < 2 or args.runs < 1:
        p.error("need --rounds >= 2 and --runs >= 1")
    return args


SCENARIOS = {"with_corrections": None, "feedback_only": 0.0}
"""Each run of the bench plays both: users who correct some runs (targets the offline gate replays),
and users who only score them (no run carries a target: no offline gate is claimed, and the canary
alone stops a harmful candidate)."""


async def both(args: argparse.Namespace) -> dict[str, Any]:
    results = {}
    for name, corrections in SCENARIOS.items():
        results[name] = await run(
            argparse.Namespace(
                **{
                    **vars(args),
                    **({"corrections": corrections} if corrections is not None else {}),
                }
            )
        )
    goals = {
        goal: all(r["goals"][goal] for r in results.values())
        for goal in next(iter(results.values()))["goals"]
    }
    return {"simulated": True, "goals_met_in_every_scenario": goals, "scenarios": results}


def main(argv: list[str] | None = None) -> dict[str, Any]:
    result = asyncio.run(both(parse(argv)))
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
