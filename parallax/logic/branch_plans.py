"""What each branch of a fan-out gets, and how branches travel in `Send` tasks.

See docs/internals/votes.md#branches-and-send-tasks.
"""

from __future__ import annotations

import json
import secrets
import time
from typing import TypeVar

from langchain_core.messages import BaseMessage

from parallax.logic.routing import votes_of
from parallax.logic.speculation import candidate_prompts
from parallax.logic.stopping import decide
from parallax.prompts.solve import answer_messages, slice_messages, typed_messages, typed_slice_messages
from parallax.runtime.run_context import tenant_of
from parallax.runtime.wave_request import MAX_CHOICES
from parallax.state.context import Context, setting
from parallax.state.records import BranchAsk, BranchSpec, BusinessKind, JsonSchema, PlaybookItemData, PromptVersion, RunMeta
from parallax.state.solve import SolveState

MAX_TASKS = 10
T = TypeVar("T")


def spread(low: float, high: float, n: int) -> list[float]:
    return [low] if n == 1 else [round(low + (high - low) * i / (n - 1), 3) for i in range(n)]


def adaptive(state: SolveState, ctx: Context) -> bool:
    """Whether this run's vote asks in waves (logic/stopping.py): a vote with early stopping on. A vote on
    the user's object stops when each of its required fields has settled (logic/field_vote.py)."""
    return state["mode"] == "vote" and bool(setting(ctx.early_stop))


def first_wave(state: SolveState, ctx: Context) -> range:
    """The vote indices of the first wave (all of them without early stopping; its plan's first wave with it)."""
    n = votes_of(state)
    if not adaptive(state, ctx):
        return range(n)
    return range(decide([], 0, n, threshold=setting(ctx.vote_stop_threshold), first_wave=waves_of(state, ctx)[0],
                        min_leader=state.get("min_votes") or 0).next_wave)


def waves_of(state: SolveState, ctx: Context) -> tuple[int, int]:
    """(first wave, least later wave) of an adaptive vote: its priced plan's (logic/vote_pricing.py), else the
    first wave setting for both."""
    plan = state.get("vote_plan") or {}
    first = int(plan.get("first_wave") or setting(ctx.vote_first_wave))
    return first, int(plan.get("min_wave") or first)


def branch_specs(state: SolveState, ctx: Context, votes: range | None = None) -> list[BranchSpec]:
    """What each business branch gets: only its own text, plus brief, question and lessons. `votes`: which
    of a vote's branches to plan (a wave), by index; each keeps the model and temperature of its index."""
    task, question, route = state["task"], state.get("question", ""), state["mode"]
    selections = state.get("playbook_selections") or [[]]
    now = round(time.time(), 3)

    def spec(kind: BusinessKind, text: str, lessons: list[PlaybookItemData], model: str, temperature: float, index: int,
             total: int | None = None, brief: str | None = None) -> BranchSpec:
        planned: BranchSpec = {"id": f"{kind}-{secrets.token_hex(4)}", "kind": kind, "parent_id": state["trace_id"],
                               "planned_at": now, "text": text, "question": question, "playbook": lessons,
                               "model": model, "temperature": temperature, "index": index}
        if total is not None:
            planned["total"] = total
        if brief is not None:
            planned["brief"] = brief
        return planned

    if route == "vote":
        n = votes_of(state)
        temperatures = spread(setting(ctx.vote_temperature_min), setting(ctx.vote_temperature_max), n)
        models = ctx.models_for_votes(n)
        return [spec("vote", task, selections[0], model=models[i], temperature=temperatures[i], index=i)
                for i in (votes if votes is not None else range(n))]
    if route == "section":
        slices = state["slices"]
        brief = _brief(task, slices)
        return [spec("slice", part, selections[i], model=setting(ctx.model), temperature=setting(ctx.temperature), index=i,
                     total=len(slices), brief=brief)
                for i, part in enumerate(slices)]
    return [spec("direct", task, selections[0], model=setting(ctx.model), temperature=setting(ctx.temperature), index=0)]


def _brief(task: str, slices: list[str]) -> str:
    return f"A document of {len(task)} characters in {len(slices)} parts; each part is read separately."


def prompt_name(kind: str, typed: bool = False) -> str:
    """The prompt template (prompts/templates.py) a business branch of `kind` is built from; `typed`: the
    run has an output schema."""
    if typed:
        return "typed_slice" if kind == "slice" else "typed"
    return "slice" if kind == "slice" else "answer"


