"""What each branch of a fan-out gets, and how branches travel in `Send` tasks.

See docs/internals/votes.md#branches-and-send-tasks.
"""

from __future__ import annotations

import secrets
import time
from typing import TypeVar

from langchain_core.messages import BaseMessage

from parallax.logic.branch_kinds import KINDS, schema_text
from parallax.logic.routing import votes_of
from parallax.logic.speculation import candidate_prompts
from parallax.logic.stopping import decide
from parallax.runtime.run_context import tenant_of
from parallax.runtime.wave_request import MAX_CHOICES
from parallax.state.context import Context, setting
from parallax.state.records import BranchAsk, BranchSpec, JsonSchema, PromptVersion, RunMeta
from parallax.state.solve import SolveState
from parallax.state.vocabulary import BUSINESS_KINDS, ROUTE_KIND, BusinessKind

MAX_TASKS = 10
T = TypeVar("T")


def adaptive(state: SolveState, ctx: Context) -> bool:
    """Whether this run's vote asks in waves (logic/stopping.py): a vote with early stopping on. A
    vote on the user's object stops when each of its required fields has settled
    (logic/field_vote.py)."""
    return state["mode"] == "vote" and bool(setting(ctx.early_stop))


def first_wave(state: SolveState, ctx: Context) -> range:
    """The vote indices of the first wave (all of them without early stopping; its plan's first wave
    with it)."""
    n = votes_of(state)
    if not adaptive(state, ctx):
        return range(n)
    return range(
        decide(
            [],
            0,
            n,
            threshold=setting(ctx.vote_stop_threshold),
            first_wave=waves_of(state, ctx)[0],
            min_leader=state.get("min_votes") or 0,
        ).next_wave
    )


def waves_of(state: SolveState, ctx: Context) -> tuple[int, int]:
    """(first wave, least later wave) of an adaptive vote: its priced plan's
    (logic/vote_pricing.py), else the first wave setting for both."""
    plan = state.get("vote_plan") or {}
    first = int(plan.get("first_wave") or setting(ctx.vote_first_wave))
    return first, int(plan.get("min_wave") or first)


def branch_specs(state: SolveState, ctx: Context, votes: range | None = None) -> list[BranchSpec]:
    """What each business branch gets: only its own text, plus brief, question and lessons. `votes`:
    which of a vote's branches to plan (a wave), by index; each keeps the model and temperature of
    its index.
    """
    kind = ROUTE_KIND[state["mode"]]
    rules, now = KINDS[kind], round(time.time(), 3)
    planned = rules.branches(state, ctx, rules.asks(state, kind), votes)
    return [_spec(state, ask, model, temperature, now) for ask, model, temperature in planned]


def _spec(
    state: SolveState, ask: BranchAsk, model: str, temperature: float, now: float
) -> BranchSpec:
    planned: BranchSpec = {
        "id": f"{ask['kind']}-{secrets.token_hex(4)}",
        "kind": ask["kind"],
        "parent_id": state["trace_id"],
        "planned_at": now,
        "text": ask["text"],
        "question": ask["question"],
        "playbook": ask["playbook"],
        "model": model,
        "temperature": temperature,
        "index": ask.get("index", 0),
    }
    if "total" in ask:
        planned["total"] = ask["total"]
    if "brief" in ask:
        planned["brief"] = ask["brief"]
    return planned


def prompt_name(kind: BusinessKind, typed: bool = False) -> str:
    """The prompt template (prompts/templates.py) a business branch of `kind` is built from;
    `typed`: the run has an output schema."""
    return BUSINESS_KINDS[kind].typed_prompt if typed else BUSINESS_KINDS[kind].prompt


def branch_messages(
    spec: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None = None
) -> list[BaseMessage]:
    """The messages a business branch is sent: its own text, the question, its lessons, in
    `template` (a served prompt version; None = the default); with the user's `schema`, asked for
    that object.
    """
    return KINDS[spec["kind"]].messages(spec, template, schema)


