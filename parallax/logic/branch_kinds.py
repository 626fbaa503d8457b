"""What each business branch kind does: its reply, its prompts, its branches and how they settle.

One `KindRules` per kind of state/vocabulary.py's `BUSINESS_KINDS` (tests/unit/test_vocabulary.py
holds the two together); the fan-out, the `work` node and the merge look a kind up here instead of
switching on its name.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass

from langchain_core.messages import BaseMessage
from pydantic import BaseModel

from parallax.logic.plain_outcome import (
    Ballot,
    PlainOutcome,
    direct_answer,
    section_answer,
    vote_answer,
)
from parallax.logic.routing import votes_of
from parallax.logic.typed_outcome import (
    TypedOutcome,
    direct_outcome,
    section_outcome,
    vote_outcome,
    vote_tally,
)
from parallax.logic.user_schema import answer_schema, reply_model, slice_schema
from parallax.prompts.solve import (
    answer_messages,
    slice_messages,
    typed_messages,
    typed_slice_messages,
)
from parallax.state.context import Context, setting
from parallax.state.payloads import Answer, SliceFinding, VoteAnswer
from parallax.state.records import BranchAsk, JsonSchema, PromptVersion
from parallax.state.solve import SolveState
from parallax.state.vocabulary import BusinessKind

Planned = tuple[BranchAsk, str, float]
"""One branch as planned: what it is asked, its model and its temperature."""


@dataclass(frozen=True)
class KindRules:
    """What a business branch kind does at each step of a run."""

    reply: type[BaseModel]
    """What a branch replies in a run without an output schema."""
    typed_reply: Callable[[JsonSchema], type[BaseModel]]
    """What it replies with the user's schema: that object, wrapped for its kind."""
    asks: Callable[[SolveState, BusinessKind], list[BranchAsk]]
    """The distinct prompts of a run's branches of this kind (a vote's branches share one)."""
    branches: Callable[[SolveState, Context, list[BranchAsk], range | None], list[Planned]]
    """The branches made of those asks; the range: which of a vote's branches (a wave)."""
    messages: Callable[[BranchAsk, PromptVersion | None, JsonSchema | None], list[BaseMessage]]
    """The messages one ask is sent, in a served template, with the user's schema or without."""
    settle: Callable[[Ballot], PlainOutcome]
    """What a run without an output schema settles on (logic/plain_outcome.py)."""
    settle_typed: Callable[[Ballot, JsonSchema], TypedOutcome]
    """What a run with an output schema settles on (logic/typed_outcome.py)."""


def spread(low: float, high: float, n: int) -> list[float]:
    """`n` temperatures evenly from `low` to `high` (votes' and speculative candidates')."""
    return [low] if n == 1 else [round(low + (high - low) * i / (n - 1), 3) for i in range(n)]


def schema_text(schema: JsonSchema) -> str:
    """The user's schema as a prompt shows it: compact JSON."""
    return json.dumps(schema, ensure_ascii=False, separators=(",", ":"))


def brief(task: str, slices: list[str]) -> str:
    parts = f"{len(slices)} parts; each part is read separately"
    return f"A document of {len(task)} characters in {parts}."


def whole_task(state: SolveState, kind: BusinessKind) -> list[BranchAsk]:
    """One ask: the whole task, with the lessons selected for it."""
    lessons = (state.get("playbook_selections") or [[]])[0]
    return [
        {
            "kind": kind,
            "text": state["task"],
            "question": state.get("question", ""),
            "playbook": lessons,
            "index": 0,
        }
    ]


def each_slice(state: SolveState, kind: BusinessKind) -> list[BranchAsk]:
    """One ask per slice: its own part, the shared brief and the lessons selected for that part."""
    slices, selections = state.get("slices") or [], state.get("playbook_selections") or [[]]
    about = brief(state["task"], slices)
    return [
        {
            "kind": kind,
            "text": part,
            "question": state.get("question", ""),
            "playbook": selections[i],
            "index": i,
            "total": len(slices),
            "brief": about,
        }
        for i, part in enumerate(slices)
    ]


