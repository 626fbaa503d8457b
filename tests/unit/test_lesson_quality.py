"""Lessons worth keeping: the issue's six junk lessons rejected with reasons, a labelled set of 110,
the learn graph keeping rejected lessons with their reason, and a gate that no longer accepts a tie
without signal.
"""

from __future__ import annotations

import json
from pathlib import Path

from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from parallax.graphs.learn import builder
from parallax.logic.gate_decision import gate_verdict, paired_changes
from parallax.logic.lesson_quality import (
    BARE_NUMBER,
    NARRATIVE,
    UNGROUNDED,
    VERDICT,
    check_lesson,
    form_problem,
)
from parallax.runtime.storage.stores import playbooks_in
from testkit.scripted_model import asked_for, scripted
from tests.unit.test_learn_graph import LESSON, bag_of_words, learning_script, tasks

LABELLED = Path(__file__).resolve().parents[2] / "bench" / "data" / "lessons_dev.jsonl"
FORMULA_TASK = (
    "Use formula Inventory Turnover to answer the question. Formula: Inventory Turnover = Cost of"
    ' Goods Sold / Average Inventory. Question: "An artisanal soap maker had costs amounting to'
    " $75,000 for goods sold and an average inventory of $15,000. Compute the Inventory Turnover"
    ' figure."'
)

ISSUE_SIX = {
    "The solution is incorrect": VERDICT,
    "1.8%": BARE_NUMBER,
    (
        "This update brings with it several new features that have been added to the current"
        " version…"
    ): NARRATIVE,
    "The answer given was wrong.": VERDICT,
    "$3,120.50": BARE_NUMBER,
    "I calculated the ratio and the company looked healthy this year.": NARRATIVE,
}


def test_the_six_junk_lessons_are_rejected_with_their_reasons():
    for lesson, reason in ISSUE_SIX.items():
        verdict = check_lesson(lesson, FORMULA_TASK)
        assert not verdict.ok and verdict.reason == reason, (lesson, verdict)


def test_grounded_instructions_pass_and_ungrounded_ones_do_not():
    good = check_lesson(
        "Inventory turnover = cost of goods sold / average inventory; round to 2 decimals.",
        FORMULA_TASK,
    )
    assert good.ok and {"invent", "turnov", "averag"} <= set(good.shared_terms)
    off = check_lesson("Always double-check your arithmetic before answering.", FORMULA_TASK)
    assert not off.ok and off.reason.startswith(UNGROUNDED)
    assert (
        form_problem("Tag the stated interest rate as DebtInstrumentInterestRateStatedPercentage.")
        == ""
    )
    assert (
        form_problem("When the question gives cost of goods sold, divide it by average inventory.")
        == ""
    )


def test_on_the_labelled_set_most_junk_is_rejected_and_most_grounded_lessons_kept():
    rows = [json.loads(line) for line in LABELLED.read_text().splitlines()]
    junk = [r for r in rows if r["label"] == "junk"]
    keep = [r for r in rows if r["label"] == "keep"]
    assert len(rows) >= 100 and len(junk) == len(keep)
    junk_rejected = sum(not check_lesson(r["lesson"], r["task"]).ok for r in junk) / len(junk)
    keep_kept = sum(check_lesson(r["lesson"], r["task"]).ok for r in keep) / len(keep)
    print(
        json.dumps(
            {
                "lessons": len(rows),
                "junk_rejected": round(junk_rejected, 3),
                "grounded_kept": round(keep_kept, 3),
            }
        )
    )
    assert junk_rejected >= 0.95 and keep_kept >= 0.95


def test_the_learn_graph_keeps_rejected_lessons_with_the_reason():
    def script(prompt, t, i):
        if asked_for() == "Reflection":
            return json.dumps(
                {
                    "diagnosis": "wrong",
                    "lessons": ["The solution is incorrect", "1.8%", LESSON],
                    "item_tags": [],
                }
            )
        return learning_script(lambda p: "2.0")(prompt, t, i)

    async def main():
        store = InMemoryStore()
        ctx, calls = scripted(script, embedder=bag_of_words)
        out = await builder.compile(store=store).ainvoke(
            {"tasks": tasks(1), "batch": 1, "mode": "direct"}, context=ctx
        )
        return store, calls, out

    import asyncio

    store, calls, out = asyncio.run(main())
    curator = [p for p, _ in calls if "You turn lessons into playbook entries" in p]
    assert (
        curator
        and "1.8%" not in curator[0]
        and "The solution is incorrect" not in curator[0]
        and LESSON in curator[0]
    )
    held = asyncio.run(playbooks_in(store).quarantined("default"))
    assert sorted((q["text"], q["reason"], q["source"]) for q in held) == [
        ("1.8%", BARE_NUMBER, "lesson check"),
        ("The solution is incorrect", VERDICT, "lesson check"),
    ]
    assert out["batches"][0]["quarantined"] == 2


def test_gate_verdicts_on_ties_without_signal():
    assert gate_verdict(0.0, 0.0, 50, 0.0)[0:2] == (
        "ask",
        "a tie without signal: validation accuracy was 0.0 before and after",
    )
    verdict, reason, band = gate_verdict(0.5, 0.52, 50, 0.0, (3, 2))
    assert (
        verdict == "ask" and "inside the noise" in reason and band == round(1.96 * 5**0.5 / 50, 4)
    )
    assert (
        gate_verdict(0.5, 0.6, 50, 0.0, (5, 0))[0] == "accept"
    )  # 5 fixed, none broken: 0.1 > 0.0877
    assert gate_verdict(0.6, 0.5, 50, 0.0, (0, 5))[0:2] == (
        "reject",
        "validation accuracy fell from 0.6 to 0.5",
    )
    assert paired_changes(
        {"a": True, "b": False, "c": False}, {"a": False, "b": True, "c": True, "d": True}
    ) == (2, 1)


def validation_script(val_answer):
    """Training runs teach LESSON; validation runs answer `val_answer(prompt)`."""
    return learning_script(val_answer)


async def test_the_gate_turns_down_a_tie_at_zero_unless_a_person_approves():
    store = InMemoryStore()
    ctx, _ = scripted(
        validation_script(lambda p: "9.9"), embedder=bag_of_words
    )  # every run wrong: 0.0 -> 0.0
    out = await builder.compile(store=store).ainvoke(
        {"tasks": tasks(2), "val_tasks": tasks(3), "batch": 2, "mode": "direct"}, context=ctx
    )
    batch = out["batches"][0]
    assert out["accepted"] is False and batch["accepted"] is False
    assert (
        batch["reason"] == "a tie without signal: validation accuracy was 0.0 before and after: "
        "a person must approve it (--approve)"
    )
    assert (await playbooks_in(store).candidates("default"))[0].reason == batch["reason"]

    graph = builder.compile(store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "tie"}}
    await graph.ainvoke(
        {"tasks": tasks(2), "val_tasks": tasks(3), "batch": 2, "mode": "direct", "approve": True},
        config,
        context=ctx,
    )
    question = (await graph.aget_state(config)).interrupts[0].value
    assert question["why_asked"].startswith("a tie without signal")
    out = await graph.ainvoke(Command(resume="yes"), config, context=ctx)
    assert out["accepted"] is True and out["batches"][0]["reason"].startswith(
        "approved by a person: a tie without signal"
    )
    head = await playbooks_in(store).head("default")
    assert head.gate["approved_without_signal"] is True and head.note.startswith(
        "approved by a person"
    )
