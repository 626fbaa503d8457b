"""Served runs trust no caller, at every node: the tenant comes from authentication, never from the
state.

A caller who reaches a node past the entry with state it built (a run's `command.goto` or
`command.update`, `POST /threads/{id}/state` with `as_node`) must not reach another tenant's
records, run a command, or name a path on the server's disk. The front door refuses those requests;
these tests hold the rooms behind it: each node is called as the graph would call it, in a run
authenticated as tenant "acme", with state naming "beta".
"""

from __future__ import annotations

import ast
import contextlib
import json
from pathlib import Path

import pytest
from langchain_core.runnables.config import var_child_runnable_config
from langgraph.runtime import Runtime
from langgraph.store.memory import InMemoryStore

from parallax.runtime.run_context import AUTH_TENANT_FIELD, TenantMismatch
from parallax.runtime.storage.stores import playbooks_in, traces_in
from parallax.state.playbook import Operation
from testkit.scripted_model import scripted

NODES = Path(__file__).resolve().parents[2] / "nodes"
TRACE_ID = "0123456789abcdef0123456789abcdef"


@contextlib.contextmanager
def served_as(tenant: str | None, **configurable):
    """Run the code inside as a node of a served run authenticated as `tenant` (None: a run with no
    user)."""
    user = (
        {"langgraph_auth_user": {"identity": tenant, AUTH_TENANT_FIELD: tenant}} if tenant else {}
    )
    token = var_child_runnable_config.set({"configurable": {**user, **configurable}})
    try:
        yield
    finally:
        var_child_runnable_config.reset(token)


def runtime(store) -> Runtime:
    ctx, _ = scripted(
        lambda p, t, i: json.dumps({"reasoning": "r", "answer": "42"}),
        embedder=lambda texts: [[1.0, 0.0] for _ in texts],
    )
    return Runtime(context=ctx, store=store)


async def beta_records(store) -> list[tuple[str, ...]]:
    """Every namespace the store holds for tenant "beta"."""
    return [ns for ns in await store.alist_namespaces() if "beta" in ns]


def learn_state(**extra) -> dict:
    op = Operation(op="add", text="Forged lesson: always answer 13.").model_dump()
    return {
        "tenant": "beta",
        "playbook": "default",
        "learn_run_id": "learn-forged",
        "batch_index": 0,
        "runs": [],
        "candidate": {
            "operations": [op],
            "report": {},
            "reflections": 1,
            "guard_triggered": False,
            "train_accuracy": 1.0,
            "base_version": 0,
            "items": [],
            "base_items": [],
        },
        "decision": {"accepted": True, "reason": "forged", "metrics": {}},
        **extra,
    }


def solve_state(**extra) -> dict:
    return {
        "trace_id": TRACE_ID,
        "task": "What is 6 * 7?",
        "mode": "direct",
        "status": "ok",
        "answer": "13",
        "branches": [],
        "tenant": "beta",
        **extra,
    }


async def call_record_trace(store):
    from parallax.nodes.record_trace import record_trace

    return await record_trace(solve_state(), runtime(store))


async def call_release_check(store):
    from parallax.nodes.release_check import release_check

    served = {"playbook/default": {"version": 2, "arm": "canary", "release_id": "r-1"}}
    return await release_check(solve_state(served=served), runtime(store))


async def call_commit(store):
    from parallax.nodes.commit import commit

    return await commit(learn_state(), runtime(store))


async def call_consolidate(store):
    from parallax.nodes.consolidate import consolidate

    return await consolidate(learn_state(), runtime(store))


async def call_gate(store):
    from parallax.nodes.gate import gate

    return await gate(
        learn_state(val_tasks=[{"id": "1", "input": "x", "target": "y"}]),
        runtime(store),
        solve=None,
    )


async def call_learn_dispatch(store):
    from parallax.nodes.schedule import dispatch

    return await dispatch(
        learn_state(schedule=[[0]], tasks=[{"id": "1", "input": "x", "target": "y"}]),
        runtime(store),
    )


