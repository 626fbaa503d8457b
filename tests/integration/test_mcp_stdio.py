"""`parallax mcp` over stdio, driven by the official MCP SDK's client as a desktop agent would drive
it.

The tools run on the CLI's store (PARALLAX_HOME) against the fault server with a scripted
reply (sure answers "4"); what a tool did is then read back with the CLI (`parallax trace`).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from mcp import Client
from mcp.client.stdio import StdioServerParameters

from testkit.fault_server import FaultConfig, FaultServer
from testkit.readme_examples import python_block, run_block
from testkit.review_model import review_reply

pytestmark = pytest.mark.integration
PARALLAX = Path(sys.executable).with_name("parallax")


@pytest.fixture
def model_env(tmp_path):
    with FaultServer(FaultConfig(reply=review_reply)) as url:
        yield {
            "OPENAI_BASE_URL": url,
            "PARALLAX_MODEL": "fault-model",
            "PARALLAX_RESPONSE_FORMAT": "json_schema",
            "PARALLAX_STRAGGLER_FACTOR": "0",
            "PARALLAX_HOME": str(tmp_path / "home"),
            "LANGSMITH_TRACING": "false",
        }


def cli(env: dict, *args: str) -> dict:
    done = subprocess.run(
        [str(PARALLAX), *args, "--json"],
        env={**os.environ, **env},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


async def test_solve_plan_and_feedback_over_stdio_are_runs_of_the_cli_store(model_env):
    server = StdioServerParameters(
        command=str(PARALLAX),
        args=["mcp", "--tenant", "acme"],
        env={**model_env, "PATH": os.environ["PATH"]},
    )
    schema = {"type": "object", "properties": {"total": {"type": "number"}}, "required": ["total"]}
    async with Client(server) as client:
        assert sorted(t.name for t in (await client.list_tools()).tools) == [
            "feedback",
            "plan",
            "solve",
        ]
        voted = await client.call_tool(
            "solve", {"task": "What is 2 + 2?", "mode": "vote", "votes": 3}
        )
        typed = await client.call_tool(
            "solve", {"task": "Invoice: total 41.50", "mode": "direct", "output_schema": schema}
        )
        planned = await client.call_tool(
            "plan", {"task": "Compute 2 + 2, then write a one-line note about it."}
        )
        scored = await client.call_tool(
            "feedback",
            {
                "trace_id": voted.structured_content["trace_id"],
                "score": "down",
                "comment": "checked by hand",
            },
        )
        bad = await client.call_tool("solve", {"task": "   "})
        unknown = await client.call_tool("feedback", {"trace_id": "nope", "score": 1})
    run = voted.structured_content
    assert not voted.is_error and (
        run["status"],
        run["answer"],
        run["vote_counts"],
        run["mode"],
    ) == ("ok", "4", {"4": 3}, "vote")
    assert run["confidence"] == 1.0 and run["thread_id"]
    assert (
        typed.structured_content["data"] == {"total": 1}
        and typed.structured_content["status"] == "ok"
    )
    assert planned.structured_content["mode"] == "plan" and planned.structured_content["trace_id"]
    assert scored.structured_content == {
        "trace_id": run["trace_id"],
        "score": 0.0,
        "feedback_entries": 1,
    }
    assert bad.is_error and "empty" in bad.content[0].text
    assert unknown.is_error and "no trace 'nope'" in unknown.content[0].text
    # the runs are the CLI's: their traces are under the tenant, with the feedback; resumable
    # threads
    trace = cli(model_env, "trace", run["trace_id"], "--tenant", "acme")
    assert trace["tenant"] == "acme" and trace["feedback"][-1]["comment"] == "checked by hand"
    assert sorted(b["kind"] for b in trace["branches"]) == ["safety", "vote", "vote", "vote"]
    resumed = cli(model_env, "resume", run["thread_id"])
    assert resumed["trace_id"] == run["trace_id"]


def test_the_readmes_stdio_example_runs(model_env):
    out = run_block(python_block('args=["mcp"], env=dict(os.environ)'), model_env).splitlines()
    assert out[0] == "['solve', 'plan', 'feedback']"
    status, confidence, answer, trace_id = out[1].split()
    assert (status, float(confidence), answer) == ("ok", 1.0, "4") and len(trace_id) == 32
    assert out[2] == "reason: none"
    assert cli(model_env, "trace", trace_id)["feedback"][-1]["score"] == 1.0
