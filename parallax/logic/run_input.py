"""What a valid run is: the one place every face asks before a run is created.

See docs/internals/runs.md#one-check-for-every-face.
"""

from __future__ import annotations

import typing
from collections.abc import Mapping
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, create_model

from parallax.logic.graph_inputs import (
    validate_chat_input,
    validate_feedback_input,
    validate_learn_input,
    validate_loop_input,
    validate_release_input,
    validate_stats_input,
)
from parallax.logic.input_rules import InvalidInput, check_typed, fields_of, problem
from parallax.logic.routing import validate, validate_plan_input
from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import resolved
from parallax.state.chat import ChatInput
from parallax.state.context import CODE_ONLY, RUN_SETTINGS, Context, bounds, served_rule
from parallax.state.data_loop import FeedbackInput, ReleaseInput, StatsInput
from parallax.state.learn import LearnInput
from parallax.state.loop import LoopInput
from parallax.state.plan import PlanInput
from parallax.state.solve import INTERNAL, SolveInput

DEFINITIONS: dict[str, Any] = {
    "solve": SolveInput,
    "plan": PlanInput,
    "learn": LearnInput,
    "stats": StatsInput,
    "feedback": FeedbackInput,
    "release": ReleaseInput,
    "chat": ChatInput,
    "loop": LoopInput,
}
"""Each graph's input definition, by the graph's id in langgraph.json and aegra.json (a unit test
holds them equal)."""
GRAPHS = tuple(DEFINITIONS)
INPUT_KEYS = {graph: fields_of(definition) for graph, definition in DEFINITIONS.items()}
"""The keys each graph's input may have."""
NOT_SERVED = "is not served over the graph API: the server {} for a caller"
SERVED_NEVER = {
    "check": (
        "a check command "
        + NOT_SERVED.format("runs no command")
        + "; run `parallax run --mode speculate --check ...` on your machine, or leave check out"
    ),
    "repo": (
        "a repository "
        + NOT_SERVED.format("opens no folder of its own disk")
        + "; run `parallax run --repo PATH` on the machine that holds it"
    ),
    "test_command": (
        "a test command "
        + NOT_SERVED.format("runs no command")
        + "; run `parallax run --mode plan --repo PATH --test-command ...` on your machine"
    ),
}
"""Input fields the served API refuses, with why and what to do instead (the graphs' nodes refuse
them too)."""
SERVED_DOCUMENT = (
    'on the graph API a document is sent as {"name": ..., "base64": ...}, not as a path: the server'
    " reads no file of its own disk for a caller"
)


class RunInputError(InvalidInput):
    """Input that cannot run, and where: `field` is the input key or `context.<name>` at fault
    (None: the whole)."""


def _context_model() -> type[BaseModel]:
    hints = typing.get_type_hints(Context)
    fields: dict[str, Any] = {}
    for name in RUN_SETTINGS:
        kind = hints[name]  # None included: unset, the process setting
        limits = bounds(name)
        fields[name] = (Annotated[kind, Field(**limits)] if limits else kind, None)
    model: type[BaseModel] = create_model(
        "RunContext", __config__=ConfigDict(extra="forbid", strict=True), **fields
    )
    return model


RunContext = _context_model()
"""The run context a caller may send: Context's run settings with their bounds, none required,
others refused."""


def _variable(name: str) -> str:
    return f"PARALLAX_{name.upper()}"


def _held_to_server(given: Mapping[str, Any], prefix: str) -> None:
    """RunInputError for a run setting past the server's own, by its served rule (state/context.py
    SERVED_RULES)."""
    settings = settings_mod.load()
    own = resolved(Context())
    for name, value in given.items():
        rule, field = served_rule(name), f"{prefix}.{name}"
        server = getattr(own, name)
        if value is None or rule is None:
            continue
        if rule == "ceiling" and value > server:
            raise RunInputError(
                f"{field} must be at most {server} on this server ({_variable(name)}), got {value}:"
                " lower it or leave it out",
                field,
            )
        if rule == "floor" and name == "straggler_factor" and server == 0 and value != 0:
            raise RunInputError(
                f"{field} must be 0 on this server: it starts no backup copies ({_variable(name)}),"
                f" got {value}: leave it out",
                field,
            )
        if rule == "floor" and value < server and not (name == "straggler_factor" and value == 0):
            off = " or 0 (no backup copies)" if name == "straggler_factor" else ""
            raise RunInputError(
                f"{field} must be at least {server}{off} on this server ({_variable(name)}), got "
                f"{value}: raise it or leave it out",
                field,
            )
        if rule == "model":
            allowed = settings.served_models
            for model in (m.strip() for m in str(value).split(",")):
                if model and model not in allowed:
                    raise RunInputError(
                        f"{field} {model!r} is not a model this server serves: use one of "
                        f"{', '.join(sorted(allowed))}, or leave it out (the server's "
                        "PARALLAX_ALLOWED_MODELS lists the others it allows)",
                        field,
                    )


