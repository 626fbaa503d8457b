"""The learn graph end to end with a scripted model and a bag-of-words embedder."""

from __future__ import annotations

import json

import pytest
from langgraph.checkpoint.memory import InMemorySaver
from langgraph.store.memory import InMemoryStore
from langgraph.types import Command

from parallax.graphs.learn import builder
from parallax.runtime.storage.stores import playbooks_in
from testkit.scripted_model import asked_for, scripted
from testkit.word_counts import word_counts

LESSON = "Current ratio = current assets / current liabilities; round to 2 decimals."
bag_of_words = word_counts(
    "current ratio assets liabilities round decimals margin gross revenue cost".split()
)


def tasks(n, target="2.0"):
    return [
        {
            "id": f"t{i}",
            "input": f"Current assets {i + 2} and liabilities {i + 1}: current ratio?",
            "target": target,
        }
        for i in range(n)
    ]


def learning_script(solve_answer):
    """Replies by what a call asks for (its schema), so an edit of a prompt's wording leaves the
    script right."""

    def script(prompt, t, i):
        if asked_for() == "Reflection":
            return json.dumps(
                {"diagnosis": "divided the wrong way", "lessons": [LESSON], "item_tags": []}
            )
        if asked_for() == "Curation":
            return json.dumps(
                {
                    "entries": [
                        {"section": "current ratio", "text": LESSON, "about": ["current ratio"]}
                    ]
                }
            )
        return json.dumps({"reasoning": "r", "answer": solve_answer(prompt)})

    return script


@pytest.fixture
def store(monkeypatch):
    return InMemoryStore()


async def test_two_batches_learn_one_lesson_and_commit_two_versions(store, monkeypatch):
    model_ctx, calls = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    graph = builder.compile(store=store)
    out = await graph.ainvoke(
        {"tasks": tasks(4), "batch": 2, "mode": "direct", "playbook": "fin"}, context=model_ctx
    )
    assert (out["from_version"], out["to_version"], out["accepted"]) == (0, 2, True)
    assert [b["reflections"] for b in out["batches"]] == [2, 2]
    assert [b["items_total"] for b in out["batches"]] == [1, 1]
    head = await playbooks_in(store).head("fin")
    assert head.version == 2 and len(head.active) == 1
    item = head.active[0]
    assert (
        item.text == LESSON and len(item.provenance) == 8
    )  # 4 reflections x (reflection id, trace id)
    # batch 2 ran with the lesson in its prompts
    solve_prompts = [p for p, _ in calls if "You solve tasks carefully" in p]
    assert sum(item.id in p for p in solve_prompts) == 2


async def test_gate_rejects_a_candidate_that_makes_validation_worse(store, monkeypatch):
    # correct without lessons, wrong once a lesson is in the prompt
    model_ctx, _ = scripted(
        learning_script(lambda p: "7.5" if "Lessons from earlier runs" in p else "2.0"),
        embedder=bag_of_words,
    )
    graph = builder.compile(store=store)
    out = await graph.ainvoke(
        {"tasks": tasks(2), "val_tasks": tasks(3), "batch": 2, "mode": "direct"}, context=model_ctx
    )
    assert out["val_accuracy_before"] == 1.0
    assert out["accepted"] is False and out["to_version"] == 0
    assert (
        out["batches"][0]["accepted"] is False
        and "fell from 1.0 to 0.0" in out["batches"][0]["reason"]
    )
    playbooks = playbooks_in(store)
    assert (await playbooks.head("default")).version == 0
    assert len(await playbooks.candidates("default")) == 1


