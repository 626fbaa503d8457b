"""A chat completions body as a graph API run (server/openai_request.py): the graph, the input, the
refusals."""

from __future__ import annotations

import pytest
from pydantic import BaseModel

from parallax.server.openai_request import Refusal, parse

ASK = [{"role": "user", "content": "What is 6 * 7?"}]


class Invoice(BaseModel):
    vendor: str
    total: float


def refused(body: dict) -> Refusal:
    with pytest.raises(Refusal) as caught:
        parse(body)
    return caught.value


@pytest.mark.parametrize(
    ("model", "graph", "mode"),
    [
        ("parallax-direct", "solve", "direct"),
        ("parallax-vote", "solve", "vote"),
        ("parallax-section", "solve", "section"),
        ("parallax-speculate", "solve", "speculate"),
        ("parallax-auto", "solve", "auto"),
        ("parallax-plan", "plan", "plan"),
    ],
)
def test_the_model_name_picks_graph_and_mode(model, graph, mode):
    asked = parse({"model": model, "messages": ASK})
    assert (asked.graph, asked.input["mode"], asked.input["task"]) == (
        graph,
        mode,
        "What is 6 * 7?",
    )
    assert "question" not in asked.input and not asked.stream and not asked.typed


def test_auto_plans_a_request_with_several_steps_as_parallax_run_does():
    steps = "Compute the total of 17 and 25, then write a one-line note about it."
    assert (
        parse({"model": "parallax-auto", "messages": [{"role": "user", "content": steps}]}).graph
        == "plan"
    )
    typed = parse(
        {
            "model": "parallax-auto",
            "messages": [{"role": "user", "content": steps}],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "Invoice", "schema": Invoice.model_json_schema()},
            },
        }
    )
    assert typed.graph == "solve"  # a schema is answered by solve, never planned


def test_speculate_takes_its_candidates_and_a_bad_count_is_refused_before_any_run():
    asked = parse({"model": "parallax-speculate", "messages": ASK, "parallax": {"candidates": 4}})
    assert (asked.input["mode"], asked.input["candidates"]) == ("speculate", 4)
    bad = refused({"model": "parallax-speculate", "messages": ASK, "parallax": {"candidates": 99}})
    assert (
        bad.status == 400
        and bad.param == "parallax.candidates"
        and "candidates must be a whole number" in str(bad)
    )


def test_earlier_turns_are_what_the_last_user_message_is_about():
    asked = parse(
        {
            "model": "parallax-direct",
            "messages": [
                {"role": "system", "content": "You are terse."},
                {"role": "user", "content": [{"type": "text", "text": "Revenue was 200."}]},
                {"role": "assistant", "content": "Noted."},
                {"role": "user", "content": "And the margin if costs were 150?"},
            ],
        }
    )
    assert (
        asked.input["task"]
        == "System: You are terse.\n\nUser: Revenue was 200.\n\nAssistant: Noted."
    )
    assert asked.input["question"] == "And the margin if costs were 150?"


def test_options_ride_in_the_parallax_object_and_schema_becomes_output_schema():
    asked = parse(
        {
            "model": "parallax-vote",
            "messages": ASK,
            "stream": True,
            "stream_options": {"include_usage": True},
            "parallax": {
                "votes": 5,
                "min_votes": 4,
                "red_team": True,
                "context": {"max_concurrency": 2},
            },
            "response_format": {
                "type": "json_schema",
                "json_schema": {
                    "name": "Invoice",
                    "strict": True,
                    "schema": Invoice.model_json_schema(),
                },
            },
            "temperature": 0.9,
            "max_tokens": 50,
        }
    )
    assert {k: asked.input[k] for k in ("votes", "min_votes", "red_team")} == {
        "votes": 5,
        "min_votes": 4,
        "red_team": True,
    }
    assert asked.input["output_schema"]["properties"].keys() == {"vendor", "total"}
    assert (
        asked.context == {"max_concurrency": 2}
        and asked.stream
        and asked.include_usage
        and asked.typed
    )
    assert "tenant" not in asked.input  # the tenant comes from the key, never the body


