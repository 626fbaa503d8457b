"""Sibling branches' prompts share what they share first, so an endpoint's prefix cache can hit.

A provider caches a prompt's leading tokens (vLLM block by block, OpenAI from 1,024 tokens on):
whatever differs between siblings (a slice's text and its place, a candidate's approach) must come
after everything they share (system text, playbook lessons, document brief, question, task). Each
branch kind's siblings are rendered from the default templates and compared as the endpoint reads
them: the messages in order."""

from __future__ import annotations

import os

from langchain_core.messages import BaseMessage

from parallax.logic.branch_plans import branch_messages
from parallax.logic.speculation import APPROACHES
from parallax.prompts.solve import candidate_messages

LESSONS = [
    {"id": "pb-1", "text": "Quote the figure with its unit."},
    {"id": "pb-2", "text": "Check the year."},
]
SCHEMA = {"type": "object", "properties": {"revenue": {"type": "number"}}, "required": ["revenue"]}
SLICES = [
    "Revenue was 4,796 million dollars in 2024.",
    "The outlook for 2025 is cautious.",
    "Segments: Print.",
]


def read(messages: list[BaseMessage]) -> str:
    """The prompt as the endpoint reads it, message after message."""
    return "".join(f"<{m.type}>{m.content}" for m in messages)


def shared_prefix(prompts: list[list[BaseMessage]]) -> str:
    return os.path.commonprefix([read(p) for p in prompts])


def slice_prompts(schema: dict | None) -> list[list[BaseMessage]]:
    return [
        branch_messages(
            {
                "kind": "slice",
                "text": part,
                "question": "What was revenue?",
                "playbook": LESSONS,
                "index": i,
                "total": len(SLICES),
                "brief": "A filing in 3 parts.",
            },
            None,
            schema,
        )
        for i, part in enumerate(SLICES)
    ]


def test_slices_share_system_lessons_brief_and_question_before_their_own_part():
    for schema in (None, SCHEMA):
        prompts = slice_prompts(schema)
        common = shared_prefix(prompts)
        system = prompts[0][0].content
        assert common.startswith(f"<system>{system}<human>"), (
            schema
        )  # the whole system text, lessons included
        assert "[pb-2] Check the year." in common
        assert common.endswith(
            "Brief: A filing in 3 parts.\nQuestion: What was revenue?\n\nPart "
        ), common[-80:]
        for prompt, part in zip(
            prompts, SLICES, strict=True
        ):  # what is a slice's own comes after: place, text
            assert read(prompt)[len(common) :].endswith(part)


def test_votes_share_their_whole_prompt():
    for schema in (None, SCHEMA):
        ask = {"kind": "vote", "text": "How many apples?", "question": "", "playbook": LESSONS}
        prompts = [branch_messages(ask, None, schema) for _ in range(3)]
        assert shared_prefix(prompts) == read(prompts[0])


def test_candidates_share_everything_but_their_approach_which_comes_last():
    hints = [hint for _, hint in APPROACHES]
    prompts = [
        candidate_messages("Write add(a, b).", "", LESSONS, hint, " (checked by tests)")
        for hint in hints
    ]
    common = shared_prefix(prompts)
    assert common.startswith(
        f"<system>{prompts[0][0].content}<human>Write add(a, b).\n\nApproach: "
    )
    for prompt, hint in zip(prompts, hints, strict=True):
        assert read(prompt).endswith(hint)


def test_a_section_run_sends_its_first_slice_ahead_so_the_others_read_the_shared_prefix_from_cache(
    billing,
):
    import json

    from parallax.graphs.solve import graph
    from parallax.state.context import Context
    from testkit.billing_server import Pricing

    # cached once read, as hosted APIs do: slices sent together would all miss (vLLM v1 would let
    # them hit anyway)
    server = billing(
        lambda body, k: json.dumps({"relevant": False, "points": []}), Pricing(cache_timing="read")
    )
    question = "Which figures does the filing report? " + " ".join(f"detail{i}" for i in range(400))
    pages = [f"Page {i} says item {i} costs {i} dollars. " * 3 for i in range(8)]
    out = graph.invoke(
        {"pages": pages, "question": question, "mode": "section"}, context=Context(slice_chars=200)
    )
    log = server.log()
    assert out["mode"] == "section" and len(log) == 8 and log[0]["cached_tokens"] == 0
    assert all(e["cached_tokens"] >= 400 for e in log[1:]), [
        e["cached_tokens"] for e in log
    ]  # the question at least
