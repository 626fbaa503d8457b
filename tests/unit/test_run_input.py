"""logic/run_input.py: the one definition of a valid run every face checks before a run exists
(offline).

Each graph's input definition (its TypedDict in state/) is sent one value past each of its bounds,
read from the definition itself, so a bound added later is tested too; each is refused naming the
field and the bound. Then the run context's bounds, the served API's ceilings, floors and models,
and what no caller may send.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import TypeAdapter

from parallax.logic.run_input import (
    DEFINITIONS,
    GRAPHS,
    RunContext,
    RunInputError,
    check_run_input,
    checked_context,
)
from parallax.runtime.settings import reload_settings
from parallax.state.context import CODE_ONLY, RUN_SETTINGS, bounds
from parallax.state.solve import INTERNAL

ROOT = Path(__file__).resolve().parents[2]
TASK = {"task": "What is 6 * 7?"}
VALID = {
    "solve": TASK,
    "plan": TASK,
    "learn": {"tasks": [{"input": "1 + 1?", "target": "2"}]},
    "stats": {},
    "feedback": {"trace_id": "abc123", "score": "up"},
    "release": {"subject": "playbook/support", "action": "status"},
    "chat": {"messages": [{"role": "user", "content": "What is 6 * 7?"}]},
    "loop": {},
}
"""A valid input of each graph: one field at a time is sent past its bound on top of it."""
ITEM = {
    "tasks": {"input": "1 + 1?"},
    "val_tasks": {"input": "1 + 1?"},
    "pages": "a page",
    "messages": {"role": "user", "content": "hi"},
}
"""A valid item of each list field (so a list one item too long is refused for its length alone)."""
PLAIN = {
    "task",
    "question",
    "pages",
    "target",
    "correct",
    "comment",
    "by",
    "reason",
    "trace_id",
    "check",
    "check_file",
    "repo",
    "test_command",
    "since",
    "score",
}
"""Fields whose text is only bounded in length (the others have a pattern)."""


def properties(graph: str) -> dict[str, Any]:
    schema = TypeAdapter(DEFINITIONS[graph]).json_schema()
    resolved = {}
    for name, node in schema["properties"].items():
        options = node.get("anyOf", [node])
        resolved[name] = next((o for o in options if o.get("type") not in (None, "null")), node)
    return resolved


def one_past(name: str, node: dict[str, Any]) -> list[tuple[Any, str]]:
    """(a value one past a bound of this field, the bound as the refusal says it), for each bound it
    has."""
    cases: list[tuple[Any, str]] = []
    kind = node.get("type")
    step = 1 if kind == "integer" else 0.5
    if "maximum" in node:
        cases.append((node["maximum"] + step, str(node["maximum"]).removesuffix(".0")))
    if "minimum" in node:
        cases.append((node["minimum"] - step, str(node["minimum"]).removesuffix(".0")))
    if "exclusiveMinimum" in node:
        cases.append(
            (node["exclusiveMinimum"], f"above {node['exclusiveMinimum']}".removesuffix(".0"))
        )
    if kind == "string" and "maxLength" in node:
        cases.append(("x" * (node["maxLength"] + 1), str(node["maxLength"])))
    if kind == "string" and "pattern" in node:
        cases.append(("../x", "got '../x'"))
    if kind == "array" and "maxItems" in node:
        cases.append(([ITEM[name]] * (node["maxItems"] + 1), str(node["maxItems"])))
    if "enum" in node:
        cases.append(("nonesuch", "one of " + ", ".join(map(str, node["enum"]))))
    return cases


CASES = [
    (graph, name, value, says)
    for graph in GRAPHS
    for name, node in properties(graph).items()
    if name not in INTERNAL
    for value, says in one_past(name, node)
]


def test_every_graph_has_a_bounded_definition_and_every_bound_is_tried():
    assert set(GRAPHS) == set(json.loads((ROOT / "langgraph.json").read_text())["graphs"])
    assert set(GRAPHS) == set(
        json.loads((ROOT / "parallax/server/aegra.json").read_text())["graphs"]
    )
    for graph in GRAPHS:
        tried = {name for g, name, _, _ in CASES if g == graph}
        for name, node in properties(graph).items():
            if name in INTERNAL:
                continue  # no caller may send it at all
            if node.get("type") in ("integer", "number", "array") or (
                node.get("type") == "string" and name in PLAIN
            ):
                assert name in tried, (
                    f"{graph}.{name} has no upper bound"
                )  # every number, list and text has one


def test_each_graph_s_definition_is_the_graph_s_own_input_schema():
    from parallax.graphs import chat, data_loop, learn, loop, plan, solve

    built = {
        "solve": solve.builder,
        "plan": plan.builder,
        "learn": learn.builder,
        "chat": chat.builder,
        "loop": loop.builder,
        "stats": data_loop.stats_builder,
        "feedback": data_loop.feedback_builder,
        "release": data_loop.release_builder,
    }
    assert {graph: builder.input_schema for graph, builder in built.items()} == DEFINITIONS


@pytest.mark.parametrize(
    ("graph", "name", "value", "says"),
    CASES,
    ids=[f"{g}.{n}={str(v)[:12]}" for g, n, v, _ in CASES],
)
def test_a_value_one_past_a_bound_is_refused_naming_the_field_and_the_bound(
    graph, name, value, says
):
    with pytest.raises(RunInputError) as refused:
        check_run_input(graph, {**VALID[graph], name: value})
    message = str(refused.value)
    assert refused.value.field.split("[")[0] == name and message.startswith(name), message
    assert says in message and "\n" not in message and len(message) < 400, message
    assert (
        "Input should" not in message and "[type=" not in message
    )  # pydantic's words are not the sentence


@pytest.mark.parametrize("graph", GRAPHS)
def test_a_valid_input_of_each_graph_passes(graph):
    assert check_run_input(graph, VALID[graph]).max_tokens is not None  # with its resolved Context


@pytest.mark.parametrize(
    ("graph", "run_input", "context", "field", "says"),
    [
        (
            "solve",
            {**TASK, "votes": 0},
            None,
            "votes",
            "votes must be a whole number from 1 to 1000, got 0",
        ),
        (
            "solve",
            {**TASK, "votes": "5"},
            None,
            "votes",
            "votes must be a whole number from 1 to 1000, got '5'",
        ),
        (
            "solve",
            {**TASK, "votes": True},
            None,
            "votes",
            "votes must be a whole number from 1 to 1000, got true",
        ),
        ("solve", {**TASK, "votes": None}, None, "votes", "got null"),
        ("solve", {**TASK, "vote": 3}, None, "vote", "unknown input field vote for solve"),
        (
            "solve",
            {**TASK, "vote": 3, "modus": "x"},
            None,
            "modus",
            "unknown input fields modus, vote",
        ),
        (
            "solve",
            {**TASK, "output_schema": {"type": "string"}},
            None,
            "output_schema",
            "must describe an object",
        ),
        (
            "solve",
            {**TASK, "min_votes": 9, "votes": 3},
            None,
            "min_votes",
            "between 1 and votes (3)",
        ),
        (
            "solve",
            {**TASK, "playbook": "../acme"},
            None,
            "playbook",
            "playbook must be 1-64 letters, digits, '-' or '_'",
        ),
        (
            "solve",
            {**TASK, "mode": "plan"},
            None,
            "mode",
            "mode must be one of auto, direct, section, vote, speculate",
        ),
        ("solve", {"task": "  "}, None, "task", "task is empty"),
        (
            "solve",
            {"task": "x" * 10_000_001},
            None,
            "task",
            "got 10000001 characters",
        ),  # told by its size, not echoed
        (
            "solve",
            {**TASK, "playbook_items": []},
            None,
            "playbook_items",
            "set by Parallax's own graphs",
        ),
        ("solve", {**TASK, "follow_up": {}}, None, "follow_up", "not by a caller"),
        (
            "solve",
            TASK,
            {"max_concurrency": -3},
            "context.max_concurrency",
            "context.max_concurrency must be a whole number from 1 to 1024, got -3",
        ),
        (
            "solve",
            TASK,
            {"max_tokens": 200_001},
            "context.max_tokens",
            "from 1 to 200000, got 200001",
        ),
        (
            "solve",
            TASK,
            {"temperature": 3},
            "context.temperature",
            "context.temperature must be a number from 0 to 2",
        ),
        (
            "solve",
            TASK,
            {"vote_stop_threshold": 0.4},
            "context.vote_stop_threshold",
            "above 0.5 and below 1",
        ),
        ("solve", TASK, {"max_concurrency": "many"}, "context.max_concurrency", "got 'many'"),
        (
            "solve",
            TASK,
            {"model": "m" * 201},
            "context.model",
            "text of at most 200 characters, got 201 characters",
        ),
        ("solve", TASK, {"concurrency": 2}, "context.concurrency", "is not a run setting"),
        ("solve", TASK, {"chat_model": "x"}, "context.chat_model", "for code only"),
        ("solve", TASK, ["max_concurrency"], "context", "must be an object"),
        (
            "plan",
            {**TASK, "max_replans": 9},
            None,
            "max_replans",
            "max_replans must be a whole number from 0 to 5",
        ),
        ("plan", {**TASK, "votez": 1}, None, "votez", "unknown input field votez for plan"),
        ("plan", {**TASK, "output_schema": {"type": "object"}}, None, "output_schema", "not plan"),
        (
            "learn",
            {"tasks": [{"input": "1 + 1?"}], "epochs": 100_000_000},
            None,
            "epochs",
            "epochs must be a whole number from 1 to 100, got 100000000",
        ),
        (
            "learn",
            {"tasks": [{"input": "1 + 1?"}] * 2000, "epochs": 51},
            None,
            "epochs",
            "epochs times tasks must be at most 100000, got 51 x 2000 = 102000",
        ),
        (
            "learn",
            {"tasks": [{"input": "1 + 1?", "run": {"status": "ok"}}]},
            None,
            "tasks[0].run",
            "unknown field tasks[0].run: use id, input, scorer, target",
        ),  # a forged stored run is no training task
        ("learn", {"from_traces": True, "epochs": 2}, None, "epochs", "leave epochs out"),
        ("learn", {}, None, "tasks", "no training tasks"),
        ("chat", {}, None, "messages", "send a human message"),
        (
            "chat",
            {**VALID["chat"], "votes": 3, "min_votes": 4},
            None,
            "min_votes",
            "between 1 and votes (3)",
        ),
        (
            "chat",
            {"messages": [{"role": "user", "content": "x" * 30}]},
            {"max_input_chars": 20},
            "task",
            "above the limit of 20",
        ),
        ("feedback", {"trace_id": "abc123", "score": "meh"}, None, "score", "bad score 'meh'"),
        ("feedback", {"trace_id": "abc123"}, None, "score", "give `score`"),
        (
            "release",
            {"subject": "playbook/support", "action": "release"},
            None,
            "version",
            "release needs a version",
        ),
        (
            "release",
            {"subject": "playbook/support", "action": "release", "version": 2, "error_rate": 0.7},
            None,
            "error_rate",
            "error_rate must be a number above 0 and below 0.5, got 0.7",
        ),
        (
            "release",
            {
                "subject": "playbook/support",
                "action": "release",
                "version": 2,
                "min_runs": 90,
                "max_runs": 80,
            },
            None,
            "min_runs",
            "need 1 <= min runs <= max runs, got 90 and 80",
        ),
        (
            "loop",
            {"share": 100},
            None,
            "share",
            "share must be a number above 0 and below 100, got 100",
        ),
        ("stats", {"since": "yesterday"}, None, "since", "bad --since 'yesterday'"),
        ("solve", ["task"], None, None, "must be an object"),
        ("nonesuch", TASK, None, None, "unknown graph 'nonesuch'"),
    ],
)
def test_what_cannot_run_is_refused_naming_the_field(graph, run_input, context, field, says):
    with pytest.raises(RunInputError) as refused:
        check_run_input(graph, run_input, context)
    assert refused.value.field == field and says in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)


def test_what_can_run_passes_and_gives_the_resolved_context():
    ctx = check_run_input(
        "solve", {**TASK, "mode": "vote", "votes": 3, "playbook": "support"}, {"max_concurrency": 2}
    )
    assert (
        ctx.max_concurrency == 2 and ctx.max_attempts is not None
    )  # the rest from the process settings
    check_run_input(
        "plan",
        {"task": "Add 2 and 2, then write a note.", "max_replans": 0, "test_command": "true"},
    )
    check_run_input(
        "solve", {"document": {"name": "a.txt", "base64": "aGk="}}
    )  # read (and checked) by the run
    check_run_input(
        "learn", {"tasks": [{"input": "1 + 1?"}] * 1000, "epochs": 100}
    )  # 100,000 task runs: the most


def test_a_follow_up_on_a_thread_may_leave_the_task_out():
    with pytest.raises(RunInputError):
        check_run_input("solve", {"question": "And half of that?"})
    check_run_input("solve", {"question": "And half of that?"}, continues_thread=True)
    check_run_input("chat", {"votes": 3}, continues_thread=True)
    with pytest.raises(RunInputError):  # but its other fields are checked all the same
        check_run_input("solve", {"votes": 0}, continues_thread=True)


def test_every_caller_setting_of_context_is_there_with_bounds_and_the_code_only_ones_are_not():
    assert set(RunContext.model_fields) == set(RUN_SETTINGS) and not set(CODE_ONLY) & set(
        RunContext.model_fields
    )
    for name in RUN_SETTINGS:  # an upper bound on every number and text a caller may set
        if name not in ("early_stop", "vote_plan"):  # a yes/no and a choice of three names
            assert {"le", "lt", "max_length"} & set(bounds(name)), name
    assert (
        checked_context(None).max_concurrency is not None
        and checked_context({}).max_concurrency is not None
    )


@pytest.fixture
def server(monkeypatch):
    """The process settings of a server whose operator set a few of them."""
    for name, value in {
        "PARALLAX_MAX_TOKENS": "500",
        "PARALLAX_MAX_ATTEMPTS": "3",
        "PARALLAX_STRAGGLER_FACTOR": "3",
        "PARALLAX_MODEL": "small",
        "PARALLAX_JUDGE_MODEL": "judge",
    }.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("PARALLAX_ALLOWED_MODELS", raising=False)
    reload_settings()
    yield monkeypatch
    reload_settings()


@pytest.mark.parametrize(
    ("context", "field", "says"),
    [
        (
            {"max_tokens": 501},
            "context.max_tokens",
            (
                "context.max_tokens must be at most 500 on this server (PARALLAX_MAX_TOKENS), got"
                " 501: lower it or leave it out"
            ),
        ),
        (
            {"max_attempts": 4},
            "context.max_attempts",
            "at most 3 on this server (PARALLAX_MAX_ATTEMPTS)",
        ),
        (
            {"max_input_chars": 2_000_001},
            "context.max_input_chars",
            "at most 2000000 on this server",
        ),
        ({"plan_max_tasks": 21}, "context.plan_max_tasks", "at most 20 on this server"),
        ({"max_reasks": 3}, "context.max_reasks", "at most 2 on this server (PARALLAX_MAX_REASKS)"),
        (
            {"straggler_factor": 0.5},
            "context.straggler_factor",
            "at least 3.0 or 0 (no backup copies) on this server",
        ),
        ({"straggler_min_s": 0.5}, "context.straggler_min_s", "at least 1.0 on this server"),
        (
            {"model": "gpt-5"},
            "context.model",
            "context.model 'gpt-5' is not a model this server serves: use one of judge, small",
        ),
        (
            {"vote_models": "small,gpt-5"},
            "context.vote_models",
            "'gpt-5' is not a model this server serves",
        ),
    ],
)
def test_a_served_caller_may_not_raise_what_costs_the_operator(server, context, field, says):
    with pytest.raises(RunInputError) as refused:
        check_run_input("solve", TASK, context, served=True)
    assert refused.value.field == field and says in str(refused.value), str(refused.value)
    check_run_input(
        "solve", TASK, context
    )  # the same context off the served API: the caller's own process
    with pytest.raises(RunInputError):
        checked_context(
            context, served=True
        )  # as the server checks the context of a run with no input


def test_a_served_caller_may_lower_a_ceiling_raise_a_floor_and_pick_an_allowed_model(server):
    ctx = check_run_input(
        "solve",
        TASK,
        {
            "max_tokens": 100,
            "max_attempts": 1,
            "straggler_factor": 0,
            "straggler_min_s": 5,
            "model": "small",
            "judge_model": "",
        },
        served=True,
    )
    assert (ctx.max_tokens, ctx.max_attempts, ctx.straggler_factor, ctx.model) == (
        100,
        1,
        0,
        "small",
    )
    server.setenv(
        "PARALLAX_STRAGGLER_FACTOR", "0"
    )  # no backup copies on this server: a caller may not start them
    reload_settings()
    with pytest.raises(RunInputError, match="context.straggler_factor must be 0 on this server"):
        check_run_input("solve", TASK, {"straggler_factor": 5}, served=True)
    server.setenv("PARALLAX_ALLOWED_MODELS", "gpt-5, gpt-5-mini")
    reload_settings()
    assert check_run_input(
        "solve", TASK, {"vote_models": "gpt-5,gpt-5-mini"}, served=True
    ).vote_models
    with pytest.raises(
        RunInputError,
        match="'small' is not a model this server serves: use one of gpt-5, gpt-5-mini",
    ):
        check_run_input(
            "solve", TASK, {"model": "small"}, served=True
        )  # the list replaces the configured ones


@pytest.mark.parametrize(
    ("graph", "run_input", "field", "says"),
    [
        (
            "solve",
            {**TASK, "mode": "speculate", "check": "touch /tmp/x"},
            "check",
            "the server runs no command for a caller",
        ),
        (
            "solve",
            {**TASK, "mode": "speculate", "repo": "/srv"},
            "repo",
            "opens no folder of its own disk",
        ),
        (
            "plan",
            {**TASK, "test_command": "env"},
            "test_command",
            "the server runs no command for a caller",
        ),
        ("solve", {"document": "/etc/passwd"}, "document", "not as a path"),
    ],
)
def test_what_the_server_never_does_for_a_caller_is_refused_on_the_served_path(
    graph, run_input, field, says
):
    with pytest.raises(RunInputError) as refused:
        check_run_input(graph, run_input, served=True)
    assert refused.value.field == field and says in str(refused.value)
