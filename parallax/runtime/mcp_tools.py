"""Parallax's MCP tools (solve, plan, feedback), declared once for any backend.

`parallax mcp` (stdio) and the server's `/mcp` hand in their own `Backend`. Bad arguments are
refused before any run with `ToolError`, which the SDK returns as a tool result with `isError`.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from typing import Annotated, Any, Literal, Protocol, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from pydantic import BaseModel, Field, TypeAdapter, WithJsonSchema

from parallax.runtime.model_server import ModelServerError
from parallax.state.data_loop import FeedbackInput
from parallax.state.solve import SolveInput
from parallax.state.vocabulary import NAMED_ROUTES, listed

T = TypeVar("T")

InputCheck = Callable[[str, dict[str, Any]], object]
"""`check(graph, run_input)`: raises ValueError with a one-line reason for input the graph would
refuse (the entry points hand in logic/run_input.py's `check_run_input`: this floor may not import
it)."""


@functools.cache
def _fields(definition: Any) -> dict[str, Any]:
    properties: dict[str, Any] = TypeAdapter(definition).json_schema()["properties"]
    return properties


def argument(definition: Any, name: str, description: str) -> WithJsonSchema:
    """The input schema of a tool argument (`Annotated[Any, argument(...)]`) that is field `name` of
    a graph's input definition: that field's type and bounds, with `description`; its value is
    checked by `check` (the definition itself), not by the SDK."""
    return WithJsonSchema({**_fields(definition)[name], "description": description})


Task = Annotated[Any, argument(SolveInput, "task", "the text to work on")]
SolveMode = Annotated[
    Any, argument(SolveInput, "mode", f"auto routes it; {listed(NAMED_ROUTES)} run it that way")
]
Votes = Annotated[Any, argument(SolveInput, "votes", "vote mode: how many independent answers")]
Candidates = Annotated[
    Any, argument(SolveInput, "candidates", "speculate mode: how many candidates")
]
Playbook = Annotated[
    Any, argument(SolveInput, "playbook", "the playbook whose lessons the run reads")
]
Question = Annotated[
    Any,
    argument(SolveInput, "question", "what to ask of the task's text (section asks every slice)"),
]
OutputSchema = Annotated[
    Any, argument(SolveInput, "output_schema", "a JSON Schema of an object: what `data` holds")
]
MaxCost = Annotated[
    Any, argument(SolveInput, "max_cost", "the run's budget in USD, all its model calls together")
]
MaxTokens = Annotated[
    Any, argument(SolveInput, "max_tokens", "the run's budget in tokens (prompt plus completion)")
]
TraceId = Annotated[
    Any, argument(FeedbackInput, "trace_id", "the run's trace id (or its first characters)")
]
Score = Annotated[Any, argument(FeedbackInput, "score", '0..1 (1 = right), or "up" / "down"')]
Comment = Annotated[Any, argument(FeedbackInput, "comment", "why, in a sentence")]
RUN_KEYS = (
    "status",
    "confidence",
    "answer",
    "data",
    "trace_id",
    "mode",
    "reason",
    "vote_counts",
    "spend",
    "note",
)
INSTRUCTIONS = (
    f"Parallax answers a task through parallel branches ({', '.join(NAMED_ROUTES)}) and a checked"
    " merge; plan runs a DAG of tasks. Every result says status (ok | needs_review | failed),"
    " confidence and trace_id; give feedback on a trace when you know whether its answer was"
    " right."
)


class RunResult(BaseModel):
    """What a solve or plan run gave back."""

    status: Literal["ok", "needs_review", "failed"]
    confidence: float = Field(
        description="0..1: how sure the merge is (a vote's share, 0 for failed)"
    )
    answer: str = ""
    data: dict[str, Any] | None = Field(
        None, description="with an output_schema: the settled object, else null"
    )
    trace_id: str = Field(
        description="the run's trace: give feedback on it, or read it with `parallax trace`"
    )
    thread_id: str = ""
    mode: str = ""
    reason: str = Field("", description="why the run is not ok, or what it noticed")
    vote_counts: dict[str, int] = Field(default_factory=dict)
    spend: dict[str, Any] | None = Field(
        None,
        description="what the run spent: tokens, and cost_usd (null: a model it used has no price)",
    )
    note: str = Field(
        "", description="said beside the answer: that the embedded toy model answered, else empty"
    )


class FeedbackResult(BaseModel):
    trace_id: str
    score: float = Field(description="the run's feedback now: its latest score")
    feedback_entries: int


def run_result(out: dict[str, Any], thread_id: str = "") -> RunResult:
    """A run's output (solve or plan graph) as the tools' result."""
    return RunResult(**{k: out[k] for k in RUN_KEYS if out.get(k) is not None}, thread_id=thread_id)


class Backend(Protocol):
    """Where the tools' runs happen. `ctx` is the MCP request (its HTTP headers, on Streamable
    HTTP)."""

    async def solve(self, run_input: dict[str, Any], ctx: Context) -> RunResult: ...

    async def plan(self, run_input: dict[str, Any], ctx: Context) -> RunResult: ...

    async def feedback(
        self, trace_id: str, score: str | float, comment: str, ctx: Context
    ) -> FeedbackResult: ...


async def reported(call: Awaitable[T]) -> T:
    """`await call`, its refusals (ValueError: input, store, feedback, tenant; the model server) as
    ToolError."""
    try:
        return await call
    except (ValueError, ModelServerError) as exc:
        raise ToolError(str(exc)) from exc


def forbid_unknown_arguments(server: MCPServer) -> None:
    """Refuse an argument no tool parameter names (the SDK ignores it: a caller's `vote: 3` would
    quietly run with the default 5). The input schemas say so too (`additionalProperties: false`).
    """
    for (
        tool
    ) in server._tool_manager.list_tools():  # the SDK has no public hook for its argument models
        model = tool.fn_metadata.arg_model
        model.model_config["extra"] = "forbid"
        model.model_rebuild(force=True)
        tool.parameters["additionalProperties"] = False


def _budget(max_cost: float | None, max_tokens: int | None) -> dict[str, Any]:
    return {k: v for k, v in (("max_cost", max_cost), ("max_tokens", max_tokens)) if v is not None}


def build_server(
    backend: Backend, name: str = "parallax", check: InputCheck | None = None
) -> MCPServer:
    """An MCPServer with the solve, plan and feedback tools, each calling `backend` with input
    `check` passed."""
    server = MCPServer(
        name, instructions=INSTRUCTIONS, log_level="WARNING"
    )  # stderr is the agent's log

    def checked(graph: str, run_input: dict[str, Any]) -> dict[str, Any]:
        """The run input, or ToolError before any run: a bad argument is refused at once, on stdio
        and on /mcp alike, not met as a failed run a second later."""
        if check is not None:
            try:
                check(graph, run_input)
            except ValueError as exc:
                raise ToolError(str(exc)) from None
        return run_input

    @server.tool()
    async def solve(
        task: Task,
        ctx: Context,
        mode: SolveMode = "auto",
        votes: Votes = 5,
        output_schema: OutputSchema = None,
        question: Question = "",
        playbook: Playbook = "default",
        candidates: Candidates = 3,
        max_cost: MaxCost = None,
        max_tokens: MaxTokens = None,
    ) -> RunResult:
        """Answer one task with Parallax: `auto` routes it; `vote` asks `votes` independent answers
        and keeps the majority; `section` reads a long document in slices (then `question` is what
        to ask of it); `speculate` drafts `candidates` answers, each its own way, and a judge picks
        one comparing them pairwise both ways round (for a function, a patch, a draft); `direct` is
        one call. With `output_schema` (a JSON Schema of an object) every branch is asked for that
        object and `data` holds the one the merge settled on. `max_cost` (USD) and `max_tokens` are
        the run's budget, all its model calls together: past it the run stops with what it has,
        needs_review, "budget reached"."""
        run_input: dict[str, Any] = {
            "task": task,
            "mode": mode,
            "votes": votes,
            "playbook": playbook,
            **_budget(max_cost, max_tokens),
        }
        if mode == "speculate":
            run_input["candidates"] = candidates
        if question:
            run_input["question"] = question
        if output_schema is not None:
            run_input["output_schema"] = output_schema
        return await reported(backend.solve(checked("solve", run_input), ctx))

    @server.tool()
    async def plan(
        task: Task,
        ctx: Context,
        playbook: Playbook = "default",
        max_cost: MaxCost = None,
        max_tokens: MaxTokens = None,
    ) -> RunResult:
        """Run a request with several steps or deliverables as a plan: a checked DAG of tasks, each
        started when its inputs exist, joined and verified into one answer. `max_cost` /
        `max_tokens`: its budget, checked before each task."""
        return await reported(
            backend.plan(
                checked(
                    "plan",
                    {
                        "task": task,
                        "mode": "plan",
                        "playbook": playbook,
                        **_budget(max_cost, max_tokens),
                    },
                ),
                ctx,
            )
        )

    @server.tool()
    async def feedback(
        trace_id: TraceId, score: Score, ctx: Context, comment: Comment = ""
    ) -> FeedbackResult:
        """Say whether a run's answer was right: score 0..1 (1 = right) or "up" / "down", with an
        optional comment. It is stored with the run's trace and counts in stats, exports and gray
        releases.
        """
        checked("feedback", {"trace_id": trace_id, "score": score, "comment": comment})
        return await reported(backend.feedback(trace_id, score, comment, ctx))

    forbid_unknown_arguments(server)
    return server
