"""Parallax's chat page (web/chat), built and served as static files, in headless Chromium against
`langgraph dev`'s `chat` graph.

What a person does: open the page on the chat graph, ask a question and read the answer with its run
line, ask one the branches cannot settle, meet the review card and approve it, find the conversation
in the thread list and reopen it; hold a five-turn conversation whose follow-ups point back. The
model is the fault server with a scripted reply (testkit/review_model.py;
testkit/conversation_model.py for the conversation). The same steps against `parallax serve`:
tests/integration/test_chat_page_deploy.py. Needs what `.ci/run` sets up (testkit/chat_page.py; a
skip fails in CI).
"""

from __future__ import annotations

import time
from collections.abc import Iterator

import httpx
import pytest

from testkit.chat_page import (
    WAIT_S,
    ChatPage,
    ask_then_meet_a_review_and_approve_it,
    chat_page,
    hold_five_turns,
    missing,
    static_site,
)
from testkit.conversation_model import FIVE_TURNS, conversing
from testkit.langgraph_dev import LANGGRAPH, DevServer, scripted_dev_server
from testkit.review_model import review_reply

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory) -> Iterator[DevServer]:
    lacking = missing() + ([] if LANGGRAPH.is_file() else [f"the langgraph CLI at {LANGGRAPH}"])
    if lacking:
        pytest.skip("the browser test needs: " + "; ".join(lacking))
    with scripted_dev_server(tmp_path_factory.mktemp("browser-dev"), review_reply) as server:
        yield server


@pytest.fixture(scope="module")
def site(chat_server) -> Iterator[str]:
    with static_site() as url:
        yield url


@pytest.fixture
def page(request, site) -> Iterator[ChatPage]:
    with chat_page(request, site, "dev") as opened:
        yield opened


def test_ask_read_the_answer_meet_a_review_and_approve_it(chat_server, page):
    page.open(chat_server.url)
    unsure = ask_then_meet_a_review_and_approve_it(page)

    # what the page did reached the run: the thread's review is the approval, its trace has the
    # feedback
    thread_id = page.thread_id()
    with httpx.Client(base_url=chat_server.url, trust_env=False, timeout=10) as api:
        for _ in range(WAIT_S * 2):
            state = api.get(f"/threads/{thread_id}/state").json()
            if not state.get("next"):
                break
            time.sleep(0.5)
        values = state["values"]
        assert state["next"] == [] and values["review"] == {"kind": "accept"}, state
        assert values["messages"][-1]["response_metadata"]["parallax"]["review"] == "accepted"
        assert values["messages"][-1]["content"] == unsure
        trace_id = values["last_run"]["trace_id"]
        item = api.get(
            "/store/items", params={"namespace": "traces.default", "key": trace_id}
        ).json()
        assert item["value"]["feedback"][-1]["score"] == 1.0

    page.wait.until(
        lambda _: "What is 2 + 2?" in page.thread_titles()
    )  # the thread list found it by graph_id
    page.open(chat_server.url, thread_id)  # a fresh load of the conversation, from the server
    page.wait.until(lambda _: len(page.replies()) == 2)
    assert page.said() == ["What is 2 + 2?", "How many moons does Jupiter have? I am unsure."]
    assert page.replies() == ["4", unsure] and "review: accepted" in page.run_lines()[1]
    page.shot("4-thread-reopened")


def test_a_five_turn_conversation_whose_follow_ups_point_back_is_answered_turn_by_turn(
    chat_server, page
):
    """Each follow-up ("And half of that?") needs an earlier answer; the model answers only what its
    prompt states (testkit/conversation_model.py), so every right reply shows the conversation
    reached the work.
    """
    page.open(chat_server.url)
    with conversing(chat_server.model):
        hold_five_turns(page)
    with httpx.Client(base_url=chat_server.url, trust_env=False, timeout=10) as api:
        values = api.get(f"/threads/{page.thread_id()}/state").json()["values"]
    assert [m["content"] for m in values["messages"] if m["type"] == "ai"] == [
        want for _, want in FIVE_TURNS
    ]
    assert values["last_run"]["task"] == "What is 160 minus 144?"
