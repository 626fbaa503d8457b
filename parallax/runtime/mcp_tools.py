"""Parallax's MCP tools (solve, plan, feedback), built on the official MCP Python SDK, over any backend.

Why one module for two faces: `parallax mcp` (stdio, for a desktop agent, on the CLI's store)
and `/mcp` on the served API (Streamable HTTP, through the server's own Agent Protocol
endpoints) must offer the same tools with the same arguments and the same results; only
where a run happens differs. So the tools are declared here once and call a `Backend`:
parallax/cli/mcp.py hands in one that runs the graphs in process, parallax/server/mcp_face.py
one that runs them on the server as the caller's tenant. Results are pydantic models, so a
client gets them as structured content with an output schema (and as JSON text).

A tool that cannot do what it was asked (bad input, an unknown trace, a bad score, the model
server, a 429) raises ToolError with Parallax's one-line message, and the SDK answers the call
with `isError` and that message, so the agent reads what to change. Any other exception is a
crash: the SDK answers with a generic message and keeps the traceback in the server's log.
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, Literal, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field

from parallax.runtime.model_server import ModelServerError

T = TypeVar("T")

SolveMode = Literal["auto", "direct", "vote", "section", "speculate"]
RUN_KEYS = ("status", "confidence", "answer", "data", "trace_id", "mode", "reason", "vote_counts", "spend")
INSTRUCTIONS = ("Parallax answers a task through parallel branches (direct, vote, section, speculate) and a "
                "checked merge; "
                "plan runs a DAG of tasks. Every result says status (ok | needs_review | failed), confidence and "
                "trace_id; give feedback on a trace when you know whether its answer was right.")


class RunResult(BaseModel):
    """What a solve or plan run gave back."""

    status: Literal["ok", "needs_review", "failed"]
    confidence: float = Field(description="0..1: how sure the merge is (a vote's share, 0 for failed)")
    answer: str = ""
    data: dict[str, Any] | None = Field(None, description="with an output_schema: the settled object, else null")
    trace_id: str = Field(description="the run's trace: give feedback on it, or read it with `parallax trace`")
    thread_id: str = ""
    mode: str = ""
    reason: str = Field("", description="why the run is not ok, or what it noticed")
    vote_counts: dict[str, int] = Field(default_factory=dict)
    spend: dict[str, Any] | None = Field(None, description="what the run spent: tokens, and cost_usd (null: a model it "
                                                           "used has no price)")


class FeedbackResult(BaseModel):
    trace_id: str
    score: float = Field(description="the run's feedback now: its latest score")
    feedback_entries: int


def run_result(out: dict[str, Any], thread_id: str = "") -> RunResult:
    """A run's output (solve or plan graph) as the tools' result."""
    return RunResult(**{k: out[k] for k in RUN_KEYS if out.get(k) is not None}, thread_id=thread_id)


class Backend(Protocol):
    """Where the tools' runs happen. `ctx` is the MCP request (its HTTP headers, on Streamable HTTP)."""

    async def solve(self, run_input: dict[str, Any], ctx: Context) -> RunResult: ...

    async def plan(self, run_input: dict[str, Any], ctx: Context) -> RunResult: ...

    async def feedback(self, trace_id: str, score: str | float, comment: str, ctx: Context) -> FeedbackResult: ...


async def reported(call: Awaitable[T]) -> T:
    """`await call`, its refusals (ValueError: input, store, feedback, tenant; the model server) as ToolError."""
    try:
        return await call
    except (ValueError, ModelServerError) as exc:
        raise ToolError(str(exc)) from exc


def _budget(max_cost: float | None, max_tokens: int | None) -> dict[str, Any]:
    return {k: v for k, v in (("max_cost", max_cost), ("max_tokens", max_tokens)) if v is not None}


def build_server(backend: Backend, name: str = "parallax") -> MCPServer:
    """An MCPServer with the solve, plan and feedback tools, each calling `backend`."""
    server = MCPServer(name, instructions=INSTRUCTIONS, log_level="WARNING")  # stderr is the agent's log

    @server.tool()
    async def solve(task: str, ctx: Context, mode: SolveMode = "auto", votes: int = 5,
                    output_schema: dict[str, Any] | None = None, question: str = "",
                    playbook: str = "default", candidates: int = 3, max_cost: float | None = None,
                    max_tokens: int | None = None) -> RunResult:
        """Answer one task with Parallax: `auto` routes it; `vote` asks `votes` independent answers and
        keeps the majority; `section` reads a long document in slices (then `question` is what to ask of
        it); `speculate` drafts `candidates` answers, each its own way, and a judge picks one comparing
        them pairwise both ways round (for a function, a patch, a draft); `direct` is one call. With
        `output_schema` (a JSON Schema of an object) every branch is asked for that object and `data`
        holds the one the merge settled on. `max_cost` (USD) and `max_tokens` are the run's budget, all its model
        calls together: past it the run stops with what it has, needs_review, "budget reached"."""
        run_input: dict[str, Any] = {"task": task, "mode": mode, "votes": votes, "playbook": playbook,
                                     **_budget(max_cost, max_tokens)}
        if mode == "speculate":
            run_input["candidates"] = candidates
        if question:
            run_input["question"] = question
        if output_schema is not None:
            run_input["output_schema"] = output_schema
        return await reported(backend.solve(run_input, ctx))

    @server.tool()
    async def plan(task: str, ctx: Context, playbook: str = "default", max_cost: float | None = None,
                   max_tokens: int | None = None) -> RunResult:
        """Run a request with several steps or deliverables as a plan: a checked DAG of tasks, each
        started when its inputs exist, joined and verified into one answer. `max_cost` / `max_tokens`: its budget,
        checked before each task."""
        return await reported(backend.plan({"task": task, "mode": "plan", "playbook": playbook,
                                            **_budget(max_cost, max_tokens)}, ctx))

    @server.tool()
    async def feedback(trace_id: str, score: str | float, ctx: Context, comment: str = "") -> FeedbackResult:
        """Say whether a run's answer was right: score 0..1 (1 = right) or "up" / "down", with an optional
        comment. It is stored with the run's trace and counts in stats, exports and gray releases."""
        return await reported(backend.feedback(trace_id, score, comment, ctx))

    return server
