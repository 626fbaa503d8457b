"""What a valid run input is: the one definition every face checks before a run is created.

Why one module: the same mistake (votes -1, an unknown option, max_concurrency -3, a schema that
is not an object) used to be caught by the CLI and the Python API before anything ran, but on the
served faces only once the run was under way, as a failed run with the reason in its row: the
OpenAI face answered 500 (which the openai SDK retries: three failed runs for one request), /mcp a
failed run a second later, the graph API a 200 and a run in `error`. Here is everything that can
be told from the request alone; the faces call it before they create anything, each answering in
its own error shape (server/openai_request.py, server/run_checks.py for the graph API and /mcp,
the CLI's one-line exit 2). What needs the store (does the playbook exist?) is checked by the
server before the run is stored (server/run_checks.py), and by the CLI against its own store.

- The input's keys: the graph's input schema (state/solve.py `SolveInput`, state/plan.py
  `PlanInput`). An unknown key is refused by name: LangGraph would drop it without a word, and
  the caller would believe it did something.
- The input's values: logic/routing.py's `validate` / `validate_plan_input`, which the graphs'
  first nodes run too (a caller of the graph in process skips no check).
- The run's `context`: the Context fields a caller may set (not the code-only ones), each with
  the type and range its process setting has (runtime/settings.py: `max_concurrency >= 1`, ...),
  plus the three Context fields that are no setting. A value out of range is refused here, not
  met as "Semaphore initial value must be >= 0" in a branch.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from parallax.logic.routing import InvalidInput, validate, validate_plan_input
from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import resolved
from parallax.state.context import Context
from parallax.state.plan import PlanInput
from parallax.state.solve import SolveInput

CODE_ONLY = ("chat_model", "embedder", "services")
"""Context fields for code only (state/context.py), never from a caller over the wire."""
OWN_LIMITS: dict[str, Any] = {
    "temperature": (float, Field(ge=0, le=2)),
    "vote_temperature_min": (float, Field(ge=0, le=2)),
    "vote_temperature_max": (float, Field(ge=0, le=2)),
    "max_reasks": (int, Field(ge=0, le=10)),
}
"""Context fields whose process setting has no range (or that are no setting): their own."""
INPUT_KEYS = {"solve": frozenset(SolveInput.__required_keys__ | SolveInput.__optional_keys__),
              "plan": frozenset(PlanInput.__required_keys__ | PlanInput.__optional_keys__)}
"""The keys each checked graph's input may have."""


class RunInputError(InvalidInput):
    """Input that cannot run, and where: `field` is the input key or `context.<name>` at fault (None: the whole)."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def _context_model() -> type[BaseModel]:
    settings_fields = settings_mod.Settings.model_fields
    fields: dict[str, Any] = {}
    kind: Any
    for f in dataclasses.fields(Context):
        if f.name in CODE_ONLY:
            continue
        if f.name in OWN_LIMITS:
            kind, info = OWN_LIMITS[f.name]
            fields[f.name] = (Annotated[kind, info] | None, None)
        elif f.name in settings_fields:
            setting = settings_fields[f.name]
            kind = setting.annotation
            fields[f.name] = (Annotated[kind, *setting.metadata] | None if setting.metadata else kind | None, None)
        else:
            fields[f.name] = (Any, None)
    model: type[BaseModel] = create_model("RunContext", __config__=ConfigDict(extra="forbid"), **fields)
    return model


RunContext = _context_model()
"""The run context a caller may send: Context's fields, none required, extra ones forbidden."""


def _first_problem(exc: ValidationError, prefix: str) -> RunInputError:
    error = exc.errors()[0]
    name = ".".join(str(part) for part in error["loc"])
    if error["type"] == "extra_forbidden":
        allowed = ", ".join(sorted(RunContext.model_fields))
        return RunInputError(f"{prefix}.{name} is not a run setting: use {allowed}", f"{prefix}.{name}")
    rule = error["msg"].replace("Input should be", "must be")
    return RunInputError(f"{prefix}.{name} {rule}, got {error.get('input')!r}", f"{prefix}.{name}")


def checked_context(context: Any, prefix: str = "context") -> Context:
    """The run's Context from what a caller sent (None: none), every field in its range; RunInputError else."""
    if context is None:
        return resolved(Context())
    if not isinstance(context, Mapping):
        raise RunInputError(f"{prefix} must be an object of run settings, got {type(context).__name__}", prefix)
    code_only = sorted(set(context) & set(CODE_ONLY))
    if code_only:
        raise RunInputError(f"{prefix}.{code_only[0]} is for code only, not for a caller over the wire",
                            f"{prefix}.{code_only[0]}")
    try:
        given = RunContext.model_validate(dict(context))
    except ValidationError as exc:
        raise _first_problem(exc, prefix) from None
    return resolved(Context(**given.model_dump(exclude_unset=True)))


def _field_of(message: str, keys: frozenset[str]) -> str | None:
    """The input key an InvalidInput message is about (its messages name it first, or after "bad ")."""
    words = message.replace(",", " ").split()
    for word in words[:3]:
        if word.strip("'\"") in keys:
            return word.strip("'\"")
    return None


def check_run_input(graph: str, run_input: Any, context: Any = None, *, continues_thread: bool = False) -> Context:
    """Refuse (RunInputError) a run of `graph` ("solve" or "plan") that cannot run; its resolved Context.

    `continues_thread`: the run is on a thread that has run before, whose state may already hold the
    task (a follow-up run may send only a new question), so a missing task is not refused here."""
    ctx = checked_context(context)
    keys = INPUT_KEYS.get(graph)
    if keys is None:  # a graph whose input has no definition here yet: its context is checked
        return ctx
    if not isinstance(run_input, Mapping):
        raise RunInputError(f"the {graph} input must be an object with at least a task, got {type(run_input).__name__}")
    unknown = sorted(set(run_input) - keys)
    if unknown:
        raise RunInputError(f"unknown input field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for {graph}: "
                            f"use {', '.join(sorted(keys))}", unknown[0])
    state = dict(run_input)
    if continues_thread and not any(state.get(k) for k in ("task", "document", "pages")):
        state["task"] = "(the thread's task)"
    if state.get("document") is not None and not state.get("task"):
        state["task"] = "(the document's text)"  # read by the run; its size and format are checked there
    try:
        (validate_plan_input if graph == "plan" else validate)(state, ctx)
    except InvalidInput as exc:
        raise RunInputError(str(exc), _field_of(str(exc), keys)) from None
    return ctx
