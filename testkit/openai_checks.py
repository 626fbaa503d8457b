"""What OpenAI clients must get from Parallax's `/v1` face, checked the same way against every
server.

Why this exists: the face is one implementation mounted by `langgraph dev` and by `parallax serve`,
so the checks are one implementation too (tests/integration/test_openai_face.py and
test_openai_deploy.py run them). Each check uses a real client as an app would: the official
`openai` SDK (plain, streamed, `parse` with a pydantic model) and LangChain's `ChatOpenAI`
(plain, `with_structured_output`), and asserts what a user would see.

The model behind Parallax is the scripted fault server with `reply` below: plain branches answer
"42", typed branches (their schema wraps the user's in `data`) answer the invoice `INVOICE`. The
checks of adaptive typed votes script the server themselves (`scripted_votes`) and count its
requests.
"""

from __future__ import annotations

import json

from pydantic import BaseModel

from testkit.extraction_model import scripted_votes
from testkit.fault_server import FaultServer, default_reply

INVOICE = {"vendor": "ACME Tools", "total": 1250.5, "paid": False}
VOTES = 3


class Invoice(BaseModel):
    vendor: str
    total: float
    paid: bool


class Filing(BaseModel):
    revenue: float
    currency: str


FILING_TASK = "ACME's revenue (millions) and its currency?"


def reply(body: dict) -> str:
    """A typed branch gets INVOICE (with its reasoning first); anything else the fault server's
    default."""
    fmt = body.get("response_format") or {}
    schema = (fmt.get("json_schema") or {}).get("schema") or fmt.get("schema") or {}
    if "data" in schema.get("properties", {}):
        return json.dumps({"reasoning": "read off the invoice", "data": INVOICE})
    return default_reply(body)


def check_models(client) -> None:
    assert [m.id for m in client.models.list()] == [
        "parallax-auto",
        "parallax-direct",
        "parallax-vote",
        "parallax-section",
        "parallax-speculate",
        "parallax-plan",
    ]
    assert client.models.retrieve("parallax-plan").owned_by == "parallax"


def check_plain(client) -> dict:
    """A vote run through `chat.completions.create`: the merged answer, the tally and the summed
    usage."""
    reply_ = client.chat.completions.create(
        model="parallax-vote",
        messages=[
            {"role": "system", "content": "Answer with a number."},
            {"role": "user", "content": "What is 6 * 7?"},
        ],
        extra_body={"parallax": {"votes": VOTES}},
    )
    choice = reply_.choices[0]
    assert (choice.message.content, choice.finish_reason, choice.message.role) == (
        "42",
        "stop",
        "assistant",
    )
    extra = reply_.parallax
    assert (extra["status"], extra["vote_counts"], extra["mode"]) == (
        "ok",
        {"42": VOTES},
        "vote",
    ), extra
    assert extra["trace_id"] and extra["thread_id"] and reply_.id == f"chatcmpl-{extra['run_id']}"
    # every branch's tokens: three votes and the safety check, each call counted by the fault server
    assert reply_.usage.total_tokens == reply_.usage.prompt_tokens + reply_.usage.completion_tokens
    assert reply_.usage.completion_tokens >= VOTES and reply_.usage.prompt_tokens > 0
    return extra


def check_stream(client) -> dict:
    """Thinking as branches finish, then the answer, then the usage chunk."""
    chunks = list(
        client.chat.completions.create(
            model="parallax-vote",
            messages=[{"role": "user", "content": "What is 6 * 7?"}],
            stream=True,
            stream_options={"include_usage": True},
            extra_body={"parallax": {"votes": VOTES}},
        )
    )
    deltas = [c.choices[0].delta for c in chunks if c.choices]
    thinking = "".join(getattr(d, "reasoning_content", None) or "" for d in deltas)
    assert thinking.count("vote branch") == VOTES and "-> 42" in thinking, thinking
    content = "".join(d.content or "" for d in deltas)
    assert content == "42"
    first_content = next(i for i, d in enumerate(deltas) if d.content)
    last_thought = max(i for i, d in enumerate(deltas) if getattr(d, "reasoning_content", None))
    assert last_thought < first_content  # progress first, then the answer
    assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
    assert chunks[-1].choices == [] and chunks[-1].usage.total_tokens > 0
    assert all(c.usage is None for c in chunks[:-1])
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").parallax
    assert (final["status"], final["vote_counts"]) == ("ok", {"42": VOTES}), final
    assert chunks[0].parallax["thread_id"] == final["thread_id"]  # known before the run ends
    return final


