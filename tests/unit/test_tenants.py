"""Tenants: a run reads and writes only its own tenant's playbooks; every attempt to cross over
fails."""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.learn import builder as learn_builder
from parallax.graphs.solve import builder as solve_builder
from parallax.runtime import settings
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.playbook_store import PlaybookStore
from parallax.runtime.storage.stores import playbooks_in
from parallax.state.playbook import Operation
from testkit.scripted_model import scripted
from tests.unit.test_learn_graph import bag_of_words, learning_script, tasks

runner = CliRunner()


def answer(text: str) -> str:
    return json.dumps({"reasoning": "r", "answer": text})


async def acme_playbook(store) -> None:
    await PlaybookStore(store, tenant="acme").commit(
        "default", 0, [Operation(op="add", text="ACME secret lesson.")], "t"
    )


async def test_store_keeps_tenants_apart():
    store = InMemoryStore()
    await acme_playbook(store)
    acme, globex = PlaybookStore(store, tenant="acme"), PlaybookStore(store, tenant="globex")
    assert (await acme.head("default")).version == 1
    assert (await globex.head("default")).version == 0 and await globex.names() == []
    assert await globex.history("default") == []
    with pytest.raises(StoreError, match="no versions yet"):
        await globex.get("default", 1)
    await globex.commit("default", 0, [Operation(op="add", text="globex lesson")], "t")
    assert [i.text for i in (await acme.head("default")).active] == ["ACME secret lesson."]
    assert [i.text for i in (await globex.head("default")).active] == ["globex lesson"]


@pytest.mark.parametrize("bad", ["", "../acme", "acme/default", "a b", "x" * 65, "t\x00"])
def test_tenant_names_cannot_spell_a_path(bad):
    with pytest.raises(StoreError, match="bad tenant"):
        PlaybookStore(InMemoryStore(), tenant=bad)


async def test_a_solve_run_sees_only_its_tenants_lessons(monkeypatch):
    store = InMemoryStore()
    await acme_playbook(store)
    model_ctx, calls = scripted(lambda p, t, i: answer("4"), embedder=bag_of_words)
    graph = solve_builder.compile(store=store)
    theirs = await graph.ainvoke(
        {"task": "What is 2 + 2?", "mode": "direct", "tenant": "globex"}, context=model_ctx
    )
    assert theirs["playbook_version"] == 0 and "ACME secret lesson" not in calls[-1][0]
    ours = await graph.ainvoke(
        {"task": "What is 2 + 2?", "mode": "direct", "tenant": "acme"}, context=model_ctx
    )
    assert ours["playbook_version"] == 1 and "ACME secret lesson" in calls[-1][0]


@pytest.mark.parametrize(
    "field, value",
    [("tenant", "../acme"), ("tenant", "acme/default"), ("playbook", "default/../x")],
)
async def test_a_solve_input_cannot_name_another_namespace(monkeypatch, field, value):
    model_ctx, calls = scripted(lambda p, t, i: answer("4"), embedder=bag_of_words)
    with pytest.raises(Exception, match=f"{field} must be 1-64 letters, digits"):
        await solve_builder.compile(store=InMemoryStore()).ainvoke(
            {"task": "What is 2 + 2?", field: value}, context=model_ctx
        )
    assert calls == []


async def test_learning_writes_only_the_learning_tenant(monkeypatch):
    store = InMemoryStore()
    await acme_playbook(store)
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    out = await learn_builder.compile(store=store).ainvoke(
        {
            "tasks": tasks(2),
            "batch": 2,
            "mode": "direct",
            "playbook": "default",
            "tenant": "globex",
        },
        context=model_ctx,
    )
    assert out["tenant"] == "globex" and (out["from_version"], out["to_version"]) == (0, 1)
    acme = await playbooks_in(store, "acme").head("default")
    assert acme.version == 1 and [i.text for i in acme.active] == ["ACME secret lesson."]
    assert (await playbooks_in(store, "globex").head("default")).version == 1


