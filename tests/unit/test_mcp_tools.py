"""The MCP tools' contract, in process with the SDK's client and a recording backend: names, arguments, results,
and a refusal reaching the agent as its one line (a crash does not leak its text)."""

from __future__ import annotations

from mcp import Client

from parallax.logic.routing import InvalidInput
from parallax.runtime.mcp_tools import FeedbackResult, build_server, run_result


class Recording:
    def __init__(self):
        self.calls = []

    async def solve(self, run_input, ctx):
        self.calls.append(("solve", run_input))
        if run_input["task"] == "bad":
            raise InvalidInput("the task is empty: give a question or a document")
        if run_input["task"] == "crash":
            raise KeyError("internal detail")
        return run_result({"status": "ok", "confidence": 0.6, "answer": "42", "trace_id": "t1", "mode": "vote",
                           "vote_counts": {"42": 3, "41": 2}, "branches": [{"id": "b"}]}, "th1")

    async def plan(self, run_input, ctx):
        self.calls.append(("plan", run_input))
        return run_result({"status": "needs_review", "confidence": 0.5, "answer": "a", "trace_id": "t2", "mode": "plan"})

    async def feedback(self, trace_id, score, comment, ctx):
        self.calls.append(("feedback", (trace_id, score, comment)))
        return FeedbackResult(trace_id=trace_id, score=1.0, feedback_entries=1)


async def test_tools_take_the_documented_arguments_and_return_the_run():
    backend = Recording()
    schema = {"type": "object", "properties": {"total": {"type": "number"}}}
    async with Client(build_server(backend)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        solved = await client.call_tool("solve", {"task": "What is 6 * 7?", "mode": "vote", "votes": 5,
                                                  "output_schema": schema})
        planned = await client.call_tool("plan", {"task": "Do A, then B."})
        scored = await client.call_tool("feedback", {"trace_id": "t1", "score": "up", "comment": "right"})
    assert sorted(tools) == ["feedback", "plan", "solve"]
    assert set(tools["solve"].input_schema["properties"]) >= {"task", "mode", "votes", "output_schema"}
    assert tools["solve"].input_schema["required"] == ["task"]
    assert solved.structured_content == {"status": "ok", "confidence": 0.6, "answer": "42", "data": None, "trace_id": "t1",
                                         "thread_id": "th1", "mode": "vote", "reason": "", "vote_counts": {"42": 3, "41": 2}}
    assert planned.structured_content["status"] == "needs_review"
    assert scored.structured_content["score"] == 1.0
    assert backend.calls == [
        ("solve", {"task": "What is 6 * 7?", "mode": "vote", "votes": 5, "playbook": "default", "output_schema": schema}),
        ("plan", {"task": "Do A, then B.", "mode": "plan", "playbook": "default"}),
        ("feedback", ("t1", "up", "right")),
    ]


async def test_solve_speculates_with_its_candidates():
    backend = Recording()
    async with Client(build_server(backend)) as client:
        tools = {t.name: t for t in (await client.list_tools()).tools}
        await client.call_tool("solve", {"task": "Write a haiku about rain.", "mode": "speculate", "candidates": 4})
    assert "speculate" in tools["solve"].input_schema["properties"]["mode"]["enum"]
    assert backend.calls == [("solve", {"task": "Write a haiku about rain.", "mode": "speculate", "votes": 5,
                                        "playbook": "default", "candidates": 4})]


async def test_a_refusal_reaches_the_agent_as_one_line_and_a_crash_does_not_leak():
    async with Client(build_server(Recording())) as client:
        refused = await client.call_tool("solve", {"task": "bad"})
        crashed = await client.call_tool("solve", {"task": "crash"})
    assert refused.is_error and refused.content[0].text.endswith("the task is empty: give a question or a document")
    assert crashed.is_error and "internal detail" not in crashed.content[0].text
