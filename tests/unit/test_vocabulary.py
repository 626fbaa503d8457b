"""Modes, branch kinds and plan task kinds are defined once (state/vocabulary.py); every list of
them elsewhere is derived, and every business kind has its rules (logic/branch_kinds.py). A
vocabulary that drifts from its registry, or a face that lists modes of its own, fails here."""

from __future__ import annotations

import json
from typing import get_args

import pytest
from pydantic import BaseModel, TypeAdapter
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.run import RUN_MODES as CLI_MODES
from parallax.graphs.solve import graph
from parallax.logic.branch_kinds import KINDS, KindRules
from parallax.prompts.templates import DEFAULTS, SOLVE_PROMPTS, TYPED_PROMPTS
from parallax.runtime.mcp_tools import SolveMode
from parallax.server.openai_request import MODELS
from parallax.state.context import Context
from parallax.state.plan import PlanTask
from parallax.state.solve import SolveInput, SolveOutput
from parallax.state.vocabulary import (
    BUSINESS,
    BUSINESS_KINDS,
    BUSINESS_ROUTES,
    MODES,
    NAMED_ROUTES,
    PLAN,
    ROUTE_KIND,
    ROUTES,
    RUN_MODES,
    TASK_KINDS,
    TASK_ROUTE,
    TASKS,
    BranchKind,
    BusinessKind,
    listed,
    per_slice,
)
from testkit.scripted_model import scripted

OWN_NODE = {"speculate"}
"""Routes that fan out to a node of their own instead of business branches (nodes/candidate.py)."""


def enum_of(schema: dict, field: str) -> list[str]:
    return schema["properties"][field]["enum"]


def test_modes_are_auto_and_the_routes_and_every_route_fans_out_somewhere():
    assert MODES == ("auto", *ROUTES)
    assert RUN_MODES == (*MODES, PLAN)
    assert set(ROUTES) == set(ROUTE_KIND) | OWN_NODE
    assert sorted(NAMED_ROUTES) == sorted(ROUTES)


def test_every_business_kind_is_a_branch_kind_with_one_route_of_its_own():
    assert set(BUSINESS) == set(get_args(BusinessKind)) == set(BUSINESS_KINDS)
    assert set(BUSINESS) <= set(get_args(BranchKind))
    assert len(set(BUSINESS_ROUTES)) == len(BUSINESS_ROUTES)
    assert {ROUTE_KIND[route] for route in BUSINESS_ROUTES} == set(BUSINESS)


@pytest.mark.parametrize("kind", BUSINESS)
def test_every_business_kind_has_its_templates_and_rules(kind):
    business = BUSINESS_KINDS[kind]
    assert business.prompt in DEFAULTS and business.prompt in SOLVE_PROMPTS
    assert business.typed_prompt in DEFAULTS and business.typed_prompt in TYPED_PROMPTS
    rules = KINDS[kind]
    assert isinstance(rules, KindRules)
    assert issubclass(rules.reply, BaseModel)
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    assert issubclass(rules.typed_reply(schema), BaseModel)


def test_the_registry_holds_exactly_the_business_kinds():
    assert set(KINDS) == set(BUSINESS)


@pytest.mark.parametrize("kind", BUSINESS)
def test_every_business_kind_plans_branches_with_messages(kind):
    route = BUSINESS_KINDS[kind].route
    state = {
        "task": "Revenue was 5. Costs were 3.",
        "question": "What was profit?",
        "mode": route,
        "slices": ["Revenue was 5.", "Costs were 3."],
        "playbook_selections": [[], []],
        "votes": 3,
        "trace_id": "t",
    }
    rules = KINDS[kind]
    asks = rules.asks(state, kind)
    assert asks and all(ask["kind"] == kind for ask in asks)
    planned = rules.branches(
        state,
        Context(model="m", temperature=0.0, vote_temperature_min=0.0, vote_temperature_max=1.0),
        asks,
        None,
    )
    assert planned and {ask["kind"] for ask, _, _ in planned} == {kind}
    for schema in (None, {"type": "object", "properties": {"x": {"type": "string"}}}):
        assert rules.messages(asks[0], None, schema)
    assert per_slice(route) == BUSINESS_KINDS[kind].per_slice
    assert len(asks) == (len(state["slices"]) if per_slice(route) else 1)


