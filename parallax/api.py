"""The Python API: `parallax.solve(...)` and `await parallax.asolve(...)`.

A call is the same run as `parallax run`, on the CLI's SQLite checkpoints and store under
PARALLAX_HOME (runtime/storage/stores.py `durable_graph`); see docs/python.md.
"""

from __future__ import annotations

import asyncio
import os
import uuid
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, Field, ValidationError

from parallax.logic.routing import InvalidInput
from parallax.logic.run_input import check_run_input
from parallax.runtime.sync_graph import iterate
from parallax.state.context import Context
from parallax.state.payloads import BranchRecord
from parallax.state.records import JsonSchema, Spend
from parallax.state.vocabulary import Mode

M = TypeVar("M", bound=BaseModel)

__all__ = ["InvalidInput", "Provenance", "Result", "asolve", "solve"]


class Provenance(BaseModel):
    """Where one value of `data` comes from."""

    path: str = Field(
        description="the value's place in the object: `revenue`, `segments[0]`, `a.b`"
    )
    value: Any
    branch_id: str | None = None
    quote: str | None = Field(
        None, description="the words of the source it rests on (section runs)"
    )
    page: int | None = Field(None, description="the page the quote is on, from 1 (paged documents)")
    verified: bool = Field(
        description="section: the quote occurs in its slice; vote: the field met its quorum"
    )
    conflict: bool = False


class Result(BaseModel, Generic[M]):
    """What a run gives back (the fields of `parallax run --json`, typed)."""

    status: Literal["ok", "needs_review", "failed"]
    mode: str
    answer: str = ""
    data: M | dict[str, Any] | None = None
    """The settled object: an instance of the schema class given, else a dict; None without a
    schema."""
    raw_data: dict[str, Any] | None = None
    confidence: float = 0.0
    reason: str = ""
    provenance: list[Provenance] = Field(default_factory=list)
    vote_counts: dict[str, int] = Field(default_factory=dict)
    verification: dict[str, Any] = Field(default_factory=dict)
    branches: list[BranchRecord] = Field(default_factory=list)
    trace_id: str = ""
    thread_id: str = ""
    playbook_version: int = 0
    spend: Spend | None = None
    """What the run spent: `tokens`, `cost_usd` (None when a model has no price; `unpriced` names
    it), and the parts."""
    note: str = ""
    """Said beside the answer: that the embedded toy model answered (set OPENAI_BASE_URL for a real
    one), else ""."""

    @property
    def ok(self) -> bool:
        return self.status == "ok"

    @property
    def cost_usd(self) -> float | None:
        """What the run cost in USD at the price table (runtime/prices.py); None: unknown (a model
        has no price)."""
        return self.spend["cost_usd"] if self.spend is not None else None

    @property
    def tokens(self) -> int:
        """Tokens the run's model calls spent, all together."""
        return self.spend["tokens"] if self.spend is not None else 0


def _payload(
    task: str | None,
    question: str,
    document: Any,
    mode: str,
    schema: Any,
    votes: int,
    min_votes: int | None,
    red_team: bool,
    playbook: str,
    tenant: str,
    target: str | None,
    speculation: dict[str, Any] | None = None,
    budget: dict[str, Any] | None = None,
) -> dict[str, Any]:
    payload: dict[str, Any] = {
        "question": question,
        "mode": mode,
        "votes": votes,
        "red_team": red_team,
        "playbook": playbook,
        "tenant": tenant,
    }
    payload.update({k: v for k, v in (budget or {}).items() if v is not None})
    payload.update({k: v for k, v in (speculation or {}).items() if v is not None})
    if document is not None:
        if task is not None:
            raise InvalidInput("give the task as text or as a document, not both")
        from parallax.runtime.documents import DocumentError, document_from_input, run_input

        try:
            payload.update(run_input(document_from_input(document)))
        except DocumentError as exc:
            raise InvalidInput(str(exc)) from None
    else:
        payload["task"] = task
    if schema is not None:
        payload["output_schema"] = _json_schema(schema)
    if min_votes is not None:
        payload["min_votes"] = min_votes
    if target is not None:
        payload["target"] = target
    return payload


def _json_schema(schema: Any) -> JsonSchema:
    if isinstance(schema, type) and issubclass(schema, BaseModel):
        return schema.model_json_schema()
    if isinstance(schema, dict):
        return schema
    raise InvalidInput(
        f"schema must be a pydantic model class or a JSON Schema dict, got {type(schema).__name__}"
    )