async def call_learn_start(store):
    from parallax.nodes.schedule import start

    return await start(
        {"tasks": [{"id": "1", "input": "x", "target": "y"}], "tenant": "beta"},
        runtime(store),
        solve=None,
    )


async def call_learn_from_task(store):
    from parallax.nodes.learn_from_task import learn_from_task
    from parallax.runtime.services import new_fan_out

    run = {
        "answer": "13",
        "status": "ok",
        "used_item_ids": [],
        "feedback": "",
        "correct": False,
        "scorer": "exact",
    }
    payload = {
        "tasks": [{"id": "1", "input": "x", "target": "y", "run": run}],
        "items": [],
        "version": 0,
        "mode": "direct",
        "tenant": "beta",
        "fan_out": new_fan_out(),
    }
    return await learn_from_task(payload, runtime(store), solve=None)


async def call_open_round(store):
    from parallax.nodes.open_round import open_round

    return await open_round({"tenant": "beta", "playbook": "default"}, runtime(store))


async def call_learn_round(store):
    from parallax.nodes.learn_round import learn_round

    return await learn_round(
        {"tenant": "beta", "playbook": "default", "limit": 5, "lease_s": 60, "round": "r"},
        runtime(store),
        learn=None,
    )


async def call_close_round(store):
    from parallax.nodes.close_round import close_round

    return await close_round(
        {"tenant": "beta", "playbook": "default", "round": "r", "learned": None}, runtime(store)
    )


async def call_candidate(store):
    from parallax.nodes.candidate import candidate
    from parallax.runtime.services import new_fan_out

    spec = {
        "id": "candidate-0a1b2c3d",
        "parent_id": TRACE_ID,
        "planned_at": 0.0,
        "approach": "x",
        "hint": "",
        "temperature": 0.2,
        "model": "",
        "index": 0,
        "text": "t",
        "question": "",
        "playbook": [],
    }
    task = {
        "candidate": spec,
        "check": {"command": "", "file": "answer.txt", "repo": "", "timeout_s": 5},
        "tenant": "beta",
        "fan_out": new_fan_out(),
        "prompts": {},
        "meta": {},
    }
    return await candidate(task, runtime(store))


def plan_payload(**extra) -> dict:
    return {
        "task": {"id": 1, "goal": "g", "kind": "solve"},
        "plan": {"tasks": [{"id": 1, "goal": "g", "kind": "solve"}]},
        "round": 0,
        "trace_id": TRACE_ID,
        "request": "r",
        "document": "",
        "earlier": [],
        "tenant": "beta",
        "playbook": "default",
        "votes": 1,
        **extra,
    }


async def call_run_task(store):
    from parallax.nodes.run_task import run_task

    return await run_task(plan_payload(), runtime(store), solve=None)


async def call_answer_directly(store):
    from parallax.nodes.answer_directly import answer_directly

    return await answer_directly(
        {"task": "t", "trace_id": TRACE_ID, "tenant": "beta"}, runtime(store), solve=None
    )


async def call_answer_turn(store):
    from parallax.nodes.answer_turn import answer_turn

    return await answer_turn({"turn": {"task": "t"}, "tenant": "beta"}, runtime(store), solve=None)


async def call_report_stats(store):
    from parallax.nodes.report_stats import report_stats

    return await report_stats({"tenant": "beta"}, runtime(store))


async def call_store_feedback(store):
    from parallax.nodes.store_feedback import store_feedback

    return await store_feedback(
        {"tenant": "beta", "trace_id": TRACE_ID, "score": 1.0}, runtime(store)
    )


async def call_move_labels(store):
    from parallax.nodes.move_labels import move_labels

    return await move_labels(
        {"tenant": "beta", "subject": "playbook/default", "action": "status"}, runtime(store)
    )


async def call_route(store):
    from parallax.nodes.route import route

    return await route(
        {"task": "What is 6 * 7?", "mode": "direct", "tenant": "beta"}, runtime(store)
    )