async def test_approve_pauses_for_a_human_and_no_keeps_the_head(store, monkeypatch):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    graph = builder.compile(store=store, checkpointer=InMemorySaver())
    config = {"configurable": {"thread_id": "approve-1"}}
    await graph.ainvoke(
        {"tasks": tasks(2), "batch": 2, "mode": "direct", "approve": True},
        config,
        context=model_ctx,
    )
    state = await graph.aget_state(config)
    assert state.interrupts and [i["text"] for i in state.interrupts[0].value["diff"]["added"]] == [
        LESSON
    ]
    out = await graph.ainvoke(Command(resume="no"), config, context=model_ctx)
    assert (
        out["accepted"] is False and out["batches"][0]["reason"] == "rejected by a human reviewer"
    )
    assert (await playbooks_in(store).head("default")).version == 0


async def test_bad_learn_input_is_refused(store, monkeypatch):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    with pytest.raises(ValueError, match="batch must be a whole number from 1 to 1000, got 0"):
        await builder.compile(store=store).ainvoke(
            {"tasks": tasks(1), "batch": 0}, context=model_ctx
        )
    with pytest.raises(ValueError, match="no training tasks"):
        await builder.compile(store=store).ainvoke({"tasks": []}, context=model_ctx)


async def test_epochs_past_the_bound_are_refused_by_the_graph_itself_before_any_model_call(store):
    """The learn graph's first node holds the input's bounds too: a caller of the compiled graph in
    process (no face, no check_run_input) cannot start 100,000,000 epochs either."""
    model_ctx, calls = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    graph = builder.compile(store=store)
    for epochs, says in (
        (100_000_000, "epochs must be a whole number from 1 to 100, got 100000000"),
        (101, "epochs must be a whole number from 1 to 100, got 101"),
    ):
        with pytest.raises(ValueError, match=says):
            await graph.ainvoke(
                {"tasks": tasks(1), "epochs": epochs}, {"recursion_limit": 12}, context=model_ctx
            )
    assert calls == [] and (await playbooks_in(store).head("default")).version == 0


async def test_a_learn_run_keeps_nothing_per_epoch_and_still_runs_every_epoch(store):
    """What the run keeps in its state after planning is the same for 1 epoch and for 100 (the
    batches are worked out when they start: logic/learn_schedule.py); and 3 epochs of 3 tasks in
    batches of 2 run the 9 task runs in order, in 5 batches."""
    model_ctx, calls = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    graph = builder.compile(store=store, checkpointer=InMemorySaver(), interrupt_after=["start"])
    kept = {}
    for epochs in (1, 100):
        config = {"configurable": {"thread_id": f"epochs-{epochs}"}}
        await graph.ainvoke(
            {"tasks": tasks(3), "epochs": epochs, "mode": "direct"}, config, context=model_ctx
        )
        values = (await graph.aget_state(config)).values
        kept[epochs] = len(
            json.dumps({k: v for k, v in values.items() if k not in ("epochs", "learn_run_id")})
        )
    assert kept[1] == kept[100], kept
    out = await builder.compile(store=store).ainvoke(
        {"tasks": tasks(3), "epochs": 3, "batch": 2, "mode": "direct"}, context=model_ctx
    )
    assert [b["reflections"] for b in out["batches"]] == [2, 2, 2, 2, 1]


async def test_guard_fires_loudly_when_a_batch_yields_too_few_lessons(store, monkeypatch, caplog):
    # four reflections, one shared lesson: a yield of 1/4 is below a floor of 0.5 per reflection
    monkeypatch.setenv("PARALLAX_GUARD_FLOOR", "0.5")
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    with caplog.at_level("WARNING", logger="parallax.learn"):
        out = await builder.compile(store=store).ainvoke(
            {"tasks": tasks(4), "batch": 4, "mode": "direct"}, context=model_ctx
        )
    assert out["batches"][0]["guard_triggered"] is True
    assert any(
        "fewer than PARALLAX_GUARD_FLOOR" in r.message and "redoing the merge" in r.message
        for r in caplog.records
    )
    assert out["batches"][0]["items_total"] == 1  # the redo cannot invent lessons either


