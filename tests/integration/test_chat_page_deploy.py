"""Parallax's chat page (web/chat) in headless Chromium against the deployed graph API: two
`parallax serve` replicas on PostgreSQL and Redis, the page served from its own origin with the API
key pasted into its form.

The steps of tests/browser/test_chat_page.py (a review met and approved, a five-turn conversation),
plus what a deployment adds: no key, no conversation (the page shows the server's 401); the
conversation reopened from the other replica; another tenant's key lists none of it. Needs the
server venv and what `.ci/run` sets up for the browser (testkit/chat_page.py); `.ci/run` runs it
with `-m deploy` and fails when it is skipped.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from testkit.aegra_cluster import two_replicas
from testkit.chat_page import (
    ChatPage,
    ask_then_meet_a_review_and_approve_it,
    chat_page,
    hold_five_turns,
    missing,
    static_site,
)
from testkit.conversation_model import FIVE_TURNS, conversing
from testkit.review_model import review_reply

pytestmark = [pytest.mark.integration, pytest.mark.deploy]
KEYS = {"acme": "key-acme", "beta": "key-beta"}


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    if lacking := missing():
        pytest.skip("the browser test needs: " + "; ".join(lacking))
    with two_replicas(
        tmp_path_factory.mktemp("chat-page"), review_reply, KEYS, max_pending=4
    ) as running:
        yield running


@pytest.fixture(scope="module")
def site(cluster) -> Iterator[str]:
    with static_site() as url:
        yield url


@pytest.fixture
def page(request, site) -> Iterator[ChatPage]:
    with chat_page(request, site, "serve") as opened:
        yield opened


def state_of(replica, thread_id: str, tenant: str = "acme") -> dict:
    with httpx.Client(
        base_url=replica.url, trust_env=False, timeout=10, headers={"x-api-key": KEYS[tenant]}
    ) as api:
        return api.get(f"/threads/{thread_id}/state").json()


def test_with_a_key_a_review_is_met_and_approved_and_the_thread_reopens_on_the_other_replica(
    cluster, page
):
    a, b = cluster.replicas[:2]
    page.open(a.url)
    page.wait.until(
        lambda _: "401: missing or unknown API key" in page.text()
    )  # the server's refusal, as it said it
    page.shot("0-no-key")

    page.connect(a.url, KEYS["acme"])
    unsure = ask_then_meet_a_review_and_approve_it(page)
    thread_id = page.thread_id()
    state = state_of(a, thread_id)
    assert state["next"] == [] and state["values"]["review"] == {"kind": "accept"}, state
    assert state["values"]["messages"][-1]["content"] == unsure
    trace = cluster.cli("trace", state["values"]["last_run"]["trace_id"], "--tenant", "acme")
    assert trace["feedback"][-1]["score"] == 1.0 and trace["feedback"][-1]["by"] == "chat review"

    page.connect(b.url, KEYS["acme"])  # the other replica: the list comes from the shared database
    page.wait.until(lambda _: "What is 2 + 2?" in page.thread_titles())
    page.driver.find_element(
        "xpath", "//nav[@aria-label='Conversations']//button[.//span='What is 2 + 2?']"
    ).click()
    page.wait.until(lambda _: len(page.replies()) == 2)
    assert page.thread_id() == thread_id and page.replies() == ["4", unsure]
    assert "review: accepted" in page.run_lines()[1]
    page.shot("4-thread-reopened")

    page.connect(b.url, KEYS["beta"])  # another tenant's key: none of acme's conversations
    page.wait.until(lambda _: "No conversations yet." in page.text())
    assert "What is 2 + 2?" not in page.thread_titles()


def test_a_five_turn_conversation_is_answered_turn_by_turn_through_the_served_api(cluster, page):
    a = cluster.replicas[0]
    page.open(a.url)
    page.connect(a.url, KEYS["acme"])
    with conversing(cluster.model):
        hold_five_turns(page)
    values = state_of(a, page.thread_id())["values"]
    assert [m["content"] for m in values["messages"] if m["type"] == "ai"] == [
        want for _, want in FIVE_TURNS
    ]
    assert values["last_run"]["task"] == "What is 160 minus 144?"