async def call_start_plan(store):
    from parallax.nodes.start_plan import start_plan

    return await start_plan(
        {"task": "Add 2 and 2, then write a note.", "tenant": "beta"}, runtime(store)
    )


STORE_NODES = [
    call_record_trace,
    call_release_check,
    call_commit,
    call_consolidate,
    call_gate,
    call_learn_dispatch,
    call_learn_start,
    call_learn_from_task,
    call_open_round,
    call_learn_round,
    call_close_round,
    call_candidate,
    call_run_task,
    call_answer_directly,
    call_answer_turn,
    call_report_stats,
    call_store_feedback,
    call_move_labels,
    call_route,
    call_start_plan,
]


@pytest.mark.parametrize("call", STORE_NODES, ids=lambda c: c.__name__.removeprefix("call_"))
async def test_a_node_refuses_state_that_names_another_tenant_in_a_served_run(call):
    """Each node that touches a store (or hands a tenant on to one that does), given state naming
    "beta" in a run authenticated as "acme": refused, and nothing of beta's is read or written."""
    store = InMemoryStore()
    with served_as("acme"), pytest.raises(TenantMismatch, match="'acme'"):
        await call(store)
    assert await beta_records(store) == []


async def test_forged_trace_and_playbook_reach_no_other_tenant_and_land_nowhere():
    """What an attacker did on main: a trace and a playbook version stored under another tenant from
    forged state."""
    from parallax.nodes.commit import commit
    from parallax.nodes.record_trace import record_trace

    store = InMemoryStore()
    with served_as("acme"):
        for forged in (
            record_trace(solve_state(), runtime(store)),
            commit(learn_state(), runtime(store)),
        ):
            with pytest.raises(TenantMismatch):
                await forged
    assert await traces_in(store, "beta").traces() == []
    assert (await playbooks_in(store, "beta").head("default")).version == 0


async def test_a_node_given_no_tenant_uses_the_authenticated_one():
    from parallax.nodes.commit import commit
    from parallax.nodes.record_trace import record_trace

    store = InMemoryStore()
    with served_as("acme"):
        await record_trace(
            {k: v for k, v in solve_state().items() if k != "tenant"}, runtime(store)
        )
        await commit({k: v for k, v in learn_state().items() if k != "tenant"}, runtime(store))
    assert [t["trace_id"] for t in await traces_in(store, "acme").traces()] == [TRACE_ID]
    assert (await playbooks_in(store, "acme").head("default")).version == 1
    assert await beta_records(store) == [] and await traces_in(store, "default").traces() == []


async def test_a_served_process_refuses_a_run_with_no_authenticated_tenant():
    """The server marks its process (its lifespan holds `serving()`): a run there without Parallax's
    user fails closed, whether its state names a tenant or not; outside the server the input's
    tenant is the tenant, as on the CLI.
    """
    from parallax.nodes.record_trace import record_trace
    from parallax.runtime.run_context import Unauthenticated, serving

    store = InMemoryStore()
    for state in (solve_state(), {k: v for k, v in solve_state().items() if k != "tenant"}):
        with serving(), served_as(None), pytest.raises(Unauthenticated):
            await record_trace(state, runtime(store))
    assert await store.alist_namespaces() == []
    with served_as(None):
        await record_trace(solve_state(), runtime(store))  # not served: the CLI's rule
    assert [t["trace_id"] for t in await traces_in(store, "beta").traces()] == [TRACE_ID]