class VotePrompts:
    """The messages of the branches of one `work` task, each vote's built once per distinct prompt.

    Why: a run's votes share their prompt (the task, the question, the lessons, the served
    template), so building two langchain messages per vote made a thousand-vote fan-out render one
    prompt a thousand times. A vote gets the same message objects as its siblings (a model call
    copies the list before it appends a re-ask, runtime/structured_call.py); a slice or direct
    branch gets its own, as before.
    """

    def __init__(self) -> None:
        self.built: dict[tuple[object, ...], list[BaseMessage]] = {}

    def messages(
        self, spec: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None = None
    ) -> list[BaseMessage]:
        """`branch_messages(spec, template, schema)`, shared by the votes asked the same thing."""
        if spec["kind"] != "vote":
            return branch_messages(spec, template, schema)
        key = (
            spec["text"],
            spec["question"],
            tuple((item["id"], item["text"]) for item in spec["playbook"]),
            (template["system"], template["user"]) if template else None,
            schema_text(schema) if schema is not None else None,
        )
        built = self.built.get(key)
        if built is None:
            built = self.built[key] = branch_messages(spec, template, schema)
        return list(built)


def branch_prompts(state: SolveState) -> dict[tuple[str, int], list[BaseMessage]]:
    """(kind, slice or candidate index, else 0) -> the messages those business branches (or
    speculative candidates) were sent. Votes share one prompt. Rebuilt from the state for the trace,
    so the checkpoint never holds a copy per branch."""
    if state["mode"] == "speculate":
        return candidate_prompts(state)
    kind = ROUTE_KIND[state["mode"]]
    schema = state.get("output_schema")
    template = (state.get("prompts") or {}).get(prompt_name(kind, schema is not None))
    rules = KINDS[kind]
    asks = rules.asks(state, kind)
    return {(kind, i): rules.messages(ask, template, schema) for i, ask in enumerate(asks)}


def run_metadata(state: SolveState) -> RunMeta:
    """What every model call of the run tells the callbacks (LangSmith): the run's trace id and
    versions."""
    served = state.get("served") or {}
    return {
        "parallax_trace_id": state.get("trace_id"),
        "tenant": tenant_of(state.get("tenant")),
        "playbook": state.get("playbook", "default"),
        "playbook_version": state.get("playbook_version", 0),
        "playbook_arm": next(
            (c["arm"] for s, c in served.items() if s.startswith("playbook/")), "pinned"
        ),
        "prompt_versions": {
            n: p.get("version", 0) for n, p in (state.get("prompts") or {}).items()
        },
    }


def group(specs: list[T]) -> list[list[T]]:
    """Split branches (or learn tasks) into at most MAX_TASKS groups, in order."""
    size = -(-len(specs) // min(len(specs), MAX_TASKS))
    return [specs[i : i + size] for i in range(0, len(specs), size)]


def request_groups(specs: list[BranchSpec]) -> list[list[BranchSpec]]:
    """Business branches into `Send` tasks. Votes that can be one request with `n` (the same model
    and temperature; a run's votes share their prompt) travel in one task, at most MAX_CHOICES of
    them, so the `work` node can ask them at once (runtime/wave_request.py); then at most MAX_TASKS
    tasks, as `group`. One task is also one checkpoint write: a resumed run asks again only the
    requests that had not finished.
    """
    if not specs or any(spec["kind"] != "vote" for spec in specs):
        return group(specs)
    buckets: dict[tuple[str, float], list[BranchSpec]] = {}
    for spec in specs:
        buckets.setdefault((spec["model"], spec["temperature"]), []).append(spec)
    chunks = [
        bucket[i : i + MAX_CHOICES]
        for bucket in buckets.values()
        for i in range(0, len(bucket), MAX_CHOICES)
    ]
    if len(chunks) <= MAX_TASKS:
        return chunks
    return [[spec for chunk in part for spec in chunk] for part in group(chunks)]
