"""The MCP tools' contract, in process with the SDK's client and a recording backend: names,
arguments, results, and a refusal reaching the agent as its one line (a crash does not leak its
text). Then the tools over `parallax mcp`'s own backend (cli/mcp.py) against the scripted model
server: a vote on the agent's object asks in waves and stops when its required fields have settled.
"""

from __future__ import annotations

from mcp import Client

from parallax.cli.mcp import LocalBackend
from parallax.logic.routing import InvalidInput
from parallax.runtime.mcp_tools import FeedbackResult, build_server, run_result
from testkit.extraction_model import ExtractionModel
from testkit.fault_server import FaultConfig, chat_log

FILING = {
    "type": "object",
    "properties": {
        "revenue": {"type": "number"},
        "currency": {"type": "string"},
        "segments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["revenue", "currency"],
}


class Recording:
    def __init__(self):
        self.calls = []

    async def solve(self, run_input, ctx):
        self.calls.append(("solve", run_input))
        if run_input["task"] == "bad":
            raise InvalidInput("the task is empty: give a question or a document")
        if run_input["task"] == "crash":
            raise KeyError("internal detail")
        return run_result(
            {
                "status": "ok",
                "confidence": 0.6,
                "answer": "42",
                "trace_id": "t1",
                "mode": "vote",
                "vote_counts": {"42": 3, "41": 2},
                "branches": [{"id": "b"}],
            },
            "th1",
        )

    async def plan(self, run_input, ctx):
        self.calls.append(("plan", run_input))
        return run_result(
            {
                "status": "needs_review",
                "confidence": 0.5,
                "answer": "a",
                "trace_id": "t2",
                "mode": "plan",
            }
        )

    async def feedback(self, trace_id, score, comment, ctx):
        self.calls.append(("feedback", (trace_id, score, comment)))
        return FeedbackResult(trace_id=trace_id, score=1.0, feedback_entries=1)


async def test_tools_take_the_documented_arguments_and_return_the_run():
    backend = Recording()
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}
    async with Client(build_server(backend)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        solved = await client.call_tool(
            "solve", {"task": "What is 6 * 7?", "mode": "vote", "votes": 5, "output_schema": schema}
        )
        planned = await client.call_tool("plan", {"task": "Do A, then B."})
        scored = await client.call_tool(
            "feedback", {"trace_id": "t1", "score": "up", "comment": "right"}
        )
    assert sorted(tools) == ["feedback", "plan", "solve"]
    assert set(tools["solve"].input_schema["properties"]) >= {
        "task",
        "mode",
        "votes",
        "output_schema",
    }
    assert tools["solve"].input_schema["required"] == ["task"]
    assert solved.structured_content == {
        "status": "ok",
        "confidence": 0.6,
        "answer": "42",
        "data": None,
        "trace_id": "t1",
        "thread_id": "th1",
        "mode": "vote",
        "reason": "",
        "vote_counts": {"42": 3, "41": 2},
        "spend": None,
        "note": "",
    }
    assert planned.structured_content["status"] == "needs_review"
    assert scored.structured_content["score"] == 1.0
    assert backend.calls == [
        (
            "solve",
            {
                "task": "What is 6 * 7?",
                "mode": "vote",
                "votes": 5,
                "playbook": "default",
                "output_schema": schema,
            },
        ),
        ("plan", {"task": "Do A, then B.", "mode": "plan", "playbook": "default"}),
        ("feedback", ("t1", "up", "right")),
    ]


async def test_solve_and_plan_take_a_budget():
    backend = Recording()
    async with Client(build_server(backend)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        await client.call_tool(
            "solve", {"task": "What is 6 * 7?", "max_cost": 0.01, "max_tokens": 5000}
        )
        await client.call_tool("plan", {"task": "Do A, then B.", "max_tokens": 900})
    assert {"max_cost", "max_tokens"} <= set(tools["solve"].input_schema["properties"])
    assert {"max_cost", "max_tokens"} <= set(tools["plan"].input_schema["properties"])
    assert backend.calls == [
        (
            "solve",
            {
                "task": "What is 6 * 7?",
                "mode": "auto",
                "votes": 5,
                "playbook": "default",
                "max_cost": 0.01,
                "max_tokens": 5000,
            },
        ),
        (
            "plan",
            {"task": "Do A, then B.", "mode": "plan", "playbook": "default", "max_tokens": 900},
        ),
    ]


async def test_solve_speculates_with_its_candidates():
    backend = Recording()
    async with Client(build_server(backend)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        await client.call_tool(
            "solve", {"task": "Write a haiku about rain.", "mode": "speculate", "candidates": 4}
        )
    assert "speculate" in tools["solve"].input_schema["properties"]["mode"]["enum"]
    assert backend.calls == [
        (
            "solve",
            {
                "task": "Write a haiku about rain.",
                "mode": "speculate",
                "votes": 5,
                "playbook": "default",
                "candidates": 4,
            },
        )
    ]


async def test_a_refusal_reaches_the_agent_as_one_line_and_a_crash_does_not_leak():
    async with Client(build_server(Recording())) as client:
        refused = await client.call_tool("solve", {"task": "bad"})
        crashed = await client.call_tool("solve", {"task": "crash"})
    assert refused.is_error and refused.content[0].text.endswith(
        "the task is empty: give a question or a document"
    )
    assert crashed.is_error and "internal detail" not in crashed.content[0].text


async def test_a_bad_argument_is_refused_before_any_run_with_the_sentence_every_face_says(
    monkeypatch,
):
    """The tools' arguments are checked by the one definition of a valid run (as /mcp hands it in:
    served), so the agent reads the CLI's, /v1's and the graph API's sentence, not pydantic's; the
    input schema shows the bounds.
    """
    from functools import partial

    from parallax.logic.run_input import check_run_input
    from parallax.runtime.settings import reload_settings

    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "384")
    reload_settings()
    backend = Recording()
    async with Client(build_server(backend, check=partial(check_run_input, served=True))) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        votes = await client.call_tool(
            "solve", {"task": "What is 6 * 7?", "mode": "vote", "votes": 1001}
        )
        typed = await client.call_tool("solve", {"task": "What is 6 * 7?", "votes": "five"})
        schema = await client.call_tool("plan", {"task": "Do A, then B.", "max_tokens": 0})
        score = await client.call_tool("feedback", {"trace_id": "t1", "score": "meh"})
    assert votes.is_error and votes.content[0].text.endswith(
        ": votes must be a whole number from 1 to 1000, got 1001"
    )
    assert typed.is_error and typed.content[0].text.endswith(
        ": votes must be a whole number from 1 to 1000, got 'five'"
    )
    assert schema.is_error and schema.content[0].text.endswith(
        "max_tokens must be a whole number from 1 to 10000000000, got 0"
    )
    assert score.is_error and score.content[0].text.endswith(
        "bad score 'meh': give a number from 0 to 1, or up / down"
    )
    assert "validation error" not in votes.content[0].text and "\n" not in votes.content[0].text
    assert backend.calls == []  # nothing ran
    assert {
        k: tools["solve"].input_schema["properties"]["votes"][k] for k in ("minimum", "maximum")
    } == {"minimum": 1, "maximum": 1000}
    reload_settings()


async def test_a_vote_on_the_agents_object_stops_after_the_first_wave_when_required_fields_agree(
    scripted_endpoint,
):
    url = scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(
                answers=lambda i: {
                    "revenue": 4796,
                    "currency": "USD",
                    "segments": [["Print"], [], ["Media"]][i % 3],
                }
            )
        )
    )
    async with Client(build_server(LocalBackend("default"))) as client:
        solved = await client.call_tool(
            "solve",
            {
                "task": "What are ACME's revenue and currency?",
                "mode": "vote",
                "votes": 8,
                "output_schema": FILING,
            },
        )
    run = solved.structured_content
    assert not solved.is_error and (run["status"], run["mode"], run["confidence"]) == (
        "ok",
        "vote",
        1.0,
    ), run
    # the optional list split three ways: left out, and it did not keep the vote going
    assert (
        run["data"] == {"revenue": 4796, "currency": "USD"}
        and "left out" in run["reason"]
        and "segments" in run["reason"]
    )
    assert (
        len(chat_log(url)) == 3
    )  # the first wave of at most 8 votes: the other 5 were never asked


async def test_a_vote_on_the_agents_object_with_a_split_field_asks_a_second_wave(scripted_endpoint):
    currencies = ["USD", "EUR", "USD", "USD", "USD", "USD", "USD", "USD"]
    url = scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(
                answers=lambda i: {"revenue": 4796, "currency": currencies[i % 8]}
            )
        )
    )
    async with Client(build_server(LocalBackend("default"))) as client:
        solved = await client.call_tool(
            "solve",
            {
                "task": "What are ACME's revenue and currency?",
                "mode": "vote",
                "votes": 8,
                "output_schema": FILING,
            },
        )
    run = solved.structured_content
    # currency 2-1 after the first wave; three more votes make 5-1, the first count that settles it
    # (P = 0.9375)
    assert (run["status"], run["data"], run["confidence"]) == (
        "ok",
        {"revenue": 4796, "currency": "USD"},
        0.833,
    ), run
    assert len(chat_log(url)) == 6