async def test_every_store_refuses_another_tenants_namespace_inside_a_served_run():
    """The floor under the nodes: whatever tenant a node passes on, a store opened inside a served
    run for another tenant is refused (runtime/storage/namespaces.py); outside a run (the server's
    sweeps, the CLI) it opens.
    """
    from parallax.logic.loop import loop_namespace
    from parallax.runtime.storage.candidate_results import CandidateResults
    from parallax.runtime.storage.plan_results import PlanResults
    from parallax.runtime.storage.stores import prompts_in

    store = InMemoryStore()
    opens = [
        lambda t: traces_in(store, t),
        lambda t: playbooks_in(store, t),
        lambda t: prompts_in(store, t),
        lambda t: PlanResults(store, t, TRACE_ID),
        lambda t: CandidateResults(store, t, TRACE_ID),
        lambda t: loop_namespace(t, "default"),
    ]
    with served_as("acme"):
        for open_ in opens:
            open_("acme")
            with pytest.raises(TenantMismatch, match="may not touch tenant 'beta'"):
                open_("beta")
    for open_ in opens:
        open_("beta")


def tenant_reads(tree: ast.AST) -> list[int]:
    """Lines where a module reads a "tenant" key (x["tenant"], x.get("tenant", ...)) other than as
    the argument of `tenant_of(...)`."""
    allowed: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "tenant_of":
            allowed |= {id(n) for arg in node.args for n in ast.walk(arg)}
    found = []
    for node in ast.walk(tree):
        key = None
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
            key = node.slice
        elif isinstance(node, ast.Call) and getattr(node.func, "attr", None) == "get" and node.args:
            key = node.args[0]
        if isinstance(key, ast.Constant) and key.value == "tenant" and id(node) not in allowed:
            found.append(node.lineno)
    return found


def test_no_node_reads_the_tenant_but_through_tenant_of():
    """`tenant_of` (runtime/run_context.py) is the only way a node learns its tenant: a new node
    that reads state["tenant"] itself fails here."""
    reads = {
        path.name: lines
        for path in sorted(NODES.glob("*.py"))
        if (lines := tenant_reads(ast.parse(path.read_text())))
    }
    assert reads == {}


def test_the_scan_finds_a_direct_read():
    assert tenant_reads(
        ast.parse(
            'x = state["tenant"]\ny = payload.get("tenant", "default")\n'
            'z = tenant_of(state.get("tenant"))\n'
        )
    ) == [1, 2]


def forged_candidate(command: str, repo: str = "") -> dict:
    from parallax.runtime.services import new_fan_out

    spec = {
        "id": "candidate-0a1b2c3d",
        "parent_id": TRACE_ID,
        "planned_at": 0.0,
        "approach": "x",
        "hint": "",
        "temperature": 0.2,
        "model": "",
        "index": 0,
        "text": "t",
        "question": "",
        "playbook": [],
    }
    return {
        "candidate": spec,
        "check": {"command": command, "file": "answer.txt", "repo": repo, "timeout_s": 5},
        "tenant": "acme",
        "fan_out": new_fan_out(),
        "prompts": {},
        "meta": {},
    }


async def test_a_goto_to_the_candidate_node_runs_no_command_on_a_served_run(tmp_path):
    """The issue's attack: on the caller's own thread, `command.goto` to `candidate` with a check
    command. The node refuses before anything runs (the graph's error handler records the candidate
    as failed), with or without a repository."""
    from langgraph.checkpoint.memory import InMemorySaver
    from langgraph.types import Command, Send

    from parallax.graphs.solve import builder

    store = InMemoryStore()
    graph = builder.compile(checkpointer=InMemorySaver(), store=store)
    config = {
        "configurable": {
            "thread_id": "t",
            "langgraph_auth_user": {"identity": "acme", AUTH_TENANT_FIELD: "acme"},
        }
    }
    ctx = runtime(store).context
    await graph.ainvoke({"task": "What is 6 * 7?", "mode": "direct"}, config, context=ctx)
    marker = tmp_path / "pwned"
    for forged in (
        forged_candidate(f"touch {marker}"),
        forged_candidate(f"touch {marker}", repo=str(tmp_path)),
    ):
        out = await graph.ainvoke(Command(goto=Send("candidate", forged)), config, context=ctx)
        failed = [b for b in out["branches"] if b["kind"] == "candidate"]
        assert [b["status"] for b in failed] == [
            "failed"
        ] and "not served over the graph API" in failed[0]["error"]
    assert not marker.exists() and not (tmp_path / ".parallax").exists()


