"""The deployed API's pieces that need no server: its config, the tenant a run gets, `parallax
serve`'s refusals.

The server itself (Aegra, PostgreSQL, Redis) is tested in tests/integration/test_deploy.py.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import builder as solve_builder
from parallax.runtime import settings
from parallax.runtime.run_context import AUTH_TENANT_FIELD
from parallax.runtime.storage.postgres import conninfo, lock_key
from parallax.runtime.storage.stores import traces_in
from testkit.scripted_model import scripted

ROOT = Path(__file__).resolve().parents[2]
runner = CliRunner()


def test_aegra_serves_every_graph_of_langgraph_json_through_the_metrics_wrappers():
    aegra, langgraph = (
        json.loads((ROOT / name).read_text())
        for name in ("parallax/server/aegra.json", "langgraph.json")
    )
    assert set(aegra["graphs"]) == set(langgraph["graphs"])
    # relative to the config, which is installed with the package: a wheel serves what a checkout
    # does
    assert all(path == f"./graphs.py:{graph}" for graph, path in aegra["graphs"].items())
    server_graphs = (ROOT / "parallax/server/graphs.py").read_text()
    for graph, path in langgraph["graphs"].items():  # the same graph object langgraph dev serves
        module, attr = (
            path.removeprefix("./graphs/").removesuffix(".py").split(".py:")
            if ".py:" in path
            else (None, None)
        )
        assert (
            f"from parallax.graphs.{module} import {attr}" in server_graphs
            and f"{graph} = with_metrics(" in server_graphs
        )
    # the store namespaces the graphs write are the ones the API scopes by tenant
    assert set(aegra["store"]["scopes"]) == {
        "playbooks",
        "prompts",
        "traces",
        "dlq",
        "consumed",
        "loop",
    }
    # no "dependencies": Aegra would put parallax/server/ on sys.path (its platform.py would shadow
    # the stdlib's)
    assert "dependencies" not in aegra and aegra["auth"]["path"] == "parallax.server.auth:auth"


@pytest.mark.parametrize(
    ("spec", "keys"),
    [
        ("k1:acme,k2:beta", {"k1": "acme", "k2": "beta"}),
        (" k1:acme , k2:acme ,", {"k1": "acme", "k2": "acme"}),
        ("with:colon:acme", {"with:colon": "acme"}),
        (None, {}),
    ],
)
def test_api_keys_map_to_tenants(monkeypatch, spec, keys):
    if spec is None:
        monkeypatch.delenv("PARALLAX_API_KEYS", raising=False)
    else:
        monkeypatch.setenv("PARALLAX_API_KEYS", spec)
    assert settings.load().api_key_tenants == keys


@pytest.mark.parametrize("spec", ["justakey", "k1:", ":acme", "k1:../other", "k1:acme,k2:a b"])
def test_a_bad_key_list_is_refused_naming_the_entry(monkeypatch, spec):
    monkeypatch.setenv("PARALLAX_API_KEYS", spec)
    with pytest.raises(settings.SettingsError, match="PARALLAX_API_KEYS entry"):
        _ = settings.load().api_key_tenants


def answer_42(prompt, t, i):
    return json.dumps({"reasoning": "r", "answer": "42"})


def authenticated(tenant: str) -> dict:
    """What the server puts in a run's config for a caller authenticated with a key of `tenant`."""
    return {
        "configurable": {"langgraph_auth_user": {"identity": tenant, AUTH_TENANT_FIELD: tenant}}
    }


async def test_a_run_takes_its_tenant_from_authentication_not_from_the_input():
    store = InMemoryStore()
    ctx, _ = scripted(answer_42)
    graph = solve_builder.compile(store=store)
    out = await graph.ainvoke(
        {"task": "What is 6 * 7?", "mode": "direct"}, authenticated("acme"), context=ctx
    )
    assert [t["trace_id"] for t in await traces_in(store, "acme").traces()] == [out["trace_id"]]
    assert await traces_in(store, "default").traces() == []
    same = await graph.ainvoke(
        {"task": "What is 6 * 7?", "mode": "direct", "tenant": "acme"},
        authenticated("acme"),
        context=ctx,
    )
    assert same["status"] == "ok"
    with pytest.raises(ValueError, match="your API key belongs to tenant 'acme'"):
        await graph.ainvoke(
            {"task": "What is 6 * 7?", "tenant": "beta"}, authenticated("acme"), context=ctx
        )
    assert await traces_in(store, "beta").traces() == []


async def test_a_plan_run_and_its_tasks_take_the_tenant_from_authentication():
    """A plan's tasks are solve runs: they must get the key's tenant too (they were sent "default"
    and refused)."""
    from parallax.graphs.plan import builder as plan_builder

    plan = {"tasks": [{"id": 1, "goal": "What is 6 * 7?", "kind": "solve"}]}
    store = InMemoryStore()
    ctx, _ = scripted(answer_42)
    out = await plan_builder.compile(store=store).ainvoke(
        {"task": "Compute 6 * 7, then note it.", "mode": "plan", "plan": plan},
        authenticated("acme"),
        context=ctx,
    )
    assert out["status"] == "ok" and [t["status"] for t in out["tasks"]] == ["DONE"], out["reason"]
    assert [t["trace_id"] for t in await traces_in(store, "acme").traces()] == [out["trace_id"]]
    assert await traces_in(store, "default").traces() == []