def schema_text(schema: JsonSchema) -> str:
    """The user's schema as a prompt shows it: compact JSON."""
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def branch_messages(spec: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None = None) -> list[BaseMessage]:
    """The messages a business branch is sent: its own text, the question, its lessons, in `template`
    (a served prompt version; None = the default); with the user's `schema`, asked for that object."""
    if schema is not None:
        if spec["kind"] == "slice":
            return typed_slice_messages(spec["brief"], spec["question"], spec["text"], spec["index"], spec["total"],
                                        spec["playbook"], schema_text(schema), version=template)
        return typed_messages(spec["text"], spec["question"], spec["playbook"], schema_text(schema), version=template)
    if spec["kind"] == "slice":
        return slice_messages(spec["brief"], spec["question"], spec["text"], spec["index"], spec["total"],
                              spec["playbook"], version=template)
    return answer_messages(spec["text"], spec["question"], spec["playbook"], short=spec["kind"] == "vote",
                           version=template)


class VotePrompts:
    """The messages of the branches of one `work` task, each vote's built once per distinct prompt.

    Why: a run's votes share their prompt (the task, the question, the lessons, the served template), so
    building two langchain messages per vote made a thousand-vote fan-out render one prompt a thousand
    times. A vote gets the same message objects as its siblings (a model call copies the list before it
    appends a re-ask, runtime/structured_call.py); a slice or direct branch gets its own, as before."""

    def __init__(self) -> None:
        self.built: dict[tuple[object, ...], list[BaseMessage]] = {}

    def messages(self, spec: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None = None) -> list[BaseMessage]:
        """`branch_messages(spec, template, schema)`, shared by the votes asked the same thing."""
        if spec["kind"] != "vote":
            return branch_messages(spec, template, schema)
        key = (spec["text"], spec["question"], tuple((item["id"], item["text"]) for item in spec["playbook"]),
               (template["system"], template["user"]) if template else None,
               schema_text(schema) if schema is not None else None)
        built = self.built.get(key)
        if built is None:
            built = self.built[key] = branch_messages(spec, template, schema)
        return list(built)


def branch_prompts(state: SolveState) -> dict[tuple[str, int], list[BaseMessage]]:
    """(kind, slice or candidate index, else 0) -> the messages those business branches (or speculative
    candidates) were sent. Votes share one prompt. Rebuilt from the state for the trace, so the checkpoint
    never holds a copy per branch."""
    task, question, route = state["task"], state.get("question", ""), state["mode"]
    if route == "speculate":
        return candidate_prompts(state)
    selections = state.get("playbook_selections") or [[]]
    prompts = state.get("prompts") or {}
    schema = state.get("output_schema")
    if route == "section":
        slices = state.get("slices") or []
        asks: list[BranchAsk] = [{"kind": "slice", "text": part, "question": question, "playbook": selections[i], "index": i,
                                  "total": len(slices), "brief": _brief(task, slices)} for i, part in enumerate(slices)]
        return {("slice", i): branch_messages(ask, prompts.get(prompt_name("slice", schema is not None)), schema)
                for i, ask in enumerate(asks)}
    kind: BusinessKind = "vote" if route == "vote" else "direct"
    spec: BranchAsk = {"kind": kind, "text": task, "question": question, "playbook": selections[0]}
    return {(route, 0): branch_messages(spec, prompts.get(prompt_name(route, schema is not None)), schema)}


def run_metadata(state: SolveState) -> RunMeta:
    """What every model call of the run tells the callbacks (LangSmith): the run's trace id and versions."""
    served = state.get("served") or {}
    return {"parallax_trace_id": state.get("trace_id"), "tenant": tenant_of(state.get("tenant")),
            "playbook": state.get("playbook", "default"), "playbook_version": state.get("playbook_version", 0),
            "playbook_arm": next((c["arm"] for s, c in served.items() if s.startswith("playbook/")), "pinned"),
            "prompt_versions": {n: p.get("version", 0) for n, p in (state.get("prompts") or {}).items()}}


def group(specs: list[T]) -> list[list[T]]:
    """Split branches (or learn tasks) into at most MAX_TASKS groups, in order."""
    size = -(-len(specs) // min(len(specs), MAX_TASKS))
    return [specs[i : i + size] for i in range(0, len(specs), size)]


def request_groups(specs: list[BranchSpec]) -> list[list[BranchSpec]]:
    """Business branches into `Send` tasks. Votes that can be one request with `n` (the same model and
    temperature; a run's votes share their prompt) travel in one task, at most MAX_CHOICES of them, so the
    `work` node can ask them at once (runtime/wave_request.py); then at most MAX_TASKS tasks, as `group`.
    One task is also one checkpoint write: a resumed run asks again only the requests that had not finished."""
    if not specs or any(spec["kind"] != "vote" for spec in specs):
        return group(specs)
    buckets: dict[tuple[str, float], list[BranchSpec]] = {}
    for spec in specs:
        buckets.setdefault((spec["model"], spec["temperature"]), []).append(spec)
    chunks = [bucket[i : i + MAX_CHOICES] for bucket in buckets.values() for i in range(0, len(bucket), MAX_CHOICES)]
    if len(chunks) <= MAX_TASKS:
        return chunks
    return [[spec for chunk in part for spec in chunk] for part in group(chunks)]
