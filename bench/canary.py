"""bench.canary: how often the gray release rule promotes or rolls back, and how fast.

Each rollout is one canary release: runs arrive one by one, a share of them (10% by default)
gets the canary, each run succeeds with its version's known rate (production 70%; the canary
better by 5 points, equal, worse by 5 or by 15), and the real rule
(parallax/logic/release_decision.py: `decide`) looks at the counts exactly when the production
code would, until it decides or its last look passes. Runs are drawn with numpy in chunks, and
the counts at each look are handed to `decide`; the hash split of threads is checked separately
(tests/unit/test_release_decision.py).

`--graph N` also runs N rollouts per scenario through the real solve graph (in-memory store,
a scripted model that answers right with the served version's rate, a smaller rule so it
finishes), to show the graph reaches the decisions the simulation predicts.

    python -m bench.canary --json
    python -m bench.canary --rollouts 200 --share 10 --graph 2 --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time

import numpy as np

from parallax.logic.release_decision import Rule, decide

SCENARIOS = {"better5": 0.05, "equal": 0.0, "worse5": -0.05, "worse15": -0.15}


def rollout(
    rng: np.random.Generator, p_prod: float, p_canary: float, share: float, rule: Rule
) -> tuple[str, int]:
    """(verdict, runs until it) of one simulated release."""
    arms = {"canary": {"runs": 0, "successes": 0}, "production": {"runs": 0, "successes": 0}}
    runs, look = 0, 0
    looks = rule.looks()
    while look < len(looks):
        need = looks[look]
        while min(arms["canary"]["runs"], arms["production"]["runs"]) < need:
            chunk = max(
                64,
                int(
                    (need - min(arms["canary"]["runs"], arms["production"]["runs"]))
                    / min(share, 1 - share)
                ),
            )
            is_canary = rng.random(chunk) < share
            success = rng.random(chunk) < np.where(is_canary, p_canary, p_prod)
            c_runs = arms["canary"]["runs"] + np.cumsum(is_canary)
            p_runs = arms["production"]["runs"] + np.cumsum(~is_canary)
            reached = np.nonzero(np.minimum(c_runs, p_runs) >= need)[0]
            stop = int(reached[0]) + 1 if reached.size else chunk
            taken_c, taken_s = is_canary[:stop], success[:stop]
            arms["canary"]["runs"] += int(taken_c.sum())
            arms["canary"]["successes"] += int((taken_s & taken_c).sum())
            arms["production"]["runs"] += int((~taken_c).sum())
            arms["production"]["successes"] += int((taken_s & ~taken_c).sum())
            runs += stop
        verdict, look, _ = decide(arms, rule, look)
        if verdict:
            return verdict, runs
    return "undecided", runs


def simulate(rollouts: int, share: float, p_prod: float, rule: Rule, seed: int) -> dict:
    rng = np.random.default_rng(seed)
    out = {}
    for name, delta in SCENARIOS.items():
        results = [rollout(rng, p_prod, p_prod + delta, share, rule) for _ in range(rollouts)]
        verdicts = [v for v, _ in results]
        decided_runs = [r for v, r in results if v != "undecided"]
        wrong = sum(
            (v == "rollback" and delta >= 0) or (v == "promote" and delta < -rule.margin)
            for v in verdicts
        )
        out[name] = {
            "canary_success": round(p_prod + delta, 3),
            "promoted_share": verdicts.count("promote") / rollouts,
            "rolled_back_share": verdicts.count("rollback") / rollouts,
            "undecided_share": verdicts.count("undecided") / rollouts,
            "wrong_decisions": wrong,
            "median_runs_to_decision": statistics.median(decided_runs) if decided_runs else None,
        }
    return out


def scripted_rates(rates: dict[str, float], rng):
    """A script that answers right with the rate of the version whose lesson is in the prompt."""

    def script(prompt: str, t: float, i: int) -> str:
        rate = rates["V2-LESSON"] if "V2-LESSON" in prompt else rates["V1-LESSON"]
        return json.dumps({"reasoning": "r", "answer": "4" if rng.random() < rate else "5"})

    return script


async def graph_rollouts(
    n: int, share: float, p_prod: float, seed: int, min_runs: int = 20, max_runs: int = 160
) -> dict:
    """A few rollouts through the real solve graph and store; the rule is smaller so they finish."""
    import random

    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.solve import builder
    from parallax.logic.releases import start_release
    from parallax.runtime.storage.stores import playbooks_in
    from parallax.state.playbook import Operation
    from testkit.scripted_model import scripted

    rule = Rule(error_rate=0.05, margin=0.05, min_runs=min_runs, max_runs=max_runs)
    out = {}
    for name, delta in SCENARIOS.items():
        rng = random.Random(seed)
        rates = {"V1-LESSON": p_prod, "V2-LESSON": p_prod + delta}

        ctx, _ = scripted(scripted_rates(rates, rng))
        verdicts = []
        for r in range(n):
            store = InMemoryStore()
            playbooks = playbooks_in(store)
            await playbooks.commit(
                "bench", 0, [Operation(op="add", text="V1-LESSON add the numbers")], "bench"
            )
            await playbooks.commit(
                "bench",
                1,
                [
                    Operation(op="archive", item_id=(await playbooks.head("bench")).items[0].id),
                    Operation(op="add", text="V2-LESSON add the numbers"),
                ],
                "bench",
            )
            labels = playbooks.labels("bench")
            await start_release(labels, 2, share, "bench", "bench", rule, False, production=1)
            graph = builder.compile(store=store)
            runs, record = 0, await labels.get()
            while record["release"] is not None and record["release"]["status"] != "undecided":
                runs += 1
                await graph.ainvoke(
                    {
                        "task": "What is 2 + 2?",
                        "mode": "direct",
                        "playbook": "bench",
                        "target": "4",
                    },
                    {"configurable": {"thread_id": f"{r}-{runs}"}},
                    context=ctx,
                )
                record = await labels.get()
            verdicts.append(
                (
                    (
                        record["releases"][-1]["decision"]
                        if record["release"] is None
                        else "undecided"
                    ),
                    runs,
                )
            )
        out[name] = {
            "decisions": [v for v, _ in verdicts],
            "runs": [k for _, k in verdicts],
            "simulated_with_this_rule": simulate(200, share / 100, p_prod, rule, seed)[name],
        }
    return out


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--rollouts", type=int, default=200)
    parser.add_argument("--share", type=float, default=10.0, help="canary share in percent")
    parser.add_argument("--production", type=float, default=0.70, help="production success rate")
    parser.add_argument("--error-rate", type=float, default=0.05)
    parser.add_argument("--margin", type=float, default=0.05)
    parser.add_argument("--min-runs", type=int, default=50)
    parser.add_argument("--max-runs", type=int, default=1600)
    parser.add_argument(
        "--graph", type=int, default=0, help="rollouts per scenario through the real solve graph"
    )
    parser.add_argument(
        "--graph-min-runs", type=int, default=20, help="first look of the --graph rollouts' rule"
    )
    parser.add_argument(
        "--graph-max-runs", type=int, default=160, help="last look of the --graph rollouts' rule"
    )
    parser.add_argument("--seed", type=int, default=12)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args(argv)
    rule = Rule(args.error_rate, args.margin, args.min_runs, args.max_runs)
    started = time.perf_counter()
    scenarios = simulate(args.rollouts, args.share / 100, args.production, rule, args.seed)
    all_runs = [
        s["median_runs_to_decision"] for s in scenarios.values() if s["median_runs_to_decision"]
    ]
    result = {
        "rollouts": args.rollouts,
        "share_percent": args.share,
        "production_success": args.production,
        "rule": {**rule.as_dict(), "looks_at_runs_per_arm": rule.looks(), "z": round(rule.z(), 3)},
        "stated_error_rate": args.error_rate,
        "worse15_rolled_back_share": scenarios["worse15"]["rolled_back_share"],
        "equal_rolled_back_share": scenarios["equal"]["rolled_back_share"],
        "wrong_decisions": sum(s["wrong_decisions"] for s in scenarios.values()),
        "median_runs_to_decision": statistics.median(all_runs) if all_runs else None,
        "scenarios": scenarios,
        "goals_met": {
            "worse15_rolled_back_at_least_95pct": scenarios["worse15"]["rolled_back_share"] >= 0.95,
            "equal_rolled_back_at_most_stated_rate": (
                scenarios["equal"]["rolled_back_share"] <= args.error_rate
            ),
        },
        "seconds": round(time.perf_counter() - started, 2),
    }
    if args.graph:
        result["graph"] = asyncio.run(
            graph_rollouts(
                args.graph,
                args.share,
                args.production,
                args.seed,
                args.graph_min_runs,
                args.graph_max_runs,
            )
        )
    print(json.dumps(result, indent=None if args.json else 2))
    return result


if __name__ == "__main__":
    main()