@pytest.mark.parametrize(
    ("body", "status", "param"),
    [
        ({"model": "parallax-vote", "messages": ASK, "n": 3}, 400, "n"),
        (
            {
                "model": "parallax-vote",
                "messages": ASK,
                "tools": [{"type": "function", "function": {"name": "f"}}],
            },
            400,
            "tools",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "functions": [{"name": "f"}]},
            400,
            "functions",
        ),
        ({"model": "parallax-vote", "messages": ASK, "tool_choice": "auto"}, 400, "tool_choice"),
        ({"model": "gpt-4o", "messages": ASK}, 404, "model"),
        ({"messages": ASK}, 400, "model"),
        ({"model": "parallax-vote", "messages": ASK, "frobnicate": 1}, 400, "frobnicate"),
        (
            {"model": "parallax-vote", "messages": ASK, "parallax": {"votez": 3}},
            400,
            "parallax.votez",
        ),
        (
            {
                "model": "parallax-vote",
                "messages": ASK,
                "parallax": {"context": {"max_concurrency": -3}},
            },
            400,
            "parallax.context.max_concurrency",
        ),
        (
            {
                "model": "parallax-vote",
                "messages": ASK,
                "parallax": {"context": {"temperature": "hot"}},
            },
            400,
            "parallax.context.temperature",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "parallax": {"min_votes": 9, "votes": 3}},
            400,
            "parallax.min_votes",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "parallax": {"playbook": "../acme"}},
            400,
            "parallax.playbook",
        ),
        ({"model": "parallax-vote", "messages": []}, 400, "messages"),
        (
            {"model": "parallax-vote", "messages": [{"role": "assistant", "content": "hi"}]},
            400,
            "messages",
        ),
        (
            {"model": "parallax-vote", "messages": [*ASK, {"role": "assistant", "content": "4"}]},
            400,
            "messages",
        ),
        (
            {"model": "parallax-vote", "messages": [{"role": "wizard", "content": "x"}]},
            400,
            "messages[0].role",
        ),
        (
            {
                "model": "parallax-vote",
                "messages": [
                    {
                        "role": "user",
                        "content": [{"type": "image_url", "image_url": {"url": "data:,"}}],
                    }
                ],
            },
            400,
            "messages[0].content",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "response_format": {"type": "json_object"}},
            400,
            "response_format",
        ),
        (
            {
                "model": "parallax-vote",
                "messages": ASK,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {
                        "name": "x",
                        "schema": {"type": "array", "items": {"type": "string"}},
                    },
                },
            },
            400,
            "response_format",
        ),
        (
            {
                "model": "parallax-plan",
                "messages": ASK,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": Invoice.model_json_schema()},
                },
            },
            400,
            "response_format",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "parallax": {"tenant": "beta"}},
            400,
            "parallax.tenant",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "parallax": {"votes": 0}},
            400,
            "parallax.votes",
        ),
        (
            {
                "model": "parallax-vote",
                "messages": ASK,
                "parallax": {"context": {"chat_model": "x"}},
            },
            400,
            "parallax.context.chat_model",
        ),
        (
            {"model": "parallax-vote", "messages": ASK, "stream_options": {"include_usage": True}},
            400,
            "stream_options",
        ),
    ],
)
def test_what_cannot_run_is_refused_with_status_and_param(body, status, param):
    refusal = refused(body)
    assert (refusal.status, refusal.param) == (status, param), refusal.message
    error = refusal.body()["error"]
    assert set(error) == {"message", "type", "param", "code"} and error["message"]


def test_a_refusal_says_what_every_face_says_and_holds_the_caller_to_the_servers_settings(
    monkeypatch,
):
    """The same sentence as logic/run_input.py's (the CLI's, /mcp's, the graph API's), with OpenAI's
    `param`; the served face holds a run's context to the server's settings (PARALLAX_MAX_TOKENS 384
    here)."""
    from parallax.logic.run_input import RunInputError, check_run_input
    from parallax.runtime.settings import reload_settings

    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "384")
    reload_settings()
    with pytest.raises(RunInputError) as sentence:
        check_run_input("solve", {"task": "What is 6 * 7?", "votes": 1001})
    refusal = refused({"model": "parallax-vote", "messages": ASK, "parallax": {"votes": 1001}})
    assert (refusal.status, refusal.param, refusal.message) == (
        400,
        "parallax.votes",
        str(sentence.value),
    )
    assert refusal.message == "votes must be a whole number from 1 to 1000, got 1001"
    raised = refused(
        {"model": "parallax-vote", "messages": ASK, "parallax": {"context": {"max_tokens": 385}}}
    )
    assert (raised.param, raised.message) == (
        "parallax.context.max_tokens",
        (
            "parallax.context.max_tokens must be at "
            "most 384 on this server (PARALLAX_MAX_TOKENS), got 385: lower it or "
            "leave it out"
        ),
    )
    lowered = parse(
        {"model": "parallax-vote", "messages": ASK, "parallax": {"context": {"max_tokens": 100}}}
    )
    assert lowered.context == {"max_tokens": 100}
    too_many = refused({"model": "parallax-vote", "messages": ASK * 201})
    assert (too_many.param, too_many.message) == (
        "messages",
        "messages must be a list of at most 200 messages, got 201",
    )
    reload_settings()


def test_a_body_that_is_not_an_object_is_refused():
    assert refused([1, 2]).status == 400
    assert refused({"model": "gpt-4o", "messages": ASK}).code == "model_not_found"


def test_the_documented_openai_fields_are_the_sdks_own():
    """OPENAI_FIELDS (accepted, each used or refused by rule) is the openai SDK's chat completions
    request: a field OpenAI adds is noticed here, not by a client whose request Parallax refuses."""
    from openai.types.chat.completion_create_params import CompletionCreateParamsBase

    from parallax.server.openai_request import OPENAI_FIELDS

    assert set(CompletionCreateParamsBase.__annotations__) | {"stream"} <= OPENAI_FIELDS