async def test_without_parallax_authentication_the_input_names_the_tenant():
    """`langgraph dev` and other servers hand nodes their own user (no Parallax tenant field): it is
    not trusted."""
    store = InMemoryStore()
    ctx, _ = scripted(answer_42)
    foreign_user = {"configurable": {"langgraph_auth_user": {"identity": "studio-user"}}}
    out = await solve_builder.compile(store=store).ainvoke(
        {"task": "What is 6 * 7?", "mode": "direct", "tenant": "beta"}, foreign_user, context=ctx
    )
    assert [t["trace_id"] for t in await traces_in(store, "beta").traces()] == [out["trace_id"]]


@pytest.mark.parametrize(
    ("url", "expected"),
    [
        ("postgresql+psycopg://u@h:5432/d", "postgresql://u@h:5432/d"),
        ("postgresql+asyncpg://u@h/d", "postgresql://u@h/d"),
        ("postgres://u@h/d", "postgresql://u@h/d"),
        ("postgresql://u@h/d", "postgresql://u@h/d"),
    ],
)
def test_database_urls_in_every_usual_spelling(url, expected):
    assert conninfo(url) == expected


def test_lock_keys_are_stable_64_bit_numbers():
    assert lock_key("acme/fin") == lock_key("acme/fin") != lock_key("acme/fim")
    assert -(2**63) <= lock_key("x") < 2**63


@pytest.mark.parametrize(
    ("env", "says"),
    [
        ({}, "set DATABASE_URL"),
        ({"DATABASE_URL": "postgresql://u@127.0.0.1:1/d"}, "set PARALLAX_API_KEYS"),
        ({"DATABASE_URL": "mysql://u@h/d", "PARALLAX_API_KEYS": "k:acme"}, "not a PostgreSQL URL"),
        (
            {"DATABASE_URL": "postgresql://u@h/d", "PARALLAX_API_KEYS": "k:a b"},
            "PARALLAX_API_KEYS entry 1",
        ),
        (
            {"DATABASE_URL": "postgresql://u@h/d", "PARALLAX_JWT_JWKS": "/etc/jwks.json"},
            "set PARALLAX_JWT_ISSUER",
        ),
    ],
)
def test_serve_refuses_what_it_cannot_run_with_one_line(monkeypatch, env, says):
    for name in (
        "DATABASE_URL",
        "PARALLAX_DATABASE_URL",
        "PARALLAX_API_KEYS",
        "PARALLAX_JWT_JWKS",
        "PARALLAX_JWT_ISSUER",
        "PARALLAX_JWT_AUDIENCE",
    ):
        monkeypatch.delenv(name, raising=False)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    result = runner.invoke(app, ["serve", "--port", "1"])
    assert result.exit_code == 2, result.output
    assert says in result.output and "Traceback" not in result.output


def test_the_cli_says_what_to_install_when_postgres_support_is_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "psycopg", None)  # as if the postgres extra were not installed
    monkeypatch.setenv("PARALLAX_DATABASE_URL", "postgresql://u@127.0.0.1:1/d")
    result = runner.invoke(app, ["playbook", "history"])
    assert result.exit_code == 2 and "pip install -e '.[postgres]'" in result.output, result.output


async def test_a_cron_run_takes_the_tenant_of_the_crons_owner_not_of_its_input(monkeypatch):
    """Aegra's scheduler runs a cron as a user it builds from the owner's identity, without
    Parallax's tenant field: the identity (a tenant, under Parallax's authentication) is the tenant;
    a cron whose input names another tenant is refused, and a user named like the scheduler with an
    identity no key has is not trusted."""
    monkeypatch.setenv("PARALLAX_API_KEYS", "key-acme:acme")
    store = InMemoryStore()
    ctx, _ = scripted(answer_42)
    graph = solve_builder.compile(store=store)
    cron = {
        "configurable": {
            "langgraph_auth_user": {"identity": "acme", "display_name": "cron-scheduler"}
        }
    }
    out = await graph.ainvoke({"task": "What is 6 * 7?", "mode": "direct"}, cron, context=ctx)
    assert [t["trace_id"] for t in await traces_in(store, "acme").traces()] == [out["trace_id"]]
    with pytest.raises(ValueError, match="your API key belongs to tenant 'acme'"):
        await graph.ainvoke({"task": "What is 6 * 7?", "tenant": "beta"}, cron, context=ctx)
    stranger = {
        "configurable": {
            "langgraph_auth_user": {"identity": "nobody", "display_name": "cron-scheduler"}
        }
    }
    await graph.ainvoke({"task": "What is 6 * 7?", "mode": "direct"}, stranger, context=ctx)
    assert await traces_in(store, "nobody").traces() == []
