"""Fencing, offline: the hook every model call and record write awaits (runtime/lease_check.py), ids
that stay the same when a run is taken over, and playbook commits that a second execution cannot
make twice.

The fence itself (leases in PostgreSQL, a replica cut off from the database) is tested on real
processes in tests/integration/test_faults.py.
"""

from __future__ import annotations

import asyncio

import pytest
from langchain_core.messages import HumanMessage
from langgraph.store.memory import InMemoryStore
from pydantic import BaseModel

from parallax.runtime import lease_check
from parallax.runtime.storage.playbook_store import PlaybookStore, version_key
from parallax.runtime.storage.trace_store import TraceStore
from parallax.runtime.structured_call import ask
from parallax.state.playbook import Operation
from testkit.fault_server import FaultConfig, chat_log


class Answer(BaseModel):
    answer: str


@pytest.fixture
def guard():
    """A recording guard, installed for the test; `lost` makes it refuse from then on."""
    seen: list[str] = []
    state = {"lost": False, "token": {"run": "run-1", "generation": 1}}

    async def check(what: str) -> None:
        seen.append(what)
        if state["lost"]:
            raise lease_check.LeaseLost("lost")

    lease_check.install(check, lambda: state["token"])
    yield seen, state
    lease_check.install(None)


async def ask_once(**kw):
    return await ask(
        [HumanMessage("What is 6 * 7?")],
        Answer,
        model="fault-model",
        temperature=0.0,
        timeout_s=5,
        max_attempts=1,
        max_reasks=0,
        max_tokens=64,
        **kw,
    )


async def test_every_model_call_is_fenced_before_it_is_made_and_before_its_reply_is_used(
    scripted_endpoint, guard
):
    seen, state = guard
    url = scripted_endpoint(FaultConfig())
    result = await ask_once()
    assert result.value.answer == "42" and seen == ["model call", "model reply"]
    state["lost"] = True
    with pytest.raises(
        asyncio.CancelledError
    ):  # LeaseLost: the run stops as if cancelled, nothing finalizes it
        await ask_once()
    assert len(chat_log(url)) == 1  # the fenced call never reached the model


async def test_records_carry_the_lease_token_and_readers_never_see_it(guard):
    store = InMemoryStore()
    traces = TraceStore(store, "acme")
    await traces.put_trace({"trace_id": "t1", "tenant": "acme", "answer": "42"})
    raw = store.get(("traces", "acme"), "t1").value
    assert raw[lease_check.LEASE_FIELD] == {
        "run": "run-1",
        "generation": 1,
    }  # what the database trigger checks
    assert lease_check.LEASE_FIELD not in await traces.get_trace("t1")
    assert all(lease_check.LEASE_FIELD not in t for t in await traces.traces())
    playbooks = PlaybookStore(store, tenant="acme")
    v1 = await playbooks.commit(
        "fin", 0, [Operation(op="add", text="Round to 2 decimals.", section="format")], "learn-x"
    )
    assert (
        store.get(("playbooks", "acme", "fin"), version_key(1)).value[lease_check.LEASE_FIELD][
            "generation"
        ]
        == 1
    )
    assert (await playbooks.get("fin", 1)).items == v1.items and (await playbooks.history("fin"))[
        0
    ].version == 1


async def test_a_write_after_the_lease_was_lost_is_refused_before_it_is_made(guard):
    seen, state = guard
    store = InMemoryStore()
    state["lost"] = True
    with pytest.raises(asyncio.CancelledError):
        await TraceStore(store, "acme").put_trace({"trace_id": "t1", "tenant": "acme"})
    with pytest.raises(asyncio.CancelledError):
        await PlaybookStore(store, tenant="acme").commit(
            "fin", 0, [Operation(op="add", text="A lesson.", section="s")], "l"
        )
    assert (
        store.search(("traces", "acme")) == [] and store.search(("playbooks", "acme", "fin")) == []
    )
    assert seen == ["trace write", "playbook commit"]


async def test_a_commit_made_again_under_its_key_returns_the_first_version():
    store = PlaybookStore(InMemoryStore(), tenant="acme")
    ops = [
        Operation(
            op="add", text="Current ratio = current assets / current liabilities.", section="ratios"
        )
    ]
    first = await store.commit("fin", 0, ops, "learn-a", key="learn-a-b0")
    again = await store.commit(
        "fin", 0, ops, "learn-a", key="learn-a-b0"
    )  # the run, taken over, commits again
    assert again.version == first.version == 1 and [
        v.version for v in await store.history("fin")
    ] == [1]
    other = await store.commit(
        "fin",
        1,
        [Operation(op="add", text="Quick ratio excludes inventory.", section="ratios")],
        "learn-b",
        key="learn-b-b0",
    )
    assert other.version == 2 and other.gate["commit_key"] == "learn-b-b0"


async def test_a_commit_whose_writer_died_before_its_key_record_is_found_by_the_version_it_left():
    raw = InMemoryStore()
    store = PlaybookStore(raw, tenant="acme")
    ops = [Operation(op="add", text="Gross margin is a percentage of revenue.", section="margins")]
    first = await store.commit("fin", 0, ops, "learn-a", key="k1")
    # as if the writer died right after the version record: no commit-key record, the head not moved
    raw.delete(("playbooks", "acme", "fin"), "commit-k1")
    raw.delete(("playbooks", "acme", "fin"), "head")
    again = await store.commit("fin", 0, ops, "learn-a", key="k1")
    assert again.version == first.version == 1
    assert [v.version for v in await store.history("fin")] == [1] and (
        await store.head("fin")
    ).version == 1


