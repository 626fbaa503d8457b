"""Validate the input, pick the route, cut slices, serve the playbook and prompts.

The rules are logic/routing.py's and logic/slicing.py's; the playbook and prompts come from the
tenant's store, by label or canary (logic/releases.py), unless the run is pinned.
"""

from __future__ import annotations

import asyncio
import time
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime
from langgraph.store.base import BaseStore
from langgraph.types import Overwrite

from parallax.logic.playbook_selection import select_items
from parallax.logic.releases import serve_playbook, serve_prompts
from parallax.logic.routing import InvalidInput, choose_route, pages_of, validate
from parallax.logic.slicing import split_into_slices, split_pages
from parallax.logic.user_schema import checked_schema
from parallax.logic.vote_pricing import vote_plan
from parallax.prompts.templates import SOLVE_PROMPTS, SPECULATE_PROMPTS, TYPED_PROMPTS
from parallax.runtime.run_context import context_of, served, task_scoped_id, tenant_of
from parallax.runtime.services import services_of
from parallax.state.context import Context, setting
from parallax.state.payloads import BranchRecord
from parallax.state.records import PlaybookItemData, ServedVersion
from parallax.state.solve import NEW_RUN, SolveState
from parallax.state.vocabulary import per_slice


async def read_playbook(
    store: BaseStore | None, tenant: str, name: str, thread_key: str = ""
) -> tuple[int, list[PlaybookItemData], ServedVersion]:
    """(version, active items, how it was served) of the tenant's playbook for this thread;
    (0, [], {}) without a store. An unknown playbook other than 'default' is refused."""
    if store is None:
        return 0, [], {}
    version, served = await serve_playbook(store, tenant, name, thread_key)
    if version.version == 0 and served["arm"] == "head" and name != "default":
        raise InvalidInput(
            f"unknown playbook {name!r} for tenant {tenant!r}: learn or import it first, "
            "or leave playbook out to use 'default'"
        )
    return version.version, [item.as_data() for item in version.active], served


def read_input_document(state: SolveState) -> SolveState:
    """The input with its `document` read into `task` (and `pages`, for a PDF); a file that cannot
    be read is bad input, said in one line (runtime/documents.py). A path is read only where the
    caller owns the disk (the CLI, the Python API, `langgraph dev`): served (runtime/run_context.py)
    it is refused.
    """
    if state.get("document") is None:
        return state
    if not isinstance(state["document"], bytes | dict) and served():
        raise InvalidInput(
            'on the graph API a document is sent as {"name": ..., "base64": ...}, not as a path: '
            "the server reads no file of its own disk for a caller"
        )
    from parallax.runtime.documents import DocumentError, document_from_input, run_input

    try:
        return {**state, **run_input(document_from_input(state["document"]))}
    except DocumentError as exc:
        raise InvalidInput(str(exc)) from None


async def checked_speculation(state: SolveState) -> SolveState:
    """A speculative run's check and repository are the caller's own machine's: a command and a path
    are run and read where the caller owns the disk (the CLI, the Python API, `langgraph dev`),
    refused when served (runtime/run_context.py); a repository must be a git repository with a
    commit (its top folder is what the run keeps).
    """
    if not (state.get("check") or state.get("repo")):
        return state
    if served():
        raise InvalidInput(
            "check commands and repositories are not served over the graph API: the server runs no "
            "command of a caller; run `parallax run --mode speculate --check ...` on your machine"
        )
    if not state.get("repo"):
        return state
    from parallax.runtime.worktrees import GitError, repository_root

    try:
        return {**state, "repo": str(await asyncio.to_thread(repository_root, state["repo"]))}
    except GitError as exc:
        raise InvalidInput(
            f"repo {state['repo']}: {exc} (give a git repository with at least one commit)"
        ) from None