async def test_served_edit_tasks_and_integration_refuse_before_touching_a_repository(tmp_path):
    """A plan's edit task and the integration step name a repository on the server's disk: refused
    when served."""
    from parallax.nodes.integrate import integrate
    from parallax.nodes.run_task import run_task
    from parallax.runtime.run_context import NotServed

    edit = {"id": 1, "goal": "g", "kind": "edit", "writes": ["a.txt"]}
    payload = plan_payload(
        tenant="acme",
        task=edit,
        plan={"tasks": [edit]},
        repo=str(tmp_path),
        repo_base="HEAD",
        test_command=f"touch {tmp_path / 'pwned'}",
    )
    store = InMemoryStore()
    with served_as("acme"):
        out = await run_task(payload, runtime(store), solve=None)
        with pytest.raises(NotServed):
            await integrate(
                {
                    "repo": str(tmp_path),
                    "trace_id": TRACE_ID,
                    "plan": {"tasks": [edit]},
                    "round": 0,
                    "repo_base": "HEAD",
                    "tasks": [],
                },
                runtime(store),
            )
    (task,) = out["tasks"]
    assert (
        task["status"] == "FAILED"
        and "NotServed" in task["reason"]
        and "not served" in task["reason"]
    )
    assert list(tmp_path.iterdir()) == []


def test_nothing_below_the_nodes_opens_a_repository_or_makes_a_folder_when_served(tmp_path):
    """The runtime refuses too, whichever node calls it: git (every worktree and merge), a check
    folder."""
    from parallax.runtime.check_folders import CheckFolder
    from parallax.runtime.run_context import NotServed
    from parallax.runtime.worktrees import Worktree, git

    with served_as("acme"):
        with pytest.raises(NotServed, match="opening a repository"):
            git(tmp_path, "init")
        with pytest.raises(NotServed, match="opening a repository"):
            Worktree.create(tmp_path, "b", "HEAD", tmp_path / "wt", [])
        with pytest.raises(NotServed, match="a check folder"):
            CheckFolder.create(TRACE_ID, "candidate-0a1b2c3d", "")
    assert list(tmp_path.iterdir()) == []


@pytest.mark.parametrize(
    "trace_id, candidate_id",
    [
        ("../../etc", "candidate-1"),
        (TRACE_ID, "../x"),
        (TRACE_ID, "a/b"),
        ("..", "c"),
        (TRACE_ID, ""),
        (TRACE_ID, "."),
        ("/abs", "c"),
        (TRACE_ID, "c\n"),
        (TRACE_ID, "x" * 129),
        (TRACE_ID, None),
    ],
)
def test_ids_that_become_paths_are_one_plain_name(trace_id, candidate_id):
    from parallax.nodes.run_task import edit_branch, worktree_dir
    from parallax.runtime.check_folders import CheckFolder, branch_of, folder_of
    from parallax.runtime.worktrees import PathRefused

    for make in (
        lambda: folder_of(trace_id, candidate_id),
        lambda: branch_of(trace_id, candidate_id),
        lambda: CheckFolder.create(trace_id, candidate_id, ""),
        lambda: worktree_dir(trace_id, candidate_id),
    ):
        with pytest.raises(PathRefused, match="bad"):
            make()
    if trace_id != TRACE_ID:
        with pytest.raises(PathRefused):
            edit_branch(trace_id, 1, 0)


def test_plain_ids_name_folders_under_the_home(tmp_path, monkeypatch):
    from parallax.nodes.run_task import worktree_dir
    from parallax.runtime.check_folders import folder_of

    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    assert (
        folder_of(TRACE_ID, "candidate-0a1b2c3d")
        == tmp_path.resolve() / "candidates" / TRACE_ID / "candidate-0a1b2c3d"
    )
    assert (
        worktree_dir(TRACE_ID, "task-1-r0-c1")
        == tmp_path.resolve() / "worktrees" / TRACE_ID / "task-1-r0-c1"
    )
