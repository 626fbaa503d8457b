"""`parallax mcp`: Parallax's MCP tools over stdio, for a desktop agent, run in this process.

Stdout is the protocol: nothing else is printed there. See README.md, "MCP tools (agents)".
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING, Annotated, Any

import typer

from parallax.cli.common import Tenant, checked_tenant, durable_graph, open_store
from parallax.state.context import Context

if TYPE_CHECKING:
    from langgraph.graph import StateGraph
    from mcp.server.mcpserver import Context as McpContext

    from parallax.runtime.mcp_tools import FeedbackResult, RunResult

GRAPH_KEY = "parallax_graph"


class LocalBackend:
    """Runs the tools' graphs in this process on the CLI's store, as one tenant."""

    def __init__(self, tenant: str, context: Context | None = None) -> None:
        self.tenant, self.context = tenant, context or Context()

    async def _run(self, name: str, run_input: dict[str, Any]) -> RunResult:
        from parallax.logic.routing import validate, validate_plan_input
        from parallax.runtime.mcp_tools import run_result
        from parallax.runtime.run_context import resolved

        builder: StateGraph[Any, Any, Any, Any]
        if name == "plan":
            from parallax.graphs.plan import builder as plan_builder

            builder = plan_builder
        else:
            from parallax.graphs.solve import builder as solve_builder

            builder = solve_builder
        payload = {**run_input, "tenant": self.tenant}
        (validate_plan_input if name == "plan" else validate)(payload, resolved(self.context))
        thread_id = uuid.uuid4().hex
        config = {"configurable": {"thread_id": thread_id}, "metadata": {GRAPH_KEY: name}}
        async with durable_graph(builder) as graph:
            out = await graph.ainvoke(payload, config, context=self.context, durability="sync")
        return run_result(out, thread_id)

    async def solve(self, run_input: dict[str, Any], ctx: McpContext) -> RunResult:
        return await self._run("solve", run_input)

    async def plan(self, run_input: dict[str, Any], ctx: McpContext) -> RunResult:
        return await self._run("plan", run_input)

    async def feedback(
        self, trace_id: str, score: str | float, comment: str, ctx: McpContext
    ) -> FeedbackResult:
        from parallax.logic.feedback import give_feedback
        from parallax.logic.run_record import latest_score
        from parallax.runtime.mcp_tools import FeedbackResult

        async with open_store(write=True) as store:
            trace = await give_feedback(store, self.tenant, trace_id, score, comment, "mcp")
        return FeedbackResult(
            trace_id=trace_id, score=latest_score(trace), feedback_entries=len(trace["feedback"])
        )


def mcp(
    cli: typer.Context,
    tenant: Tenant = "default",
    name: Annotated[str, typer.Option(help="The server name agents see.")] = "parallax",
) -> None:
    """Serve Parallax's MCP tools (solve, plan, feedback) over stdio, on the CLI's store."""
    from parallax.logic.run_input import check_run_input
    from parallax.runtime.mcp_tools import build_server

    context = cli.obj if isinstance(cli.obj, Context) else None
    build_server(LocalBackend(checked_tenant(tenant), context), name, check_run_input).run("stdio")