def condensed_from(state: SolveState, trace_id: str) -> dict[str, Any]:
    """A chat follow-up's condense call (state/solve.py `FollowUp`) starts the run's branches, named
    as this run's: its trace lists it and `parallax stats` counts it."""
    follow_up = state.get("follow_up")
    if not follow_up:
        return {}
    record = BranchRecord.model_validate({**follow_up["condense"], "parent_id": trace_id})
    if record.kind != "condense":
        raise InvalidInput(
            "follow_up.condense must be the record of a condense call (the chat graph sets it)"
        )
    return {"branches": Overwrite([record.model_dump()])}


async def route(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    """Validate the input, pick the route, cut slices and serve the playbook and prompts."""
    started = time.time()
    ctx = context_of(runtime)
    state = await asyncio.to_thread(
        read_input_document, state
    )  # a parser's child process: not on the event loop
    if not state.get("task") and state.get("pages"):
        state = {**state, "task": "\n\n".join(state["pages"])}
    validate(state, ctx)
    schema = (
        checked_schema(state["output_schema"]) if state.get("output_schema") is not None else None
    )
    question = state.get("question", "")
    mode = state.get("mode", "auto")
    chosen = (
        choose_route(state["task"], question, setting(ctx.slice_chars), bool(state.get("check")))
        if mode == "auto"
        else mode
    )
    if chosen == "speculate":
        state = await checked_speculation(state)
    trace_id = task_scoped_id()  # the same if this run is taken over and routed again
    thread_key = str((get_config().get("configurable") or {}).get("thread_id") or trace_id)
    tenant, name = tenant_of(state.get("tenant")), state.get("playbook", "default")
    pinned = "playbook_items" in state
    served: dict[str, ServedVersion] = {}
    if pinned:
        version, items = state.get("playbook_version", 0), state["playbook_items"]
    else:
        version, items, choice = await read_playbook(runtime.store, tenant, name, thread_key)
        if choice:
            served[f"playbook/{name}"] = choice
    overrides = state.get("prompt_overrides") or {}
    names = (
        SOLVE_PROMPTS
        + (TYPED_PROMPTS if schema else ())
        + (SPECULATE_PROMPTS if chosen == "speculate" else ())
    )
    served_here = tuple(n for n in names if n not in overrides)  # a learn run pins them all
    prompts = (
        await serve_prompts(runtime.store, tenant, served_here, thread_key, allow_canary=not pinned)
        if served_here
        else {}
    )
    for prompt_name, override in overrides.items():
        prompts[prompt_name] = {
            "name": prompt_name,
            "arm": "pinned",
            "release_id": None,
            **override,
        }
    served.update(
        {
            f"prompt/{n}": {"version": p["version"], "arm": p["arm"], "release_id": p["release_id"]}
            for n, p in prompts.items()
        }
    )
    pages = pages_of(state)
    slices: list[str] = []
    slice_pages: list[list[int]] = []
    if per_slice(chosen):
        slices, slice_pages = (
            split_pages(pages, setting(ctx.slice_chars))
            if pages
            else (split_into_slices(state["task"], setting(ctx.slice_chars)), [])
        )
    branch_texts = [f"{question}\n{part}" for part in slices] or [f"{question}\n{state['task']}"]
    routed = {
        **NEW_RUN,
        **condensed_from(state, trace_id),
        **({"repo": state["repo"]} if state.get("repo") else {}),
        "consensus": False,
        "trace_id": trace_id,
        "task": state["task"],
        "document": None,
        "pages": pages,
        "output_schema": schema,
        "data": None,
        "provenance": [],
        "slice_pages": slice_pages,
        "next_wave": 0,
        "votes_asked": 0,
        "stop_reason": "",
        "tenant": tenant,
        "mode": chosen,
        "slices": slices,
        "playbook_version": version,
        "playbook_selections": await select_items(
            items, branch_texts, setting(ctx.playbook_chars), ctx.embedder
        ),
        "started_at": started,
        "thread_key": thread_key,
        "served": served,
        "prompts": prompts,
    }
    # an adaptive vote: its waves priced before the first is asked (logic/vote_pricing.py)
    plan = await vote_plan({**state, **routed}, ctx, services_of(ctx)) if chosen == "vote" else None  # type: ignore[typeddict-item]
    return {**routed, "vote_plan": plan}
