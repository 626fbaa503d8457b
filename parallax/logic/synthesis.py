"""A plan's output tasks turned into one answer: `concat`, `reduce`, `vote` or `assembly`.

See docs/plan.md (join) and docs/internals/plans.md#finishing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from parallax.logic.plan_check import PLACEHOLDER
from parallax.logic.vote import quorum, quorum_shortfall, tally
from parallax.state.plan import Plan

Combine = Callable[[str, str], Awaitable[str | None]]
"""`await combine(a, b)` -> one text holding both, or None when the call failed."""


@dataclass
class Synthesis:
    answer: str
    settled: bool
    note: str = ""
    votes: dict[str, int] = field(default_factory=dict)
    quorum: dict[str, Any] | None = None


def _missing_note(missing: list[int]) -> str:
    return (
        f"no result from task{'s' if len(missing) > 1 else ''} {', '.join(map(str, missing))}"
        if missing
        else ""
    )


async def _fold(texts: list[str], combine: Combine) -> tuple[str, int]:
    """Pairwise tree fold; (text, failed combine calls). A failed pair is kept as both texts, in
    order."""
    failed = 0
    while len(texts) > 1:
        pairs = [texts[i : i + 2] for i in range(0, len(texts), 2)]
        joined = await asyncio.gather(
            *(combine(*p) if len(p) == 2 else _alone(p[0]) for p in pairs)
        )
        failed += sum(text is None for text in joined)
        texts = [
            text if text is not None else "\n\n".join(pair)
            for pair, text in zip(pairs, joined, strict=True)
        ]
    return texts[0], failed


async def _alone(text: str) -> str:
    return text


async def synthesise(
    plan: Plan, results: dict[int, str | None], combine: Combine | None = None
) -> Synthesis:
    """`results`: task id -> its result, or None when it has none (the output tasks, or, for an
    assembly, the tasks its template names, are the ones used)."""
    order = plan.output_ids()
    present = [(i, text) for i in order if (text := results.get(i)) is not None]
    missing = [i for i in order if results.get(i) is None]
    note = _missing_note(missing)
    if plan.synthesis == "assembly":
        return _assembled(plan, results)
    if not present:
        return Synthesis("", False, note or "no output task finished")
    if plan.synthesis == "vote":
        return _voted(plan, present, len(order), note)
    texts = [text.strip() for _, text in present]
    if plan.synthesis == "reduce" and combine is not None and len(texts) > 1:
        answer, failed = await _fold(texts, combine)
        extra = (
            f"{failed} combine call{'s' if failed > 1 else ''} failed: those results are joined as"
            " they are"
            if failed
            else ""
        )
        return Synthesis(answer.strip(), not missing, "; ".join(x for x in (note, extra) if x))
    return Synthesis("\n\n".join(texts), not missing, note)


def _assembled(plan: Plan, results: dict[int, str | None]) -> Synthesis:
    """The template with each `${N}` replaced by task N's result (a missing one said in its
    place)."""
    filled = PLACEHOLDER.sub(
        lambda m: str(
            results.get(int(m.group(1) or m.group(2)))
            or f"[missing: task {m.group(1) or m.group(2)}]"
        ),
        plan.template,
    )
    gaps = [
        i
        for i in dict.fromkeys(int(a or b) for a, b in PLACEHOLDER.findall(plan.template))
        if results.get(i) is None
    ]
    return Synthesis(filled.strip(), not gaps, _missing_note(gaps))


def _voted(plan: Plan, present: list[tuple[int, str]], asked: int, note: str) -> Synthesis:
    """The answer the output tasks agree on by the plan's quorum, with the rule it was held to."""
    valid = len(present)
    winner, votes = tally([text for _, text in present], quorum(asked, plan.min_votes))
    shortfall = quorum_shortfall(valid, asked, plan.min_votes)
    rule = {
        "quorum": quorum(asked, plan.min_votes),
        "valid_votes": valid,
        "asked": asked,
        "quorum_met": not shortfall,
    }
    if shortfall or winner is None:
        why = shortfall or f"no answer reached {quorum(asked, plan.min_votes)} of {asked} votes"
        return Synthesis("", False, "; ".join(x for x in (why, note) if x), votes, rule)
    answer = next(text for _, text in present if tally([text], 1)[0] == winner)
    return Synthesis(answer.strip(), True, note, votes, rule)
