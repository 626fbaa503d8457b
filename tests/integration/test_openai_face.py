"""The OpenAI-compatible face (`/v1`) under a real `langgraph dev` (langgraph.json `http.app`),
driven by the official openai SDK and LangChain's ChatOpenAI, with the scripted fault server as the
model.

The same checks run against `parallax serve` on PostgreSQL and Redis in test_openai_deploy.py;
this module also runs the README's example as written.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import re
from collections.abc import Callable

import httpx
import pytest

from testkit import openai_checks
from testkit.langgraph_dev import LANGGRAPH, ROOT, DevServerError, scripted_dev_server

pytestmark = pytest.mark.integration
README_URL = "http://127.0.0.1:2026/v1"


@pytest.fixture(scope="module")
def dev(tmp_path_factory):
    if not LANGGRAPH.is_file():
        pytest.skip(f"langgraph CLI not found at {LANGGRAPH}")
    try:
        with scripted_dev_server(
            tmp_path_factory.mktemp("openai-dev"),
            openai_checks.reply,
            latency_ms=10,
            PARALLAX_MAX_TOKENS="128",
        ) as running:
            yield running
    except DevServerError as exc:
        pytest.fail(str(exc))


@pytest.fixture
def client(dev):
    from openai import OpenAI

    return OpenAI(base_url=f"{dev.url}/v1", api_key="unused-by-langgraph-dev", max_retries=0)


def test_models_are_the_modes(client):
    openai_checks.check_models(client)


def test_a_plain_completion_is_a_vote_run_with_its_tally_and_usage(client, dev):
    extra = openai_checks.check_plain(client)
    state = httpx.get(f"{dev.url}/threads/{extra['thread_id']}/state", timeout=10).json()
    assert state["values"]["trace_id"] == extra["trace_id"]  # a real run on a real thread
    assert state["values"]["task"].startswith(
        "System: Answer with a number."
    )  # earlier turns: what it is about
    assert state["values"]["question"] == "What is 6 * 7?"  # the last user message: what to do


def test_streamed_completion_thinks_then_answers_then_counts_tokens(client):
    openai_checks.check_stream(client)


def test_parse_with_a_pydantic_model_returns_the_users_object(client):
    openai_checks.check_parse(client)


def test_a_typed_vote_stops_after_its_first_wave_when_every_field_agrees(client, dev):
    openai_checks.check_typed_vote_stops_after_a_settled_wave(client, dev.model)


def test_a_typed_vote_with_a_split_field_asks_a_second_wave(client, dev):
    openai_checks.check_typed_vote_asks_a_second_wave_for_a_split_field(client, dev.model)


def test_langchain_chat_openai_plain_and_with_structured_output(dev):
    openai_checks.check_langchain(f"{dev.url}/v1", "unused-by-langgraph-dev")


def test_what_it_cannot_do_is_refused_with_openai_error_json(client, dev):
    openai_checks.check_refusals(client)
    bad = httpx.post(f"{dev.url}/v1/chat/completions", content=b"{not json", timeout=10)
    assert bad.status_code == 400 and bad.json()["error"]["type"] == "invalid_request_error"
    assert "not valid JSON" in bad.json()["error"]["message"]


def test_a_needs_review_run_still_answers_200_and_says_so(dev):
    from openai import OpenAI

    dev.model.config = dev.model.config.model_copy(update={"reply": split_votes()})
    try:
        client = OpenAI(base_url=f"{dev.url}/v1", api_key="x", max_retries=0)
        reply = client.chat.completions.create(
            model="parallax-vote",
            messages=[{"role": "user", "content": "6 * 7?"}],
            extra_body={"parallax": {"votes": 2}},
        )
    finally:
        dev.model.config = dev.model.config.model_copy(update={"reply": openai_checks.reply})
    assert reply.choices[0].finish_reason == "stop"
    assert reply.parallax["status"] == "needs_review" and reply.parallax["reason"], reply.parallax
    assert reply.parallax["vote_counts"] == {"41": 1, "43": 1}


def split_votes() -> Callable[[dict], str]:
    """A model whose votes alternate between 41 and 43 (no majority) and whose judge picks
    neither."""
    calls = itertools.count()

    def reply(body: dict) -> str:
        text = json.dumps(body.get("messages"))
        if "Independent solvers disagreed" in text:
            return json.dumps({"choice": "neither", "reason": "both look wrong"})
        if "answer" in json.dumps(body.get("response_format")):
            return json.dumps({"reasoning": "a guess", "answer": str(41 + 2 * (next(calls) % 2))})
        return openai_checks.reply(body)

    return reply


def test_the_readme_example_runs_as_written(dev):
    """README.md's "OpenAI-compatible endpoint" example, with its URL pointed at this server."""
    readme = (ROOT / "README.md").read_text()
    section = readme.split("## OpenAI-compatible endpoint", 1)[1].split("\n## ", 1)[0]
    code = re.findall(r"```python\n(.*?)```", section, re.S)[0]
    assert README_URL in code
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code.replace(README_URL, f"{dev.url}/v1"), "README.md", "exec"), {})  # noqa: S102 - our README
    lines = printed.getvalue().splitlines()
    assert lines[0] == "42 ok {'42': 3}", (
        lines
    )  # votes 5 is the most: 3 agreeing votes settle (adaptive votes)
    assert lines[1] == "reason: none", lines  # an ok run with nothing to say
    assert lines[2] == "vendor='ACME Tools' total=1250.5 paid=False", lines


SECTIONS = "\n\n".join(
    f"# {title}\n\n" + f"The team discussed {title.lower()} at length and agreed on a plan. " * 3
    for title in ("Budget", "Hiring", "Remote work")
)


def test_section_mode_slices_the_earlier_turns_and_answers_the_last(client, dev):
    reply = client.chat.completions.create(
        model="parallax-section",
        messages=[
            {"role": "user", "content": SECTIONS},
            {"role": "assistant", "content": "Got the notes."},
            {"role": "user", "content": "What was agreed?"},
        ],
        extra_body={"parallax": {"context": {"slice_chars": 250}}},
    )
    assert reply.parallax["mode"] == "section" and reply.parallax["status"] in (
        "ok",
        "needs_review",
    ), reply.parallax
    state = httpx.get(f"{dev.url}/threads/{reply.parallax['thread_id']}/state", timeout=10).json()[
        "values"
    ]
    assert (
        sum(b["kind"] == "slice" for b in state["branches"]) == 3
    )  # one branch per section of the pasted notes
    assert state["question"] == "What was agreed?"


def test_plan_mode_streams_its_plan_and_tasks_as_thinking(client, dev):
    chunks = list(
        client.chat.completions.create(
            model="parallax-plan",
            stream=True,
            messages=[
                {
                    "role": "user",
                    "content": (
                        "Compute the total of 17 and 25, then write a one-line note about it."
                    ),
                }
            ],
        )
    )
    thinking = "".join(
        getattr(c.choices[0].delta, "reasoning_content", None) or "" for c in chunks if c.choices
    )
    assert "plan: " in thinking and "task 1 " in thinking, thinking
    final = next(c for c in chunks if c.choices and c.choices[0].finish_reason == "stop").parallax
    assert final["mode"] == "plan" and final["status"] in ("ok", "needs_review", "failed"), final
    state = httpx.get(f"{dev.url}/threads/{final['thread_id']}/state", timeout=10).json()["values"]
    assert state["plan"]["tasks"] and state["trace_id"] == final["trace_id"]
