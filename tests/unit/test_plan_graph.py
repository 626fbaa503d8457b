"""The plan graph end to end with a scripted planner and scripted tasks.

Each test scripts the planner's reply (the prompt starts "You plan work as a small graph")
and answers each task by a marker in its goal, so the test decides what every call says.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import replace

import httpx
import numpy as np
import openai
import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore

from parallax.graphs.plan import builder, graph
from parallax.logic.routing import wants_plan
from parallax.logic.run_stats import run_stats
from parallax.runtime.storage.trace_store import TraceStore
from parallax.state.plan import Plan
from testkit.scripted_model import scripted

PLANNER = "You plan work as a small graph"


def answer(text: str) -> str:
    return json.dumps({"reasoning": "r", "answer": text})


def bad_request() -> openai.BadRequestError:
    response = httpx.Response(400, request=httpx.Request("POST", "http://model.test"))
    return openai.BadRequestError("status 400", response=response, body=None)


def task(i: int, goal: str, **fields) -> dict:
    return {"id": i, "goal": goal, **fields}


def script_for(plans, replies: dict[str, object], log: list | None = None):
    """Planner replies from `plans` (a list used in order, the last repeated); a task call answers
    with the value of the first marker found in its prompt (text, exception, (delay, text) or a
    callable).
    """
    planned = iter(plans)
    last: list = []

    def script(prompt, t, i):
        if prompt.startswith(PLANNER):
            last[:] = [next(planned, last[0] if last else None)]
            return json.dumps(last[0]) if isinstance(last[0], dict) else last[0]
        for marker, reply in replies.items():
            if marker in prompt:
                if log is not None:
                    log.append((marker, time.monotonic()))
                return reply(prompt, t) if callable(reply) else reply
        return answer("unscripted")

    return script


async def run(
    plans,
    replies,
    *,
    request="First compute the total, then write a summary.",
    log=None,
    ctx_fields=None,
    **state,
):
    ctx, calls = scripted(script_for(plans, replies, log), **(ctx_fields or {}))
    out = await graph.ainvoke({"task": request, "mode": "plan", **state}, context=ctx)
    return out, calls


def tasks_of(out: dict) -> dict[int, dict]:
    last = max(t["round"] for t in out["tasks"])
    return {t["id"]: t for t in out["tasks"] if t["round"] == last}


def test_auto_recognises_requests_with_several_steps():
    assert wants_plan("1. Summarise the report\n2. List the risks\n3. Draft an email")
    assert wants_plan("Compute the total cost, then write a one-line summary for the board.")
    assert not wants_plan("What is 6 * 7?")
    assert not wants_plan("Write a haiku about caching.")


async def test_auto_without_several_steps_answers_without_a_planner():
    ctx, calls = scripted(lambda p, t, i: answer("42"))
    out = await graph.ainvoke({"task": "What is 6 * 7?", "mode": "auto", "votes": 3}, context=ctx)
    assert out["mode"] == "vote" and out["status"] == "ok" and out["answer"] == "42"
    assert not any(prompt.startswith(PLANNER) for prompt, _ in calls)


async def test_a_bad_plan_is_reasked_inside_the_planning_branch_then_runs():
    cyclic = {"tasks": [task(1, "alpha", deps=[2]), task(2, "beta", deps=[1])]}
    good = {"tasks": [task(1, "alpha"), task(2, "beta", deps=[1])]}
    out, calls = await run([cyclic, good], {"alpha": answer("A"), "beta": answer("B")})
    planners = [b for b in out["branches"] if b["kind"] == "plan"]
    assert len(planners) == 1 and planners[0]["reasks"] == 1 and planners[0]["status"] == "ok"
    second_ask = [p for p, _ in calls if p.startswith(PLANNER)][1]
    assert "cycle" in second_ask and "a task cannot wait for its own result" in second_ask
    assert out["status"] == "ok" and out["mode"] == "plan" and out["answer"] == "B"


async def test_a_plan_still_bad_falls_back_to_direct_with_the_checkers_message_and_never_spins():
    unknown = {"tasks": [task(1, "alpha", deps=[7])]}
    out, calls = await run(
        [unknown], {"Write": answer("direct answer"), "compute": answer("direct answer")}
    )
    assert sum(p.startswith(PLANNER) for p, _ in calls) == 3  # one ask, two re-asks, no more
    assert out["mode"] == "direct" and out["answer"] == "direct answer"
    assert "no valid plan" in out["reason"] and "task 1 depends on unknown task 7" in out["reason"]
    planner = next(b for b in out["branches"] if b["kind"] == "plan")
    assert planner["status"] == "failed" and "depends on unknown task 7" in planner["error"]


async def test_tasks_start_when_their_dependencies_finish_not_when_their_level_does():
    log: list = []
    dag = {
        "tasks": [
            task(1, "slow-one"),
            task(2, "fast-two"),
            task(3, "fast-three after $2", deps=[2]),
            task(4, "join-four $1 $3", deps=[1, 3]),
        ]
    }
    started = time.monotonic()
    out, calls = await run(
        [dag],
        {
            "slow-one": (0.4, answer("S")),
            "fast-two": (0.05, answer("F2")),
            "fast-three": (0.05, answer("F3")),
            "join-four": answer("J"),
        },
        log=log,
    )
    first = {marker: at - started for marker, at in reversed(log)}
    assert first["fast-three"] < first["slow-one"] + 0.3, (
        "task 3 waited for task 1, which is only on its level"
    )
    assert (
        first["join-four"] >= first["slow-one"] + 0.35
    )  # and task 4 did wait for its dependency 1
    prompt_4 = next(p for p, _ in calls if "join-four" in p)
    assert (
        "join-four S F3" in prompt_4 and "F2" not in prompt_4
    )  # only its own dependencies' results
    assert out["status"] == "ok" and [t["status"] for t in tasks_of(out).values()] == ["DONE"] * 4


async def test_the_cap_is_shared_and_the_longest_remaining_path_goes_first():
    log: list = []
    dag = {
        "tasks": [
            task(1, "leaf-alpha"),
            task(2, "leaf-beta"),
            task(3, "chain-gamma"),
            task(4, "chain-delta", deps=[3]),
            task(5, "chain-epsilon", deps=[4]),
        ]
    }
    markers = ("leaf-alpha", "leaf-beta", "chain-gamma", "chain-delta", "chain-epsilon")
    out, _ = await run(
        [dag], {m: (0.03, answer(m)) for m in markers}, log=log, ctx_fields={"max_concurrency": 1}
    )
    order = [marker for marker, _ in log]
    # whoever took the one free slot first, the next slot went to the head of the longest chain
    assert order.index("chain-gamma") < max(order.index("leaf-alpha"), order.index("leaf-beta"))
    spans = sorted(
        (t["started_at"], t["started_at"] + t["seconds"]) for t in tasks_of(out).values()
    )
    assert all(
        end <= start + 0.005 for (_, end), (start, _) in zip(spans, spans[1:], strict=False)
    )  # one at a time
    assert out["status"] == "ok"


async def test_placeholders_fill_several_results_into_one_input():
    dag = {
        "tasks": [
            task(1, "How many eggs in four dozen?", kind="vote"),
            task(2, "How many legs has a spider?"),
            task(
                3,
                "add",
                kind="tool",
                deps=[1, 2],
                inputs={"tool": "calc", "expression": "${1}+${2}"},
            ),
        ],
        "synthesis": "assembly",
        "template": "Total: ${3} (from $1 and $2)",
        "outputs": [3],
    }
    out, _ = await run([dag], {"eggs": answer("forty-eight"), "spider": answer("8")}, votes=3)
    assert out["answer"] == "Total: 56 (from forty-eight and 8)"
    assert out["status"] == "ok" and tasks_of(out)[3]["output"] == "56"
    assert out["confidence"] == round(
        (1.0 + 0.5 + 1.0) / 3, 3
    )  # 3 agreeing votes, one unchecked answer, exact tool


async def test_a_failed_required_task_skips_its_dependants_and_the_run_needs_review():
    dag = {
        "tasks": [
            task(1, "works-one"),
            task(2, "breaks-two"),
            task(3, "after-three $2", deps=[2]),
            task(4, "beside-four $1", deps=[1]),
        ],
        "outputs": [3, 4],
    }
    out, calls = await run(
        [dag],
        {
            "works-one": answer("W"),
            "breaks-two": bad_request(),
            "after-three": answer("never"),
            "beside-four": answer("B4"),
        },
        max_replans=0,
    )
    tasks = tasks_of(out)
    assert tasks[2]["status"] == "FAILED" and tasks[3]["status"] == "SKIPPED"
    assert tasks[3]["reason"].startswith("dependency 2 failed")
    assert not any("after-three" in p for p, _ in calls)
    assert (
        tasks[4]["status"] == "DONE" and out["answer"] == "B4"
    )  # the joiner works with what finished
    assert out["status"] == "needs_review" and "required task 2 failed" in out["reason"]
    assert out["verification"]["rules"]["required_missing"] == [2, 3]


async def test_an_optional_dependency_that_failed_does_not_stop_its_dependant():
    dag = {"tasks": [task(1, "extra-one", optional=True), task(2, "main-two using $1", deps=[1])]}
    out, calls = await run(
        [dag], {"extra-one": bad_request(), "main-two": answer("M")}, max_replans=0
    )
    assert tasks_of(out)[2]["status"] == "DONE"
    assert "(no result: task 1 failed)" in next(p for p, _ in calls if "main-two" in p)
    assert out["status"] == "ok" and "optional task 1 failed" in out["reason"]


async def test_an_identical_replan_stops_at_once():
    dag = {"tasks": [task(1, "breaks-one")]}
    out, calls = await run([dag], {"breaks-one": bad_request()}, max_replans=3)
    assert sum(p.startswith(PLANNER) for p, _ in calls) == 2
    assert out["status"] == "failed" and "same as the plan before" in out["reason"]


async def test_replans_are_bounded_and_reuse_finished_tasks():
    first = {
        "tasks": [task(1, "keeps-one"), task(2, "breaks-two"), task(3, "joins $1 $2", deps=[1, 2])]
    }
    second = {
        "tasks": [
            task(1, "keeps-one"),
            task(2, "breaks-again"),
            task(3, "joins $1 $2", deps=[1, 2]),
        ]
    }
    third = {
        "tasks": [
            task(1, "keeps-one"),
            task(2, "breaks-a-third-time"),
            task(3, "joins $1 $2", deps=[1, 2]),
        ]
    }
    out, calls = await run(
        [first, second, third],
        {"keeps-one": answer("K"), "breaks": bad_request(), "joins": answer("never")},
        max_replans=1,
    )
    assert sum(p.startswith(PLANNER) for p, _ in calls) == 2  # max_replans=1: one replan
    assert (
        sum("keeps-one" in p and not p.startswith(PLANNER) for p, _ in calls) == 1
    )  # run once, then reused
    assert tasks_of(out)[1]["reused_from_round"] == 0
    replan_prompt = [p for p, _ in calls if p.startswith(PLANNER)][1]
    assert "task 2 (FAILED)" in replan_prompt and "Do not repeat the same plan" in replan_prompt
    assert out["status"] == "needs_review"


async def test_replan_that_works_finishes_ok():
    first = {"tasks": [task(1, "breaks-one")]}
    second = {"tasks": [task(1, "works-one")]}
    out, _ = await run([first, second], {"breaks-one": bad_request(), "works-one": answer("fine")})
    assert out["status"] == "ok" and out["answer"] == "fine"
    assert [(t["round"], t["status"]) for t in out["tasks"]] == [(0, "FAILED"), (1, "DONE")]


@pytest.mark.parametrize(
    "policy, judge_choice, status, value",
    [
        ("append", None, "ok", "left\n\nright"),
        ("keep_both", None, "ok", ["left", "right"]),
        ("conflict", "right", "ok", "right"),
        ("conflict", "neither", "needs_review", None),
    ],
)
async def test_two_tasks_writing_one_board_key_in_one_superstep(
    policy, judge_choice, status, value
):
    dag = {
        "tasks": [task(1, "write-left", key="summary"), task(2, "write-right", key="summary")],
        "board_policy": policy,
    }
    replies = {
        "write-left": (0.02, answer("left")),
        "write-right": (0.02, answer("right")),
        "Candidate answers": json.dumps({"choice": judge_choice or "", "reason": "r"}),
    }
    out, _ = await run([dag], replies)
    spans = [(t["started_at"], t["started_at"] + t["seconds"]) for t in tasks_of(out).values()]
    assert (
        spans[0][0] < spans[1][1] and spans[1][0] < spans[0][1]
    )  # both ran, and wrote, at the same time
    assert out["board"]["summary"]["value"] == value
    assert out["status"] == status
    if status == "needs_review":
        assert "board key 'summary' holds conflicting results" in out["reason"]


async def test_vote_synthesis_below_quorum_needs_review():
    dag = {"tasks": [task(i, f"answer-{i} What is 6 * 7?") for i in (1, 2, 3)], "synthesis": "vote"}
    out, _ = await run(
        [dag],
        {"answer-1": answer("forty-two"), "answer-2": bad_request(), "answer-3": bad_request()},
        max_replans=0,
    )
    assert (
        out["status"] == "needs_review"
        and "only 1 of 3 votes were valid, below the quorum of 2" in out["reason"]
    )
    assert out["verification"]["rules"]["vote"] == {
        "quorum": 2,
        "valid_votes": 1,
        "asked": 3,
        "quorum_met": False,
    }
    fine, _ = await run(
        [dag],
        {"answer-1": answer("forty-two"), "answer-2": answer("42."), "answer-3": bad_request()},
        max_replans=0,
    )
    assert fine["vote_counts"] == {"42": 2} and fine["answer"] == "forty-two"


async def test_reduce_folds_pairwise_one_combine_call_per_pair():
    dag = {"tasks": [task(i, f"part-{i}") for i in (1, 2, 3, 4)], "synthesis": "reduce"}

    def combine(prompt, t):
        first = prompt.split("First result:\n")[1].split("\n\nSecond result:")[0]
        second = prompt.split("Second result:\n")[1]
        return answer(f"{first}+{second}")

    out, calls = await run(
        [dag],
        {
            "Combine two partial results": combine,
            **{f"part-{i}": answer(f"P{i}") for i in (1, 2, 3, 4)},
        },
    )
    assert out["answer"] == "P1+P2+P3+P4"
    assert sum("Combine two partial results" in p for p, _ in calls) == 3
    assert all(
        p.count("result:") == 2 for p, _ in calls if "Combine" in p
    )  # never more than two at once


DOCUMENT = "\n\n".join(
    f"## Part {n}\n" + f"The {n} team reported revenue of {r} million this year. " * 30
    for n, r in (("north", 12), ("south", 9))
)


async def test_facts_and_semantics_layers_in_a_plan(monkeypatch):
    monkeypatch.setenv("PARALLAX_SLICE_CHARS", "1500")

    def slice_reply(prompt, t):
        team = "north" if "The north team reported" in prompt else "south"
        return json.dumps(
            {
                "relevant": True,
                "points": [
                    {"quote": f"The {team} team reported revenue", "point": f"{team} revenue rose"},
                    {"quote": "invented words that are nowhere", "point": "made up"},
                ],
            }
        )

    def embed(texts):
        vectors = np.array([[1.0, 0.1 * len(t)] for t in texts])
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    dag = {
        "tasks": [
            task(1, "What did the north team report?", kind="section"),
            task(2, "What did the south team report?", kind="section"),
        ]
    }
    out, calls = await run(
        [dag],
        {
            "Finding A": json.dumps({"reason": "one rose, one fell", "contradicts": True}),
            "You read part": slice_reply,
        },
        request=DOCUMENT,
        question="First read the north part, then the south part.",
        ctx_fields={"embedder": embed, "plan_contradiction_pairs": 2},
    )
    facts = out["verification"]["facts"]
    assert facts["verified"] == facts["dropped"] > 0 and facts["share_verified"] == 0.5
    semantics = out["verification"]["semantics"]
    assert 0 < semantics["judged"] <= 2 and semantics["flagged"]
    assert sum("Finding A" in p for p, _ in calls) == semantics["judged"]
    assert out["status"] == "needs_review" and "contradict each other" in out["reason"]
    assert "made up" not in out["answer"]


async def test_a_resumed_plan_redoes_no_finished_task():
    saver, store = InMemorySaver(), InMemoryStore()
    app = builder.compile(checkpointer=saver, store=store)
    dag = {
        "tasks": [
            task(1, "quick-one"),
            task(2, "quick-two"),
            task(3, "slow-three"),
            task(4, "last $1 $2 $3", deps=[1, 2, 3]),
        ]
    }
    ctx, calls = scripted(
        script_for(
            [dag],
            {
                "quick-one": answer("1"),
                "quick-two": answer("2"),
                "slow-three": (5.0, answer("3")),
                "last": answer("4"),
            },
        )
    )
    config = {"configurable": {"thread_id": "plan-kill"}}
    running = asyncio.create_task(
        app.ainvoke(
            {"task": "Do one, then two.", "mode": "plan"}, config, context=ctx, durability="sync"
        )
    )
    while sum("quick" in p for p, _ in calls) < 2:
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.2)
    running.cancel()  # the process "dies" while task 3 runs
    with pytest.raises(asyncio.CancelledError):
        await running
    fast_ctx, fast_calls = scripted(
        script_for(
            [dag], {"quick": answer("again"), "slow-three": answer("3"), "last": answer("4")}
        )
    )
    out = await app.ainvoke(None, config, context=fast_ctx, durability="sync")
    assert not any("quick" in p for p, _ in fast_calls)  # finished tasks were not run again
    assert not any(p.startswith(PLANNER) for p, _ in fast_calls)  # nor was the plan
    assert out["status"] == "ok" and tasks_of(out)[4]["output"] == "4"
    assert "last 1 2 3" in next(p for p, _ in fast_calls if "last" in p)


async def test_bad_caller_plan_is_refused_before_any_model_call():
    ctx, calls = scripted(lambda p, t, i: answer("x"))
    with pytest.raises(ValueError, match="task 2 uses \\$1 but does not list 1 in deps"):
        await graph.ainvoke(
            {"task": "x", "mode": "plan", "plan": {"tasks": [task(1, "a"), task(2, "b $1")]}},
            context=ctx,
        )
    assert calls == []


async def test_concurrency_context_field_is_the_cap():
    dag = {"tasks": [task(i, f"t-{i}") for i in range(1, 7)]}
    ctx, _ = scripted(script_for([dag], {f"t-{i}": (0.05, answer(str(i))) for i in range(1, 7)}))
    out = await graph.ainvoke(
        {"task": "Do 1, then do 2.", "mode": "plan"}, context=replace(ctx, max_concurrency=2)
    )
    spans = [(t["started_at"], t["started_at"] + t["seconds"]) for t in tasks_of(out).values()]
    most = max(
        sum(s <= at < e - 0.002 for s, e in spans) for at, _ in spans
    )  # times are kept to the millisecond
    assert most == 2


async def test_a_second_run_on_a_thread_plans_afresh_and_reports_only_itself():
    """A thread keeps its state between runs (Studio, the API): the second request must get its own
    plan, not a replan of the first, and its tasks, board and branches must not include the first
    run's.
    """
    app = builder.compile(checkpointer=InMemorySaver(), store=InMemoryStore())
    first = {"tasks": [task(1, "alpha-one"), task(2, "alpha-two $1", deps=[1])]}
    second = {"tasks": [task(1, "beta-one")]}
    ctx, calls = scripted(
        script_for(
            [first, second],
            {"alpha-one": answer("A1"), "alpha-two": answer("A2"), "beta-one": answer("B1")},
        )
    )
    config = {"configurable": {"thread_id": "plan-twice"}}
    out1 = await app.ainvoke(
        {"task": "First do alpha, then summarise it.", "mode": "plan"}, config, context=ctx
    )
    assert out1["status"] == "ok" and out1["answer"] == "A2"
    out2 = await app.ainvoke({"task": "First do beta, then stop there."}, config, context=ctx)
    planner_prompts = [p for p, _ in calls if p.startswith(PLANNER)]
    assert (
        len(planner_prompts) == 2 and "alpha" not in planner_prompts[1]
    )  # a first plan, not a replan of alpha
    assert out2["plan"] == Plan.model_validate(second).model_dump() and out2["status"] == "ok"
    assert [(t["round"], t["id"], t["output"]) for t in out2["tasks"]] == [(0, 1, "B1")]
    assert set(out2["board"]) == {"1"} and out2["board"]["1"]["value"] == "B1"
    assert out2["answer"] == "B1" and out2["trace_id"] != out1["trace_id"]
    assert not any("alpha" in json.dumps(b) for b in out2["branches"])
    # a caller's plan on the same thread is run as given; then a request without one is planned
    # again
    given = {"tasks": [task(1, "gamma-one")]}
    ctx3, calls3 = scripted(
        script_for([second], {"gamma-one": answer("G1"), "beta-one": answer("B1")})
    )
    out3 = await app.ainvoke({"task": "Run my plan.", "plan": given}, config, context=ctx3)
    assert out3["answer"] == "G1" and not any(p.startswith(PLANNER) for p, _ in calls3)
    out4 = await app.ainvoke({"task": "First do beta, then stop there."}, config, context=ctx3)
    assert out4["answer"] == "B1" and sum(p.startswith(PLANNER) for p, _ in calls3) == 1
    assert [(t["id"], t["output"]) for t in out4["tasks"]] == [(1, "B1")]


async def test_a_plan_run_is_one_trace_holding_its_tasks_branches_and_their_dead_letters():
    """A task's solve run is part of the plan run: no trace of its own (stats would count a 3-task
    plan as 4 runs), its branches listed in the plan's trace, an escalated one dead-lettered under
    it."""
    store = InMemoryStore()
    app = builder.compile(checkpointer=InMemorySaver(), store=store)
    dag = {
        "tasks": [
            task(1, "works-one"),
            task(2, "breaks-two", optional=True),
            task(3, "joins-three $1", deps=[1]),
        ]
    }
    ctx, _ = scripted(
        script_for(
            [dag],
            {"works-one": answer("W"), "breaks-two": bad_request(), "joins-three": answer("J")},
        )
    )
    out = await app.ainvoke(
        {"task": "Do one, then three.", "mode": "plan"},
        {"configurable": {"thread_id": "one"}},
        context=ctx,
    )
    traces = TraceStore(store, "default")
    stored = [item.value for item in await store.asearch(("traces", "default"), limit=100)]
    assert [t["trace_id"] for t in stored] == [out["trace_id"]] and stored[0]["mode"] == "plan"
    task_branches = {b["task"]: b for b in stored[0]["branches"] if "task" in b}
    assert set(task_branches) == {1, 2, 3} and task_branches[2]["state"] == "ESCALATED"
    letters = await traces.dead_letters()
    assert [(d["id"], d["trace_id"]) for d in letters] == [
        (task_branches[2]["id"], out["trace_id"])
    ]
    assert "breaks-two" in letters[0]["input"]["text"]
    assert run_stats(stored)["overall"]["runs"] == 1
    # a request the plan graph answers directly is one trace too
    direct_ctx, _ = scripted(lambda p, t, i: answer("42"))
    alone = await app.ainvoke(
        {"task": "What is 6 * 7?"}, {"configurable": {"thread_id": "two"}}, context=direct_ctx
    )
    stored = [
        item.value["trace_id"] for item in await store.asearch(("traces", "default"), limit=100)
    ]
    assert alone["answer"] == "42" and sorted(stored) == sorted(
        [out["trace_id"], alone["trace_id"]]
    )


def test_no_node_or_edge_of_a_task_runs_in_a_worker_thread():
    """LangGraph runs a sync node or edge function in a thread pool: a thread hop (and a GIL
    hand-off under load) on every solve run of every plan task. Error handlers may stay sync."""
    from parallax.graphs.solve import builder as solve_builder

    for graph_builder in (solve_builder, builder):
        sync = [
            name
            for name, spec in graph_builder.nodes.items()
            if not spec.is_error_handler and spec.runnable.func is not None
        ]
        sync += [
            name
            for edges in graph_builder.branches.values()
            for name, edge in edges.items()
            if edge.path.func is not None
        ]
        assert sync == []