async def test_guard_stays_quiet_at_the_default_floor(store, monkeypatch):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    out = await builder.compile(store=store).ainvoke(
        {"tasks": tasks(4), "batch": 4, "mode": "direct"}, context=model_ctx
    )
    assert out["batches"][0]["guard_triggered"] is False


async def test_a_batch_without_lessons_commits_no_version_and_skips_the_gate(store, monkeypatch):
    def script(prompt, t, i):
        if asked_for() == "Reflection":
            return json.dumps({"diagnosis": "fine", "lessons": [], "item_tags": []})
        return json.dumps({"reasoning": "r", "answer": "2.0"})

    model_ctx, calls = scripted(script, embedder=bag_of_words)
    out = await builder.compile(store=store).ainvoke(
        {"tasks": tasks(2), "val_tasks": tasks(3), "batch": 2, "mode": "direct"}, context=model_ctx
    )
    assert out["to_version"] == 0 and out["batches"][0]["accepted"] is False
    assert out["batches"][0]["reason"].startswith("no operations")
    assert (
        len([p for p, _ in calls if "You solve tasks carefully" in p]) == 2 + 3
    )  # train runs + one baseline eval
    assert await playbooks_in(store).candidates("default") == []


async def test_on_the_server_each_task_run_of_a_learn_run_keeps_its_own_trace_id(
    store, monkeypatch
):
    """With a server run id in the config, trace ids are derived, not random (runtime/run_context.py
    `task_scoped_id`, so a takeover writes the same trace): the task runs of one learn run still get
    one each, and each batch commits its own version (its commit key names the batch)."""
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    graph = builder.compile(store=store, checkpointer=InMemorySaver())
    config = {
        "configurable": {"thread_id": "th-1", "run_id": "3f0c2a9e-0000-4000-8000-000000000001"}
    }
    out = await graph.ainvoke(
        {"tasks": tasks(4), "batch": 2, "mode": "direct", "playbook": "fin"},
        config,
        context=model_ctx,
    )
    assert (out["from_version"], out["to_version"], out["accepted"]) == (0, 2, True)
    head = await playbooks_in(store).head("fin")
    traces = {p for p in head.active[0].provenance if len(p) == 32}
    assert len(traces) == 4, head.active[0].provenance  # 4 task runs, 4 trace ids
    history = await playbooks_in(store).history("fin")
    assert len({v.gate["commit_key"] for v in history}) == 2


async def test_a_learn_run_started_anew_by_a_takeover_writes_no_second_trace(store, monkeypatch):
    """A replica that takes a run over and finds no checkpoint runs it from the start (a database
    restart lost the checkpoints, the fault test's case): its task runs and evaluations, solve
    graphs called from nodes, get the trace ids the first execution's got, so the store holds each
    trace once, not twice."""
    model_ctx, _ = scripted(
        learning_script(lambda p: "2.0" if "Lessons from earlier runs" in p else "7.5"),
        embedder=bag_of_words,
    )
    config = {
        "configurable": {"thread_id": "th-1", "run_id": "3f0c2a9e-0000-4000-8000-000000000002"}
    }
    given = {
        "tasks": tasks(4),
        "val_tasks": tasks(8),
        "batch": 2,
        "mode": "direct",
        "playbook": "fin",
    }
    out = await builder.compile(store=store, checkpointer=InMemorySaver()).ainvoke(
        given, config, context=model_ctx
    )
    assert out["to_version"] == 1, [
        b["reason"] for b in out["batches"]
    ]  # the first batch's lesson fixed the validation runs
    first = {item.key for item in store.search(("traces", "default"), limit=100)}
    assert (
        len(first) == 4 + 8 + 2 * 8
    )  # 4 task runs, the head's and each batch's candidate's 8 validation runs
    await builder.compile(store=store, checkpointer=InMemorySaver()).ainvoke(
        given, config, context=model_ctx
    )
    assert {item.key for item in store.search(("traces", "default"), limit=100)} == first
    assert [v.version for v in await playbooks_in(store).history("fin")] == [
        1
    ]  # and the version once