TASK = "Revenue was 5 dollars. Costs were 3 dollars."
SCHEMA = {"type": "object", "properties": {"revenue": {"type": "string"}}, "required": ["revenue"]}
REPLIES = {
    "direct": {"reasoning": "it says so", "answer": "5 dollars"},
    "vote": {"reasoning": "it says so", "answer": "5"},
    "slice": {
        "relevant": True,
        "points": [{"quote": "Revenue was 5 dollars", "point": "Revenue was 5."}],
    },
}
"""A valid reply of each business kind, without an output schema and with SCHEMA."""
TYPED_REPLIES = {
    "direct": {"reasoning": "it says so", "data": {"revenue": "5"}},
    "vote": {"reasoning": "it says so", "data": {"revenue": "5"}},
    "slice": {
        "relevant": True,
        "data": {"revenue": {"quote": "Revenue was 5 dollars", "value": "5"}},
    },
}


def test_every_business_kind_has_a_sample_reply_here():
    assert set(REPLIES) == set(TYPED_REPLIES) == set(BUSINESS)


@pytest.mark.parametrize("typed", [False, True], ids=["plain", "typed"])
@pytest.mark.parametrize("kind", BUSINESS)
async def test_every_business_kind_runs_end_to_end_and_settles(kind, typed):
    """Its route fans out to branches of the kind, each reply parses into its reply model, the merge
    settles."""
    replies = TYPED_REPLIES if typed else REPLIES
    model_ctx, calls = scripted(lambda prompt, t, i: json.dumps(replies[kind]))
    run = {
        "task": TASK,
        "question": "What was revenue?",
        "mode": BUSINESS_KINDS[kind].route,
        "votes": 3,
    }
    out = await graph.ainvoke(
        {**run, **({"output_schema": SCHEMA} if typed else {})}, context=model_ctx
    )
    business = [b for b in out["branches"] if b["kind"] in BUSINESS]
    assert business and {b["kind"] for b in business} == {kind}
    assert all(b["status"] == "ok" for b in business), business
    assert out["status"] != "failed" and out["answer"], out["reason"]
    assert (out["data"] == {"revenue": "5"}) if typed else out["data"] is None
    name = BUSINESS_KINDS[kind].typed_prompt if typed else BUSINESS_KINDS[kind].prompt
    assert {b["prompt"]["name"] for b in business} == {name}


def test_plan_task_kinds_run_known_routes_and_say_what_they_do():
    assert set(TASKS) == set(TASK_KINDS)
    assert set(TASK_ROUTE) <= set(TASK_KINDS) and set(TASK_ROUTE.values()) <= set(ROUTES)
    assert enum_of(PlanTask.model_json_schema(), "kind") == list(TASK_KINDS)


def test_the_faces_offer_the_vocabulary():
    assert CLI_MODES == RUN_MODES
    assert sorted(MODELS.values()) == sorted(RUN_MODES)
    assert list(MODELS) == [f"parallax-{mode}" for mode in MODELS.values()]
    assert SolveMode.__metadata__[0].json_schema["enum"] == list(MODES)
    assert enum_of(TypeAdapter(SolveInput).json_schema(), "mode") == list(MODES)
    assert enum_of(TypeAdapter(SolveOutput).json_schema(), "mode") == list(ROUTES)


def test_the_cli_lists_the_modes_it_takes():
    runner = CliRunner()
    help_text = " ".join(
        runner.invoke(app, ["run", "--help"], env={"COLUMNS": "300"}).output.split()
    )
    assert " | ".join(RUN_MODES) in help_text
    refused = runner.invoke(app, ["run", "x", "--mode", "nope"])
    assert refused.exit_code != 0 and ", ".join(RUN_MODES) in refused.output


def test_listed_says_names_as_a_sentence():
    assert listed(("a",)) == "a"
    assert listed(("a", "b", "c")) == "a, b or c"
    assert listed(["a", "b"], "and") == "a and b"
