"""A plan run's first node: check the input, start the state afresh, settle the tenant.

See docs/plan.md (start_plan).
"""

from __future__ import annotations

import asyncio
import uuid
from typing import Any

from langgraph.runtime import Runtime
from langgraph.types import Overwrite

from parallax.logic.routing import InvalidInput, validate_plan_input
from parallax.runtime.run_context import context_of, served, tenant_of
from parallax.runtime.worktrees import GitError, head_commit, repository_root
from parallax.state.context import Context
from parallax.state.plan import PlanState
from parallax.state.solve import NEW_RUN

NEW_PLAN_RUN = {
    **NEW_RUN,
    "round": 0,
    "plans": [],
    "tasks": Overwrite([]),
    "board": Overwrite({}),
    "stop": "",
    "decision": "",
    "plan_error": "",
    "planned": False,
}
"""What a plan run starts from: a run's outcome, and the plan's own channels (`Overwrite` empties
tasks and board)."""


def leftovers(state: PlanState) -> dict[str, Any]:
    """The previous run's reported `plan` and `mode`, which a new run must not take for input."""
    if "trace_id" not in state:  # the thread's first run: everything in state is input
        return {}
    stale: dict[str, Any] = {}
    if state.get("plan") and state.get("plans") and state["plan"] == state["plans"][-1]:
        stale["plan"] = None
    if state.get("mode", "auto") not in ("auto", "plan"):
        stale["mode"] = "auto"
    return stale


async def start_plan(state: PlanState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Checks, request and document, repository and its base commit; the run's outcome starts
    empty."""
    ctx = context_of(runtime)
    stale = leftovers(state)
    given: dict[str, Any] = {**state, **stale}  # the input, without what the last run left behind
    given.pop(
        "document", None
    )  # the plan's own channel (the text a request is about), no input of a caller
    if "plan" in stale:
        del given["plan"]  # the last run's plan, not input (the channel is emptied below)
    validate_plan_input(given, ctx)
    question = given.get("question", "")
    request, document = (question, given["task"]) if question.strip() else (given["task"], "")
    start = {
        **NEW_PLAN_RUN,
        **stale,
        "trace_id": uuid.uuid4().hex,
        "request": request,
        "document": document,
        "mode": "plan" if given.get("mode", "auto") == "plan" else "auto",
        # on the graph API the key's tenant (its tasks, playbook and trace are that tenant's), else
        # the input's
        "tenant": tenant_of(given.get("tenant")),
    }
    if given.get("repo"):
        if served():  # an API caller must not name paths on the server's disk
            raise InvalidInput(
                "edit tasks on a repository are not served over the graph API: "
                "run `parallax run --mode plan --repo PATH` on the machine that holds it"
            )
        try:
            root = await asyncio.to_thread(repository_root, given["repo"])
            start.update(repo=str(root), repo_base=await asyncio.to_thread(head_commit, root))
        except GitError as exc:
            raise InvalidInput(
                f"--repo {given['repo']}: {exc} (give a git repository with at least one commit)"
            ) from None
    return start
