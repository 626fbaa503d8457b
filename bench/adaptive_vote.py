"""Adaptive votes against fixed votes: model calls, accuracy, wall time, and what `ok` promises.

Why: a fixed vote of 8 pays for 8 answers even when the first 3 agree. Adaptive votes
(logic/stopping.py) ask in parallel waves and stop once the leader is settled. This measures
the trade on simulated questions whose answers are drawn from stated distributions, through
the real vote path: the solve graph, ChatOpenAI and the scripted OpenAI-compatible server
(testkit/fault_server.py) answering each vote after `--latency-ms` (1 s by default).

Question kinds (shares of `--questions`) and the distribution each vote draws from, in two stated
mixes (`MIXES`, `--mix`): `mostly-easy` (default; half the questions easy: right 0.95) and
`harder` (easy questions right only 0.85, a fifth hard); both have 10% traps, where the model's
most likely answer is wrong.
Each answer comes in one of several spellings ("42", "42.0", "The answer is 42.", "21 + 21 = 42"),
so counting by meaning (logic/vote.py `final_value`) is part of what is measured. The k-th vote of a
question draws the k-th sample of that question's seeded stream, in every configuration.

Configurations: fixed 8 votes (`early_stop` off), adaptive with at most 8, adaptive with at most 16.
Figures per configuration: model calls per question, accuracy (answer = the right answer),
mean wall seconds per question, the share of `ok` runs, and the share of `ok` runs whose answer
is the distribution's most likely answer (what `ok` promises: a settled majority, right or wrong).
Goals (issue 18): calls <= 0.5x fixed-8's, accuracy within 0.5 pp, mean wall <= 1.5x fixed-8's,
`ok` answers the most likely one in >= 97% of `ok` runs.

Counted on the same streams, without the server, to read the ratio against: Adaptive-Consistency's
sequential rule, the wave rule that stops when the leader leads by 2 (and what `ok` would cost
there), and the bound no rule can beat on the mix (bench/vote_bound.py).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import re
import statistics
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.samples import SAMPLES
from parallax.runtime.settings import reload_settings
from testkit.fault_server import FaultConfig, FaultServer

# kind -> (share of questions, the answers a vote draws from); "trap": the most likely answer is
# wrong
MIXES = {
    "mostly-easy": {
        "easy": (0.50, [("right", 0.95), ("d1", 0.03), ("d2", 0.02)]),
        "medium": (0.25, [("right", 0.75), ("d1", 0.15), ("d2", 0.10)]),
        "hard": (0.15, [("right", 0.50), ("d1", 0.30), ("d2", 0.20)]),
        "trap": (0.10, [("d1", 0.50), ("right", 0.30), ("d2", 0.20)]),
    },
    "harder": {
        "easy": (0.40, [("right", 0.85), ("d1", 0.10), ("d2", 0.05)]),
        "medium": (0.30, [("right", 0.60), ("d1", 0.25), ("d2", 0.15)]),
        "hard": (0.20, [("right", 0.45), ("d1", 0.35), ("d2", 0.20)]),
        "trap": (0.10, [("d1", 0.50), ("right", 0.35), ("d2", 0.15)]),
    },
}
SPELLINGS = ("{n}", "{n}.0", "The answer is {n}.", "{h} + {rest} = {n}", "{n} apples")
QUESTION = re.compile(r"Question #(\d+):")
SPREAD = {"vote_temperature_min": 0.3, "vote_temperature_max": 1.0}
"""Vote temperatures of the runs against the scripted server: a spread, so each vote is a request of
its own."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Question:
    number: int
    kind: str
    values: dict[str, int]
    """right / d1 / d2 -> the number each stands for."""
    weights: list[tuple[str, float]]

    @property
    def right(self) -> str:
        return str(self.values["right"])

    @property
    def most_likely(self) -> str:
        return str(self.values[max(self.weights, key=lambda w: w[1])[0]])

    def text(self) -> str:
        return f"Question #{self.number}: how many apples are in basket {self.number}?"