async def test_learning_refuses_a_bad_tenant(monkeypatch):
    model_ctx, _ = scripted(learning_script(lambda p: "2.0"), embedder=bag_of_words)
    with pytest.raises(Exception, match="tenant must be 1-64 letters, digits"):
        await learn_builder.compile(store=InMemoryStore()).ainvoke(
            {"tasks": tasks(1), "tenant": "a/b"}, context=model_ctx
        )


def test_cli_tenants_cannot_read_each_other(tmp_path):
    export = tmp_path / "pb.json"
    export.write_text(json.dumps([{"id": "pb-1", "text": "ACME secret lesson."}]))
    made = runner.invoke(
        app, ["playbook", "import", str(export), "--playbook", "ops", "--tenant", "acme", "--json"]
    )
    assert made.exit_code == 0, made.output
    shown = runner.invoke(
        app, ["playbook", "show", "--playbook", "ops", "--tenant", "acme", "--json"]
    )
    assert json.loads(shown.output)["items"][0]["text"] == "ACME secret lesson."
    crossed = runner.invoke(
        app, ["playbook", "show", "--playbook", "ops", "--tenant", "globex", "--json"]
    )
    assert (
        crossed.exit_code == 2
        and "unknown playbook 'ops'" in crossed.output
        and "ACME" not in crossed.output
    )
    export_other = runner.invoke(
        app, ["playbook", "export", "--playbook", "ops", "--tenant", "globex"]
    )
    assert export_other.exit_code == 2


def test_cli_bad_tenant_is_one_line_and_writes_nothing(tmp_path):
    home = settings.load().home
    for args in (
        ["playbook", "show", "--tenant", "../x"],
        ["run", "hi", "--tenant", "a b"],
        ["playbook", "rollback", "1", "--tenant", ""],
    ):
        result = runner.invoke(app, args)
        assert result.exit_code == 2, (args, result.output)
        assert "bad tenant" in result.output and "Traceback" not in result.output
        assert len(result.output.strip().splitlines()) == 1
    assert not (home / "store.sqlite").exists() and not (home / "checkpoints.sqlite").exists()


def test_tenant_comes_from_the_environment(monkeypatch, tmp_path):
    export = tmp_path / "pb.json"
    export.write_text(json.dumps([{"id": "pb-1", "text": "env lesson"}]))
    monkeypatch.setenv("PARALLAX_TENANT", "envco")
    assert runner.invoke(app, ["playbook", "import", str(export)]).exit_code == 0
    monkeypatch.delenv("PARALLAX_TENANT")
    assert runner.invoke(app, ["playbook", "show", "--json"]).exit_code == 0
    assert json.loads(runner.invoke(app, ["playbook", "show", "--json"]).output)["version"] == 0
    assert (
        json.loads(runner.invoke(app, ["playbook", "show", "--tenant", "envco", "--json"]).output)[
            "version"
        ]
        == 1
    )


async def test_two_tenants_committing_at_once_each_keep_every_update():
    """Same playbook name, same store, interleaved commits: the lock and the records stay per
    tenant."""
    store = InMemoryStore()

    async def learner(tenant: str, n: int) -> None:
        ps = PlaybookStore(store, tenant=tenant)
        for i in range(n):
            head = await ps.head("default")
            await ps.commit(
                "default", head.version, [Operation(op="add", text=f"{tenant} lesson {i}")], tenant
            )

    await asyncio.gather(*(learner(t, 6) for t in ("acme", "globex", "acme2")))
    for tenant in ("acme", "globex", "acme2"):
        history = await PlaybookStore(store, tenant=tenant).history("default")
        assert [v.version for v in history] == list(range(1, 7))
        assert sorted(i.text for i in history[-1].active) == sorted(
            f"{tenant} lesson {i}" for i in range(6)
        )
