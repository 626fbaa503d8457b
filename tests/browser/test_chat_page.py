"""Agent Chat UI, built from its vendored source, in headless Chromium against `langgraph dev`'s `chat` graph.

What a person does: open the UI on the chat graph, ask a question and read the answer, ask one
the branches cannot settle, meet the review request (Agent Chat UI's human-in-the-loop card)
and approve it; hold a five-turn conversation whose follow-ups point back. The model is the fault server
with a scripted reply (tests/support/review_model.py; tests/support/conversation_model.py for the conversation).

Needs what `.ci/run` sets up (a skip fails in CI): Debian's `chromium` and `chromium-driver`,
and the app built (`npm ci && npx next build` in tests/browser/agent-chat-ui). Screenshots go to
ROOT/.browser-shots/ (PNG, gitignored), one per step.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from parallax.runtime.model_server import wait_for_200
from tests.support.conversation_model import FIVE_TURNS, UNKNOWN, conversing
from tests.support.langgraph_dev import (
    LANGGRAPH,
    ROOT,
    DevServer,
    free_port,
    scripted_dev_server,
)
from tests.support.review_model import SURE, review_reply

pytestmark = pytest.mark.integration

APP = ROOT / "tests" / "browser" / "agent-chat-ui"
SHOTS = ROOT / ".browser-shots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 90


def missing() -> list[str]:
    out = []
    if not Path(CHROMIUM).is_file() or not Path(CHROMEDRIVER).is_file():
        out.append("Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)")
    if not (APP / ".next" / "BUILD_ID").is_file():
        out.append(f"the built app: cd {APP.relative_to(ROOT)} && npm ci && npx next build")
    if not LANGGRAPH.is_file():
        out.append(f"the langgraph CLI at {LANGGRAPH}")
    try:
        import selenium  # noqa: F401
    except ImportError:
        out.append("selenium (pip install -e '.[test]')")
    return out


@pytest.fixture(scope="module")
def chat_server(tmp_path_factory) -> Iterator[DevServer]:
    if lacking := missing():
        pytest.skip("the browser test needs: " + "; ".join(lacking))
    with scripted_dev_server(tmp_path_factory.mktemp("browser-dev"), review_reply) as server:
        yield server


@pytest.fixture(scope="module")
def app_url(chat_server, tmp_path_factory) -> Iterator[str]:
    """`next start` on the built app; the UI is pointed at the chat graph by its query string."""
    port = free_port()
    log_path = tmp_path_factory.mktemp("next") / "next.log"
    with open(log_path, "wb") as log:
        process = subprocess.Popen([str(APP / "node_modules" / ".bin" / "next"), "start", "-H", "127.0.0.1", "-p", str(port)],
                                   cwd=APP, env={**os.environ, "NEXT_TELEMETRY_DISABLED": "1"}, stdout=log,
                                   stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
    try:
        base = f"http://127.0.0.1:{port}"
        if wait_for_200(base, 60, alive=lambda: process.poll() is None) != "ready":
            pytest.fail(f"next start did not come up:\n{log_path.read_text(errors='replace')[-3000:]}")
        yield f"{base}/?apiUrl={chat_server.url}&assistantId=chat"
    finally:
        if process.poll() is None:
            os.killpg(process.pid, 15)
            process.wait(10)


@pytest.fixture
def browser() -> Iterator:
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--window-size=1280,1400",
                 "--disable-gpu", "--no-first-run"):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


def shot(driver, name: str) -> Path:
    SHOTS.mkdir(exist_ok=True)
    path = SHOTS / f"{name}.png"
    driver.save_screenshot(str(path))
    return path


def ask(driver, wait, text: str) -> None:
    from selenium.webdriver.common.by import By
    from selenium.webdriver.common.keys import Keys
    from selenium.webdriver.support import expected_conditions as ec

    box = wait.until(ec.element_to_be_clickable((By.CSS_SELECTOR, "textarea[placeholder='Type your message...']")))
    box.send_keys(text)
    box.send_keys(Keys.ENTER)


def page_text(driver) -> str:
    return driver.find_element("tag name", "body").text


@pytest.fixture
def shoot_on_failure(request, browser):
    yield
    report = getattr(request.node, "rep_call", None)
    if report is not None and report.failed:
        shot(browser, "failed")
        print("page text at the failure:\n" + page_text(browser))


def test_ask_read_the_answer_meet_a_review_and_approve_it(chat_server, app_url, browser, shoot_on_failure):
    from selenium.webdriver.common.by import By
    from selenium.webdriver.support import expected_conditions as ec
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    browser.get(app_url)
    ask(browser, wait, "What is 2 + 2?")
    wait.until(lambda d: "What is 2 + 2?" in page_text(d) and
               any(line.strip() == SURE for line in page_text(d).splitlines()))
    shot(browser, "1-answer")

    ask(browser, wait, "How many moons does Jupiter have? I am unsure.")
    approve = wait.until(ec.element_to_be_clickable((By.XPATH, "//button[normalize-space()='Approve']")))
    assert "Submit rejection" in page_text(browser)  # the HITL card: edit/approve, or reject with a reason
    edit_box = browser.find_element(By.XPATH, "//button[normalize-space()='Approve']/ancestor::div[.//textarea][1]//textarea")
    unsure = edit_box.get_attribute("value")
    assert unsure in {"42", "41", "40"}  # the answer under review, ready to be edited
    browser.execute_script("window.scrollTo(0, 0); arguments[0].scrollIntoView({block: 'start'})",
                           browser.find_element(By.XPATH, "//*[contains(text(), 'How many moons')]"))
    shot(browser, "2-review-request")
    approve.click()
    wait.until(lambda d: "Response submitted successfully" in page_text(d) or not d.find_elements(
        By.XPATH, "//button[normalize-space()='Approve']"))
    shot(browser, "3-approved")

    # what the UI did reached the run: the thread's review is the approval, its trace has the feedback
    thread_id = browser.current_url.split("threadId=")[1].split("&")[0]
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
        item = api.get("/store/items", params={"namespace": "traces.default", "key": trace_id}).json()
        assert item["value"]["feedback"][-1]["score"] == 1.0
        threads = api.post("/threads/search", json={"metadata": {"graph_id": "chat"}, "limit": 100}).json()
        assert thread_id in {t["thread_id"] for t in threads}  # the UI's thread list finds it
    browser.get(app_url + f"&threadId={thread_id}")
    wait.until(lambda d: "How many moons" in page_text(d))
    shot(browser, "4-thread-reopened")


def test_a_five_turn_conversation_whose_follow_ups_point_back_is_answered_turn_by_turn(chat_server, app_url, browser,
                                                                                      shoot_on_failure):
    """Each follow-up ("And half of that?") needs an earlier answer; the model answers only what its prompt states
    (tests/support/conversation_model.py), so every right reply shows the conversation reached the work."""
    from selenium.webdriver.support.ui import WebDriverWait

    wait = WebDriverWait(browser, WAIT_S)
    browser.get(app_url)
    with conversing(chat_server.model):
        for n, (said, want) in enumerate(FIVE_TURNS, 1):
            ask(browser, wait, said)
            wait.until(lambda d, said=said, want=want: said in page_text(d) and
                       any(line.strip() == want for line in page_text(d).splitlines()))
            shot(browser, f"conversation-{n}")
    lines = [line.strip() for line in page_text(browser).splitlines()]
    assert all(want in lines for _, want in FIVE_TURNS) and UNKNOWN not in page_text(browser)
    thread_id = browser.current_url.split("threadId=")[1].split("&")[0]
    with httpx.Client(base_url=chat_server.url, trust_env=False, timeout=10) as api:
        values = api.get(f"/threads/{thread_id}/state").json()["values"]
    assert [m["content"] for m in values["messages"] if m["type"] == "ai"] == [want for _, want in FIVE_TURNS]
    assert values["last_run"]["task"] == "What is 160 minus 144?"