def check_parse(client) -> None:
    """`parse` with a pydantic model: the run's output schema, and the user's object back."""
    typed = client.chat.completions.parse(
        model="parallax-vote",
        messages=[
            {
                "role": "user",
                "content": (
                    "Vendor, total and whether it is paid: ACME Tools invoice, total 1250.50, due."
                ),
            }
        ],
        response_format=Invoice,
        extra_body={"parallax": {"votes": VOTES}},
    )
    parsed = typed.choices[0].message.parsed
    assert parsed == Invoice(**INVOICE)
    # a typed vote counts field by field: three votes agreeing on every field
    assert (typed.parallax["status"], typed.parallax["confidence"], typed.parallax["mode"]) == (
        "ok",
        1.0,
        "vote",
    ), typed.parallax


def check_langchain(base_url: str, api_key: str) -> None:
    from langchain_openai import ChatOpenAI

    llm = ChatOpenAI(model="parallax-direct", base_url=base_url, api_key=api_key, max_retries=0)
    said = llm.invoke("What is 6 * 7?")
    assert said.content == "42"
    assert said.usage_metadata["total_tokens"] > 0
    structured = llm.with_structured_output(Invoice)
    assert structured.invoke("The ACME Tools invoice: total 1250.50, not paid yet.") == Invoice(
        **INVOICE
    )


def check_refusals(client) -> None:
    """What Parallax cannot do: OpenAI's error JSON with the status an OpenAI client expects, never
    a traceback."""
    import openai

    ask = [{"role": "user", "content": "What is 6 * 7?"}]
    cases = [
        ({"model": "parallax-vote", "messages": ask, "n": 2}, openai.BadRequestError, "n"),
        (
            {
                "model": "parallax-direct",
                "messages": ask,
                "tools": [
                    {
                        "type": "function",
                        "function": {
                            "name": "add",
                            "parameters": {"type": "object", "properties": {}},
                        },
                    }
                ],
            },
            openai.BadRequestError,
            "tools",
        ),
        ({"model": "gpt-4o", "messages": ask}, openai.NotFoundError, "model"),
        (
            {
                "model": "parallax-direct",
                "messages": ask,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "bad", "schema": {"type": "string"}},
                },
            },
            openai.BadRequestError,
            "response_format",
        ),
        (
            {
                "model": "parallax-plan",
                "messages": ask,
                "response_format": {
                    "type": "json_schema",
                    "json_schema": {"name": "x", "schema": Invoice.model_json_schema()},
                },
            },
            openai.BadRequestError,
            "response_format",
        ),
    ]
    for request, error, param in cases:
        try:
            client.chat.completions.create(**request)
        except error as exc:
            assert exc.body["param"] == param and exc.body["type"] == "invalid_request_error", (
                exc.body
            )
            assert "Traceback" not in exc.message
        else:
            raise AssertionError(f"{request} was not refused")


def check_typed_vote_stops_after_a_settled_wave(client, model: FaultServer) -> None:
    """`parse` on parallax-vote with at most 8 votes: three that agree on every field settle it, and
    no more are asked (the face reports no vote count: the model server's requests are the votes
    asked)."""
    with scripted_votes(model, lambda i: {"revenue": 4796, "currency": "USD"}) as requests:
        typed = client.chat.completions.parse(
            model="parallax-vote",
            messages=[{"role": "user", "content": FILING_TASK}],
            response_format=Filing,
            extra_body={"parallax": {"votes": 8}},
        )
        asked = requests()
    assert typed.choices[0].message.parsed == Filing(revenue=4796, currency="USD"), typed.choices[
        0
    ].message
    assert (typed.parallax["status"], typed.parallax["confidence"]) == ("ok", 1.0), typed.parallax
    assert asked == 3, (
        f"{asked} model requests"
    )  # the first wave; the other 5 votes were never asked


def check_typed_vote_asks_a_second_wave_for_a_split_field(client, model: FaultServer) -> None:
    """A field split 2-1 after the first wave: three more votes are asked, and 5-1 settles it."""
    currencies = ["USD", "EUR", "USD", "USD", "USD", "USD", "USD", "USD"]
    with scripted_votes(
        model, lambda i: {"revenue": 4796, "currency": currencies[i % 8]}
    ) as requests:
        typed = client.chat.completions.parse(
            model="parallax-vote",
            messages=[{"role": "user", "content": FILING_TASK}],
            response_format=Filing,
            extra_body={"parallax": {"votes": 8}},
        )
        asked = requests()
    assert typed.choices[0].message.parsed == Filing(revenue=4796, currency="USD"), typed.choices[
        0
    ].message
    assert (typed.parallax["status"], typed.parallax["confidence"]) == ("ok", 0.833), typed.parallax
    assert asked == 6, f"{asked} model requests"