def make_questions(n: int, seed: int, mix: str) -> list[Question]:
    rng = random.Random(seed)
    kinds = MIXES[mix]
    names = list(kinds)
    shares = [kinds[k][0] for k in names]
    questions = []
    for i in range(n):
        kind = rng.choices(names, shares)[0]
        right = rng.randint(10, 999)
        values = {"right": right, "d1": right + rng.choice((-10, -1, 1, 10)), "d2": right * 2}
        questions.append(Question(i, kind, values, kinds[kind][1]))
    return questions


class Voter:
    """The scripted server's replies: the k-th call about question q gets sample k of q's stream."""

    def __init__(self, questions: list[Question], seed: int) -> None:
        self.questions, self.seed = questions, seed
        self.asked: dict[int, int] = {}
        self.lock = threading.Lock()

    def label(self, number: int, k: int) -> str:
        """Which of question `number`'s answers its k-th vote gives (right / d1 / d2)."""
        weights = self.questions[number].weights
        return random.Random(f"{self.seed}/{number}/{k}").choices(
            [w[0] for w in weights], [w[1] for w in weights]
        )[0]

    def reset(self) -> None:
        self.asked.clear()

    def __call__(self, body: dict) -> str:
        text = " ".join(str(m.get("content", "")) for m in body.get("messages", []))
        number = int(QUESTION.search(text).group(1))  # type: ignore[union-attr]
        with self.lock:
            k = self.asked.get(number, 0)
            self.asked[number] = k + 1
        value = self.questions[number].values[self.label(number, k)]
        spelling = random.Random(f"{self.seed}/{number}/{k}/spelling").choice(SPELLINGS)
        spelled = spelling.format(n=value, h=value // 2, rest=value - value // 2)
        return json.dumps({"reasoning": "counted", "answer": spelled})


async def run_config(
    name: str,
    questions: list[Question],
    voter: Voter,
    url: str,
    max_votes: int,
    early_stop: bool,
    parallel: int,
) -> dict[str, Any]:
    import httpx

    from parallax.graphs.solve import graph
    from parallax.state.context import Context

    voter.reset()
    httpx.post(f"{url[:-3]}/_reset")
    # each vote its own temperature, so its own request: calls count votes here (`n` is
    # bench/cost.py's)
    context = Context(
        early_stop=early_stop, max_concurrency=max_votes, straggler_factor=0.0, **SPREAD
    )
    gate = asyncio.Semaphore(parallel)
    rows: list[dict[str, Any]] = []

    async def one(question: Question) -> None:
        async with gate:
            began = time.perf_counter()
            out = await graph.ainvoke(
                {"task": question.text(), "mode": "vote", "votes": max_votes}, context=context
            )
            rows.append(
                {
                    "kind": question.kind,
                    "status": out["status"],
                    "answer": out.get("answer", ""),
                    "right": question.right,
                    "most_likely": question.most_likely,
                    "asked": out.get("votes_asked", max_votes),
                    "stop": out.get("stop_reason", ""),
                    "seconds": time.perf_counter() - began,
                }
            )

    began = time.perf_counter()
    await asyncio.gather(*(one(q) for q in questions))
    wall = time.perf_counter() - began
    asked = [
        e for e in httpx.get(f"{url[:-3]}/_log").json() if e["path"].endswith("/chat/completions")
    ]
    calls, completions = len(asked), sum(int(e.get("choices") or 1) for e in asked)
    from parallax.logic.vote import final_value

    ok = [r for r in rows if r["status"] == "ok"]
    right = [r for r in rows if final_value(r["answer"]) == r["right"]]
    report = {
        "config": name,
        "max_votes": max_votes,
        "early_stop": early_stop,
        "questions": len(rows),
        "model_calls": calls,
        "calls_per_question": round(calls / len(rows), 3),
        "model_calls_counted_as": "requests (a wave of votes with n is one)",
        "model_completions": completions,
        "accuracy": round(len(right) / len(rows), 4),
        "mean_wall_s": round(statistics.mean(r["seconds"] for r in rows), 3),
        "ok_share": round(len(ok) / len(rows), 4),
        "ok_is_most_likely": (
            round(sum(final_value(r["answer"]) == r["most_likely"] for r in ok) / len(ok), 4)
            if ok
            else None
        ),
        "by_kind": {
            k: {
                "accuracy": round(
                    sum(final_value(r["answer"]) == r["right"] for r in rs) / len(rs), 3
                ),
                "calls": round(statistics.mean(r["asked"] for r in rs), 2),
            }
            for k in ("easy", "medium", "hard", "trap")
            if (rs := [r for r in rows if r["kind"] == k])
        },
        "elapsed_s": round(wall, 1),
    }
    log(json.dumps(report))
    return report


def sequential_reference(
    questions: list[Question], voter: Voter, max_votes: int = 8, threshold: float = 0.95
) -> dict[str, Any]:
    """Adaptive-Consistency as published, on the same sample streams: one vote at a time, stop at
    its 0.95 threshold or at `max_votes`. No server: it only counts. It says what the mix itself
    allows, so a calls ratio is read against the rule this one is built on, not against an ideal."""
    from collections import Counter

    from parallax.logic.stopping import settled

    calls = right = 0
    for q in questions:
        counts: Counter[str] = Counter()
        for k in range(max_votes):
            counts[voter.label(q.number, k)] += 1
            if settled(list(counts.values()), threshold)[0]:
                break
        calls += sum(counts.values())
        right += counts.most_common(1)[0][0] == "right"
    return {
        "rule": f"one vote at a time, Beta rule at {threshold}, at most {max_votes}",
        "calls_ratio_vs_fixed_8": round(calls / (8 * len(questions)), 3),
        "accuracy": round(right / len(questions), 4),
        "waves_per_question": round(calls / len(questions), 2),
    }


def lead_by_two_reference(
    questions: list[Question], voter: Voter, fixed_accuracy: float, threshold: float = 0.93
) -> dict[str, Any]:
    """The wave rule that reaches the calls goal on this mix, counted on the same streams: a first
    wave of 3, then stop once the leader leads the runner-up by 2 (the shape of the Bayes-optimal
    policy near 0.5x, see bench/vote_bound.py), else ask the votes that would make it lead by 2. It
    stops at 3-1, which the Beta rule does not call settled; this says what `ok` would cost if it
    stopped there: with a majority as `ok`, how often an `ok` answer is not the most likely one;
    with `ok` needing the Beta posterior, how many runs are left to review."""
    from collections import Counter

    from parallax.logic.stopping import leader_posterior

    calls = right = ok_majority = ok_majority_likely = ok_posterior = 0
    for q in questions:
        labels = [voter.label(q.number, k) for k in range(8)]
        asked = 3
        while True:
            ranked = [n for _, n in Counter(labels[:asked]).most_common()] + [0]
            gap = ranked[0] - ranked[1]
            if gap >= 2 or asked >= 8:
                break
            asked = min(8, asked + 2 - gap)
        top, top_count = Counter(labels[:asked]).most_common(1)[0]
        runner_up = ([n for _, n in Counter(labels[:asked]).most_common()] + [0, 0])[1]
        calls += asked
        right += top == "right"
        if top_count > asked // 2 and top_count > runner_up:
            ok_majority += 1
            ok_majority_likely += str(q.values[top]) == q.most_likely
        ok_posterior += leader_posterior(top_count, runner_up) >= threshold
    n = len(questions)
    return {
        "rule": "first wave 3, stop when the leader leads by 2, at most 8",
        "calls_ratio_vs_fixed_8": round(calls / (8 * n), 3),
        "accuracy_delta_pp": round(100 * (right / n - fixed_accuracy), 2),
        "ok_is_most_likely_if_a_majority_is_ok": round(ok_majority_likely / max(1, ok_majority), 4),
        f"ok_share_if_ok_needs_posterior_{threshold}": round(ok_posterior / n, 3),
    }


def references(args: argparse.Namespace) -> dict[str, Any]:
    """Only what is counted on the sample streams (no server, seconds): the references and the
    bound."""
    from collections import Counter

    questions = make_questions(args.questions, args.seed, args.mix)
    voter = Voter(questions, args.seed)
    fixed = sum(
        Counter(voter.label(q.number, k) for k in range(8)).most_common(1)[0][0] == "right"
        for q in questions
    ) / len(questions)
    return {
        "benchmark": "adaptive_vote references (counted, no server)",
        "questions": args.questions,
        "seed": args.seed,
        "mix": args.mix,
        "fixed_8_accuracy_counted": round(fixed, 4),
        "reference_sequential_adaptive_consistency": sequential_reference(questions, voter),
        "reference_lead_by_two": lead_by_two_reference(questions, voter, fixed),
        "bound_any_rule": bound(args.mix),
    }


def bound(mix: str) -> dict[str, Any]:
    """The fewest calls any rule could ask on this mix, knowing it exactly (bench/vote_bound.py)."""
    from bench.vote_bound import Mix, fewest_votes

    known = Mix([(share, dict(answers)) for share, answers in MIXES[mix].values()])
    return {
        "what": (
            "Bayes-optimal, knowing the mix, one vote at a time, may toss a coin between two"
            " policies"
        ),
        "at_most_8_within_0.5pp": fewest_votes(known, 8, 0.5),
        "at_most_8_within_0.1pp": fewest_votes(known, 8, 0.1),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    import os

    from parallax.runtime.chat_models import forget_clients

    questions = make_questions(args.questions, args.seed, args.mix)
    voter = Voter(questions, args.seed)
    with FaultServer(FaultConfig(reply=voter, latency_ms=args.latency_ms)) as url:
        os.environ["OPENAI_BASE_URL"] = url
        os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_schema")
        # no queueing at our own connection cap: every configuration's votes reach the server at
        # once
        os.environ["PARALLAX_ENDPOINT_MAX_CONNECTIONS"] = str(args.parallel * 16 + 16)
        reload_settings()
        forget_clients()
        fixed = await run_config("fixed_8", questions, voter, url, 8, False, args.parallel)
        adaptive8 = await run_config("adaptive_8", questions, voter, url, 8, True, args.parallel)
        adaptive16 = await run_config("adaptive_16", questions, voter, url, 16, True, args.parallel)
    result: dict[str, Any] = {
        "benchmark": "adaptive_vote",
        "questions": args.questions,
        "latency_ms": args.latency_ms,
        "seed": args.seed,
        "mix": args.mix,
        "fixed_8": fixed,
        "adaptive_8": adaptive8,
        "adaptive_16": adaptive16,
    }
    for name, run in (("adaptive_8", adaptive8), ("adaptive_16", adaptive16)):
        result[f"{name}_vs_fixed_8"] = {
            "calls_ratio": round(run["model_calls"] / fixed["model_calls"], 3),
            "completions_ratio": round(run["model_completions"] / fixed["model_completions"], 3),
            "accuracy_delta_pp": round(100 * (run["accuracy"] - fixed["accuracy"]), 2),
            "wall_ratio": round(run["mean_wall_s"] / fixed["mean_wall_s"], 3),
        }
    result["reference_sequential_adaptive_consistency"] = sequential_reference(questions, voter)
    result["reference_lead_by_two"] = lead_by_two_reference(questions, voter, fixed["accuracy"])
    result["bound_any_rule"] = bound(args.mix)
    a8 = result["adaptive_8_vs_fixed_8"]
    result["goals_met"] = {
        "calls_le_0.5x": a8["calls_ratio"] <= 0.5,
        "accuracy_within_0.5pp": a8["accuracy_delta_pp"] >= -0.5,
        "wall_le_1.5x": a8["wall_ratio"] <= 1.5,
        "ok_is_most_likely_ge_0.97": (adaptive8["ok_is_most_likely"] or 0) >= 0.97,
    }
    return result


async def embedded(args: argparse.Namespace) -> dict[str, Any]:
    """Fixed 8 against adaptive at most 8 on the embedded model (SmolLM2-135M) over GSM8K's first
    test questions: calls, accuracy, wall time, and the share of vote branches cut at the token cap.
    """
    import os

    from bench.samples import read_jsonl
    from parallax.graphs.solve import graph
    from parallax.logic.vote import final_value
    from parallax.state.context import Context

    os.environ.pop("OPENAI_BASE_URL", None)
    reload_settings()
    rows = read_jsonl(args.data)[: args.embedded]
    out: dict[str, Any] = {
        "questions": len(rows),
        "source": "gsm8k test, first questions",
        "order": "per question, fixed then adaptive, so load on the machine falls on both alike",
    }
    tally: dict[str, dict[str, Any]] = {
        name: {"calls": 0, "capped": 0, "right": 0, "seconds": []}
        for name in ("fixed_8", "adaptive_8")
    }
    for number, row in enumerate(rows, 1):
        for name, early in (("fixed_8", False), ("adaptive_8", True)):
            t = tally[name]
            began = time.perf_counter()
            result = await graph.ainvoke(
                {"task": row["question"], "mode": "vote", "votes": 8},
                context=Context(early_stop=early),
            )
            t["seconds"].append(time.perf_counter() - began)
            votes = [
                b for b in result["branches"] if b["kind"] == "vote" and b["status"] != "cancelled"
            ]
            t["calls"] += len(votes)
            t["capped"] += sum("token limit" in (b.get("error") or "") for b in votes)
            t["right"] += final_value(result.get("answer", "")) == final_value(
                row["answer"].split("####")[-1]
            )
        if number % 10 == 0:
            log(f"embedded: {number}/{len(rows)} questions")
    for name, t in tally.items():
        out[name] = {
            "vote_branches": t["calls"],
            "accuracy": round(t["right"] / len(rows), 3),
            "mean_wall_s": round(statistics.mean(t["seconds"]), 2),
            "token_cap_share": round(t["capped"] / max(1, t["calls"]), 3),
        }
        log(json.dumps({name: out[name]}))
    out["calls_ratio"] = round(
        out["adaptive_8"]["vote_branches"] / out["fixed_8"]["vote_branches"], 3
    )
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--questions", type=int, default=1000)
    parser.add_argument("--latency-ms", type=float, default=1000.0)
    parser.add_argument("--parallel", type=int, default=100, help="questions in flight at once")
    parser.add_argument("--seed", type=int, default=11)
    parser.add_argument(
        "--mix", choices=sorted(MIXES), default="mostly-easy", help="which stated distributions"
    )
    parser.add_argument(
        "--embedded",
        type=int,
        default=0,
        metavar="N",
        help="instead: fixed 8 against adaptive on the embedded model over N GSM8K questions",
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=SAMPLES / "gsm8k" / "test.jsonl.gz",
        help=(
            "GSM8K test JSONL for --embedded, may be gzipped (default: its first 100 questions, "
            "bench/data/samples/gsm8k)"
        ),
    )
    parser.add_argument(
        "--references-only",
        action="store_true",
        help="only the counted references and the bound on the stated mix (no server, seconds)",
    )
    args = parser.parse_args()
    if args.references_only:
        print(json.dumps(references(args)))
        return
    print(json.dumps(asyncio.run(embedded(args) if args.embedded else main_async(args))))


if __name__ == "__main__":
    main()