def once_each(
    state: SolveState, ctx: Context, asks: list[BranchAsk], votes: range | None
) -> list[Planned]:
    """A branch per ask, on the run's model and temperature."""
    return [(ask, setting(ctx.model), setting(ctx.temperature)) for ask in asks]


def voters(
    state: SolveState, ctx: Context, asks: list[BranchAsk], votes: range | None
) -> list[Planned]:
    """The vote's branches (or those of `votes`, a wave): one ask, each with the model and
    temperature of its index, spread over the vote's range."""
    n = votes_of(state)
    temperatures = spread(setting(ctx.vote_temperature_min), setting(ctx.vote_temperature_max), n)
    models = ctx.models_for_votes(n)
    return [
        ({**asks[0], "index": i}, models[i], temperatures[i])
        for i in (votes if votes is not None else range(n))
    ]


def answer_of(
    short: bool,
) -> Callable[[BranchAsk, PromptVersion | None, JsonSchema | None], list[BaseMessage]]:
    """The messages of a whole-task branch; `short`: only the final answer (a vote's)."""

    def messages(
        ask: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None
    ) -> list[BaseMessage]:
        if schema is not None:
            return typed_messages(
                ask["text"], ask["question"], ask["playbook"], schema_text(schema), version=template
            )
        return answer_messages(
            ask["text"], ask["question"], ask["playbook"], short=short, version=template
        )

    return messages


def slice_of(
    ask: BranchAsk, template: PromptVersion | None, schema: JsonSchema | None
) -> list[BaseMessage]:
    """The messages of a slice branch: its part, the brief, the question, its lessons."""
    if schema is not None:
        return typed_slice_messages(
            ask["brief"],
            ask["question"],
            ask["text"],
            ask["index"],
            ask["total"],
            ask["playbook"],
            schema_text(schema),
            version=template,
        )
    return slice_messages(
        ask["brief"],
        ask["question"],
        ask["text"],
        ask["index"],
        ask["total"],
        ask["playbook"],
        version=template,
    )


def typed_answer(schema: JsonSchema) -> type[BaseModel]:
    return reply_model(answer_schema(schema), "TypedAnswer")


def typed_slice(schema: JsonSchema) -> type[BaseModel]:
    return reply_model(slice_schema(schema), "SliceValues")


def typed_direct(ballot: Ballot, schema: JsonSchema) -> TypedOutcome:
    return direct_outcome(schema, ballot.ok[0])


def typed_vote(ballot: Ballot, schema: JsonSchema) -> TypedOutcome:
    tally = ballot.fields or vote_tally(schema, ballot.ok, ballot.asked, ballot.min_votes)
    return vote_outcome(schema, tally, len(ballot.ok))


def typed_section(ballot: Ballot, schema: JsonSchema) -> TypedOutcome:
    return section_outcome(schema, ballot.ok, ballot.slices, ballot.slice_pages, ballot.pages)


KINDS: dict[BusinessKind, KindRules] = {
    "direct": KindRules(
        reply=Answer, typed_reply=typed_answer, asks=whole_task, branches=once_each,
        messages=answer_of(short=False), settle=direct_answer, settle_typed=typed_direct,
    ),
    "vote": KindRules(
        reply=VoteAnswer, typed_reply=typed_answer, asks=whole_task, branches=voters,
        messages=answer_of(short=True), settle=vote_answer, settle_typed=typed_vote,
    ),
    "slice": KindRules(
        reply=SliceFinding, typed_reply=typed_slice, asks=each_slice, branches=once_each,
        messages=slice_of, settle=section_answer, settle_typed=typed_section,
    ),
}  # fmt: skip


def reply_schema(kind: BusinessKind, output_schema: JsonSchema | None) -> type[BaseModel]:
    """What a business branch must reply: our model for its kind, or the user's object wrapped for
    it."""
    rules = KINDS[kind]
    return rules.reply if output_schema is None else rules.typed_reply(output_schema)