def test_task_scoped_ids_repeat_for_the_same_server_task_and_differ_otherwise(monkeypatch):
    from parallax.runtime import run_context

    config = {"configurable": {"run_id": "r1", "checkpoint_ns": "route:abc"}}
    monkeypatch.setattr(run_context, "get_config", lambda: config)
    first = run_context.task_scoped_id()
    assert (
        run_context.task_scoped_id() == first and len(first) == 32
    )  # the same task run again: the same trace id
    config["configurable"]["checkpoint_ns"] = (
        "route:def"  # started anew from another checkpoint: still the run's route
    )
    assert run_context.task_scoped_id() == first
    config["configurable"]["run_id"] = "r2"
    assert run_context.task_scoped_id() != first  # another run
    nested = {"run_id": "r1", "checkpoint_ns": "score:abc|1|route:def"}
    config["configurable"] = nested
    inner = run_context.task_scoped_id()
    assert inner != first and run_context.task_scoped_id() == inner
    config["configurable"] = {
        **nested,
        "checkpoint_ns": "score:abc|2|route:fed",
    }  # the node's next call
    assert run_context.task_scoped_id() != inner
    # called with subgraph_config: the calling task's place, not its task id, which another
    # checkpoint changes
    scoped = {
        "run_id": "r1",
        run_context.SCOPE: "learn_from_task@3(__pregel_push,0,False)/",
        "checkpoint_ns": "learn_from_task:abc|1|route:def",
    }
    config["configurable"] = scoped
    placed = run_context.task_scoped_id()
    config["configurable"] = {
        **scoped,
        "checkpoint_ns": "learn_from_task:123|1|route:456",
    }  # the step run again
    assert run_context.task_scoped_id() == placed
    config["configurable"] = {
        **scoped,
        run_context.SCOPE: "learn_from_task@3(__pregel_push,1,False)/",
    }  # the next Send
    assert run_context.task_scoped_id() != placed
    config["configurable"] = {
        **scoped,
        "checkpoint_ns": "learn_from_task:abc|2|route:def",
    }  # the task's next call
    assert run_context.task_scoped_id() != placed
    config["configurable"] = {"checkpoint_ns": "route:abc"}  # no server run id (the CLI): random
    assert run_context.task_scoped_id() != run_context.task_scoped_id()


def test_subgraph_config_names_the_calling_task_by_node_step_and_send(monkeypatch):
    from parallax.runtime import run_context

    outer = {
        "configurable": {"run_id": "r1"},
        "metadata": {
            "langgraph_node": "learn_from_task",
            "langgraph_step": 3,
            "langgraph_path": ("__pregel_push", 1, False),
        },
    }
    monkeypatch.setattr(run_context, "get_config", lambda: outer)
    config = run_context.subgraph_config({"tags": ["quiet"]})
    assert config["tags"] == ["quiet"]
    assert config["configurable"][run_context.SCOPE] == "learn_from_task@3(__pregel_push,1,False)/"
    outer["configurable"][run_context.SCOPE] = (
        "learn_round@2(__pregel_pull,learn_round)/"  # a call inside a call
    )
    assert (
        run_context.subgraph_config()["configurable"][run_context.SCOPE]
        == "learn_round@2(__pregel_pull,learn_round)/learn_from_task@3(__pregel_push,1,False)/"
    )


async def test_a_takeover_that_runs_the_last_step_again_leaves_the_first_end(guard):
    """The database restart of bench.faults, replayed: the first execution wrote the trace (its end)
    and lost the database before the checkpoint after it; the next execution (a new lease generation
    of the same server run) resumes from the checkpoint before `record_trace` and runs it again. The
    trace stays the first one's.
    """
    from langgraph.checkpoint.memory import InMemorySaver

    from parallax.graphs.solve import builder
    from testkit.scripted_model import scripted

    _, state = guard
    store = InMemoryStore()
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    ctx, calls = scripted(lambda prompt, t, i: '{"reasoning": "6 times 7", "answer": "42"}')
    config = {"configurable": {"thread_id": "th1", "run_id": "run-1"}}
    first = await graph.ainvoke(
        {"task": "What is 6 * 7?", "mode": "vote", "votes": 3}, config, context=ctx
    )
    written = store.get(("traces", "default"), first["trace_id"])
    assert written.value[lease_check.LEASE_FIELD] == {"run": "run-1", "generation": 1}
    before_end = next(
        s
        for s in [s async for s in graph.aget_state_history(config)]
        if s.next == ("record_trace",)
    )

    state["token"] = {"run": "run-1", "generation": 2}  # taken over: the same run under a new lease
    again = await graph.ainvoke(None, before_end.config, context=ctx)
    assert (
        again["answer"] == first["answer"] == "42" and len(calls) == 3
    )  # no model call made again
    kept = store.get(("traces", "default"), first["trace_id"])
    assert (
        kept.value[lease_check.LEASE_FIELD]["generation"] == 1
        and kept.updated_at == written.updated_at
    )  # not rewritten

    # a different end (a takeover that redid earlier steps and got another answer) is written,
    # stamped anew
    traces = TraceStore(store, "default")
    assert await traces.put_trace({**lease_check.unstamped(kept.value), "answer": "41"}) is True
    assert (
        store.get(("traces", "default"), first["trace_id"]).value[lease_check.LEASE_FIELD][
            "generation"
        ]
        == 2
    )
    # and another run's record under the same key is never mistaken for this run's first end
    state["token"] = {"run": "run-2", "generation": 1}
    assert await traces.put_trace({**lease_check.unstamped(kept.value), "answer": "41"}) is True