def checked_context(context: Any, prefix: str = "context", *, served: bool = False) -> Context:
    """The run's resolved Context from what a caller sent (a mapping, a Context, or None: none),
    every run setting within its bounds and, `served`, within the server's own (`_held_to_server`);
    RunInputError else. A Context keeps its code-only fields (a test's scripted model); a mapping
    may not name them."""
    if context is None:
        return resolved(Context())
    code: dict[str, Any] = {}
    if isinstance(context, Context):
        code = {
            name: getattr(context, name) for name in CODE_ONLY if getattr(context, name) is not None
        }
        given = {
            name: getattr(context, name)
            for name in RUN_SETTINGS
            if getattr(context, name) is not None
        }
    elif isinstance(context, Mapping):
        code_only = sorted(set(context) & set(CODE_ONLY))
        if code_only:
            raise RunInputError(
                f"{prefix}.{code_only[0]} is for code only, not for a caller over the wire",
                f"{prefix}.{code_only[0]}",
            )
        unknown = sorted(set(context) - set(RUN_SETTINGS))
        if unknown:
            raise RunInputError(
                f"{prefix}.{unknown[0]} is not a run setting: use"
                f" {', '.join(sorted(RUN_SETTINGS))}",
                f"{prefix}.{unknown[0]}",
            )
        given = dict(context)
    else:
        raise RunInputError(
            f"{prefix} must be an object of run settings, got {type(context).__name__}", prefix
        )
    try:
        RunContext.model_validate(given)
    except ValidationError as exc:
        raise _as_run_error(problem(exc, RunContext.model_json_schema(), prefix)) from None
    if served:
        _held_to_server(given, prefix)
    return resolved(Context(**given, **code))


def _as_run_error(exc: InvalidInput) -> RunInputError:
    return exc if isinstance(exc, RunInputError) else RunInputError(str(exc), exc.field)


def _solve_state(
    graph: str, run_input: Mapping[str, Any], continues_thread: bool
) -> dict[str, Any]:
    """The input as the graph's first node checks it: on a thread that has run before, the thread's
    task stands in for a task left out (a follow-up may send only a new question); a document's text
    is read by the run.
    """
    state = dict(run_input)
    if continues_thread and not any(state.get(k) for k in ("task", "document", "pages")):
        state["task"] = "(the thread's task)"
    if graph == "solve" and state.get("document") is not None and not state.get("task"):
        state["task"] = (
            "(the document's text)"  # read by the run; its size and format are checked there
        )
    return state


def check_run_input(
    graph: str,
    run_input: Any,
    context: Any = None,
    *,
    continues_thread: bool = False,
    served: bool = False,
) -> Context:
    """Refuse (RunInputError, one line naming the field) a run of `graph` that cannot run; else its
    resolved Context.

    `continues_thread`: the run is on a thread that has run before, whose state may already hold the
    task (a follow-up may send only a new question; a chat run, no new message), so a missing one is
    not refused here. `served`: the caller is a stranger on the served API: its context is held to
    the server's own settings and what the server never does for a caller is refused
    (docs/internals/runs.md lists both)."""
    ctx = checked_context(context, served=served)
    definition = DEFINITIONS.get(graph)
    if definition is None:
        raise RunInputError(f"unknown graph {graph!r}: use {', '.join(GRAPHS)}")
    if not isinstance(run_input, Mapping):
        raise RunInputError(f"the {graph} input must be an object, got {type(run_input).__name__}")
    keys = INPUT_KEYS[graph]
    unknown = sorted(set(run_input) - keys)
    if unknown:
        raise RunInputError(
            f"unknown input field{'s' if len(unknown) > 1 else ''} {', '.join(unknown)} for"
            f" {graph}: use {', '.join(sorted(keys - INTERNAL))}",
            unknown[0],
        )
    internal = sorted(set(run_input) & INTERNAL)
    if internal:
        raise RunInputError(
            f"{internal[0]} is set by Parallax's own graphs, not by a caller: leave it out",
            internal[0],
        )
    if served:
        never = next((key for key in SERVED_NEVER if run_input.get(key)), None)
        if never is not None:
            raise RunInputError(SERVED_NEVER[never], never)
        if isinstance(run_input.get("document"), str):
            raise RunInputError(SERVED_DOCUMENT, "document")
    try:
        check_typed(definition, run_input)
        if graph in ("solve", "plan"):
            (validate_plan_input if graph == "plan" else validate)(
                _solve_state(graph, run_input, continues_thread), ctx
            )
        elif graph == "learn":
            validate_learn_input(run_input)
        elif graph == "loop":
            validate_loop_input(run_input)
        elif graph == "stats":
            validate_stats_input(run_input)
        elif graph == "feedback":
            validate_feedback_input(run_input)
        elif graph == "release":
            validate_release_input(run_input)
        else:
            validate_chat_input(
                run_input,
                ctx,
                with_messages=bool(run_input.get("messages")) or not continues_thread,
            )
    except InvalidInput as exc:
        raise _as_run_error(exc) from None
    return ctx