async def asolve(
    task: str | None = None,
    *,
    question: str = "",
    document: str | os.PathLike[str] | bytes | None = None,
    mode: Mode = "auto",
    schema: type[M] | JsonSchema | None = None,
    votes: int = 5,
    min_votes: int | None = None,
    red_team: bool = False,
    playbook: str = "default",
    tenant: str = "default",
    thread_id: str | None = None,
    target: str | None = None,
    candidates: int = 3,
    check: str | None = None,
    check_file: str | None = None,
    repo: str | os.PathLike[str] | None = None,
    max_cost: float | None = None,
    max_tokens: int | None = None,
    context: Context | None = None,
) -> Result[M]:
    """Run one task (or a document with a question) through the solve graph and return its result.

    The run is checkpointed and traced like `parallax run`: `parallax trace` finds it and
    `parallax resume THREAD_ID` resumes it.

    Args:
        task: The text to work on; give `document` instead to work on a file.
        question: A question about the task or document (section mode asks it of every slice).
        document: A file to work on: a path or bytes (PDF, DOCX, HTML, Markdown or text).
        mode: `auto`, `direct`, `vote`, `section` or `speculate`.
        schema: The output's shape: a pydantic model class or a JSON Schema dict. With a class,
            `Result.data` is an instance of it when the run settled on a complete object (else
            None, and `raw_data` holds what was settled).
        votes: The most vote branches a vote asks.
        min_votes: The valid votes an answer needs; None for a strict majority of `votes`.
        red_team: Add a branch that argues against the leading answer (it never votes).
        playbook: The playbook whose lessons go into the prompts.
        tenant: The tenant that owns the playbook and the trace.
        thread_id: The checkpoint thread; None for a new one.
        target: The right answer, when known: the trace keeps whether the run got it.
        candidates: Speculate mode: how many candidates are made at once, each with its own
            approach.
        check: Speculate mode: a command run in each candidate's folder; the first candidate it
            passes wins. Without one a judge compares the candidates both ways round
            (`verification["speculation"]` says why each lost).
        check_file: The file each candidate's answer is saved as for `check` (default
            `candidate.txt`).
        repo: A git repository whose worktree is each candidate's folder, for `check`.
        max_cost: The run's budget in USD, all its model calls together.
        max_tokens: The run's budget in tokens, all its model calls together. Each request is held
            at its worst case before it is sent, so a run never spends past its budget; stopped,
            it ends `needs_review`, its reason starting "budget reached".
        context: Per-run settings (models, limits, timeouts); None for the process settings.

    Returns:
        The run's `Result`: status, answer, data, confidence, reason, branches, spend, trace id.

    Raises:
        InvalidInput: The input cannot run (one line that says what to change), raised before
            anything is written or any model is called.
    """
    from parallax.graphs.solve import builder
    from parallax.runtime.settings import reload_settings
    from parallax.runtime.storage.stores import durable_graph

    reload_settings()  # a call is an entry point: it sees the environment and .env as they are now
    speculation = (
        {
            "candidates": candidates,
            "check": check,
            "check_file": check_file,
            "repo": os.fspath(repo) if repo is not None else None,
        }
        if mode == "speculate" or check
        else None
    )
    # a document is parsed by a child process: the caller's loop goes on meanwhile
    payload = await asyncio.to_thread(
        _payload,
        task,
        question,
        document,
        mode,
        schema,
        votes,
        min_votes,
        red_team,
        playbook,
        tenant,
        target,
        speculation,
        {"max_cost": max_cost, "max_tokens": max_tokens},
    )
    ctx = context or Context()
    check_run_input(
        "solve", payload, ctx
    )  # the one definition of a valid run every face checks (logic/run_input.py)
    thread = thread_id or uuid.uuid4().hex
    config = {"configurable": {"thread_id": thread}, "metadata": {"parallax_graph": "solve"}}
    async with durable_graph(builder) as graph:
        out = await graph.ainvoke(payload, config, context=ctx, durability="sync")
    return _result(out, thread, schema)


def solve(task: str | None = None, **options: Any) -> Result[Any]:
    """`asolve` for synchronous code, in plain scripts and in notebooks.

    Where an event loop is already running (a notebook), the run goes on a loop of its own in a
    worker thread.

    Args:
        task: The text to work on; give `document` instead to work on a file.
        **options: `asolve`'s keyword arguments.
    """
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(asolve(task, **options))

    async def once() -> Any:
        yield await asolve(task, **options)

    return next(iterate(once))


def _result(out: dict[str, Any], thread_id: str, schema: Any) -> Result[Any]:
    raw = out.get("data")
    data: Any = raw
    if raw is not None and isinstance(schema, type) and issubclass(schema, BaseModel):
        try:
            data = schema.model_validate(raw)
        except ValidationError:
            data = None
    kind = (
        Result[schema]
        if isinstance(schema, type) and issubclass(schema, BaseModel)
        else Result[Any]
    )
    fields = {
        k: out[k]
        for k in (
            "status",
            "mode",
            "answer",
            "confidence",
            "reason",
            "vote_counts",
            "verification",
            "branches",
            "trace_id",
            "playbook_version",
            "spend",
            "note",
        )
        if out.get(k) is not None
    }
    return kind(
        **fields,
        data=data,
        raw_data=raw,
        provenance=out.get("provenance") or [],
        thread_id=thread_id,
    )
