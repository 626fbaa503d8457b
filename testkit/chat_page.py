"""Parallax's chat page (web/chat), built, served as static files and driven in headless Chromium.

Why a module: the browser test against `langgraph dev` (tests/browser) and the one against `parallax
serve` (a deploy test, tests/integration) do what a person does on the same page: connect, ask, read
each reply and its run line, meet a review and decide it. The page is served by a plain static
server on its own loopback port, so every call it makes to the graph API is cross-origin, as when a
team hosts the page apart from the API (both servers allow any origin by default: README, "Chat").

Needs what `.ci/run` sets up (a skip fails in CI): Debian's `chromium` and `chromium-driver`, and
the page built (`cd web/chat && npm ci && npm run build`). Screenshots go to ROOT/.browser-shots/
(PNG, gitignored).
"""

from __future__ import annotations

import functools
import http.server
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlparse

ROOT = Path(__file__).resolve().parents[1]
DIST = ROOT / "web" / "chat" / "dist"
SHOTS = ROOT / ".browser-shots"
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
WAIT_S = 90


def missing() -> list[str]:
    """What the browser tests need and this machine lacks (empty when all is there)."""
    out = []
    if not Path(CHROMIUM).is_file() or not Path(CHROMEDRIVER).is_file():
        out.append(
            "Debian's chromium and chromium-driver (apt-get install chromium chromium-driver)"
        )
    if not (DIST / "index.html").is_file():
        out.append("the built chat page: cd web/chat && npm ci && npm run build")
    try:
        import selenium  # noqa: F401
    except ImportError:
        out.append("selenium (pip install -e '.[test]')")
    return out


@contextmanager
def static_site(folder: Path = DIST) -> Iterator[str]:
    """`folder` served over HTTP on a free loopback port (any static server would do); yields its
    URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = http.server.ThreadingHTTPServer(
        ("127.0.0.1", 0), functools.partial(Quiet, directory=str(folder))
    )
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()


@contextmanager
def chromium() -> Iterator[Any]:
    """Headless Chromium through chromedriver, without the background calls this closed network
    refuses."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in (
        "--headless=new",
        "--no-sandbox",
        "--disable-dev-shm-usage",
        "--window-size=1280,900",
        "--disable-gpu",
        "--no-first-run",
        "--disable-background-networking",
        "--disable-component-update",
        "--disable-sync",
    ):
        options.add_argument(flag)
    driver = webdriver.Chrome(service=Service(executable_path=CHROMEDRIVER), options=options)
    try:
        yield driver
    finally:
        driver.quit()


class ChatPage:
    """The page as a person uses it: by its labels and what it shows, never by its code."""

    def __init__(self, driver: Any, site: str, prefix: str) -> None:
        from selenium.webdriver.support.ui import WebDriverWait

        self.driver, self.site, self.prefix = driver, site, prefix
        self.wait = WebDriverWait(driver, WAIT_S)

    def open(self, api_url: str, thread_id: str | None = None) -> None:
        query = {
            "apiUrl": api_url,
            "assistantId": "chat",
            **({"threadId": thread_id} if thread_id else {}),
        }
        self.driver.get(f"{self.site}/?{urlencode(query)}")
        self.wait.until(lambda d: d.find_elements("css selector", "textarea[aria-label='Message']"))

    def connect(self, api_url: str, api_key: str) -> None:
        """Fill the connection form (server, API key) and press Connect, as a person pastes their
        key."""
        for name, value in (("apiUrl", api_url), ("apiKey", api_key)):
            box = self.driver.find_element("css selector", f"form.connect input[name='{name}']")
            box.clear()
            box.send_keys(value)
        self.driver.find_element(
            "xpath", "//form[@class='connect']//button[normalize-space()='Connect']"
        ).click()

    def ask(self, text: str) -> None:
        from selenium.webdriver.common.keys import Keys
        from selenium.webdriver.support import expected_conditions as ec

        box = self.wait.until(
            ec.element_to_be_clickable(("css selector", "textarea[aria-label='Message']"))
        )
        box.send_keys(text)
        box.send_keys(Keys.ENTER)

    def texts(self, selector: str) -> list[str]:
        return [e.text.strip() for e in self.driver.find_elements("css selector", selector)]

    def replies(self) -> list[str]:
        return self.texts(".bubble.ai .text")

    def run_lines(self) -> list[str]:
        """Each reply's run line (status · confidence · votes · mode [· review], then "run as:
        ...")."""
        return self.texts(".bubble.ai .meta")

    def said(self) -> list[str]:
        return self.texts(".bubble.human .text")

    def wait_for_reply(self, n: int, want: str | None = None) -> str:
        """The text of the n-th reply (1-based) once it is there, settled (its run line shown) and,
        when `want` is given, equal to it."""

        def settled(_: Any) -> bool:
            replies, lines = self.replies(), self.run_lines()
            return (
                len(replies) >= n and len(lines) >= n and (want is None or replies[n - 1] == want)
            )

        self.wait.until(settled)
        return self.replies()[n - 1]

    def review(self) -> Any:
        return self.wait.until(
            lambda d: d.find_elements("css selector", "section[aria-label='Review']")
        )[0]

    def button(self, label: str) -> Any:
        from selenium.webdriver.support import expected_conditions as ec

        return self.wait.until(
            ec.element_to_be_clickable(("xpath", f"//button[normalize-space()='{label}']"))
        )

    def thread_id(self) -> str:
        found = parse_qs(urlparse(self.driver.current_url).query).get("threadId")
        assert found, f"no thread in the page's URL: {self.driver.current_url}"
        return found[0]

    def thread_titles(self) -> list[str]:
        return [line.split("\n")[0] for line in self.texts("nav.threads .thread")]

    def text(self) -> str:
        return str(self.driver.find_element("tag name", "body").text)

    def shot(self, name: str) -> Path:
        SHOTS.mkdir(exist_ok=True)
        path = SHOTS / f"{self.prefix}-{name}.png"
        self.driver.save_screenshot(str(path))
        return path


@contextmanager
def chat_page(request: Any, site: str, prefix: str) -> Iterator[ChatPage]:
    """A fresh browser on the page for one test; on the test's failure, a screenshot and the page's
    text."""
    with chromium() as driver:
        page = ChatPage(driver, site, prefix)
        try:
            yield page
        finally:
            report = getattr(request.node, "rep_call", None)
            if report is not None and report.failed:
                page.shot("failed")
                print("page text at the failure:\n" + page.text())


def ask_then_meet_a_review_and_approve_it(page: ChatPage) -> str:
    """A sure question answered, then one the branches cannot settle: its review card met and
    approved. The model is testkit/review_model.py's; returns the answer under review (what was
    approved)."""
    from testkit.review_model import SURE

    page.ask("What is 2 + 2?")
    assert page.wait_for_reply(1, SURE) == SURE
    assert page.run_lines()[0].startswith("ok · 1.00 · 4×"), page.run_lines()
    page.shot("1-answer")

    page.ask("How many moons does Jupiter have? I am unsure.")
    card = page.review()
    unsure = card.find_element(
        "css selector", "textarea[aria-label='Answer under review']"
    ).get_attribute("value")
    assert unsure in {"42", "41", "40"}  # the split vote's answer, ready to be edited
    assert "not sure of this answer" in card.text and "Reject" in card.text
    assert page.wait_for_reply(2, unsure) == unsure
    assert page.run_lines()[1].startswith("needs_review · "), page.run_lines()
    assert {"42×", "41×", "40×"} <= {
        part[:3] for part in page.run_lines()[1].split()
    }  # the votes, each counted
    message_box = page.driver.find_element("css selector", "textarea[aria-label='Message']")
    assert (
        not message_box.is_enabled()
        and message_box.get_attribute("placeholder") == "Answer the review first"
    )
    page.shot("2-review-request")

    page.button("Approve").click()
    page.wait.until(
        lambda d: (
            not d.find_elements("css selector", "section[aria-label='Review']")
            and "review: accepted" in (page.run_lines() or [""])[-1]
        )
    )
    assert page.replies() == [SURE, unsure]
    page.shot("3-approved")
    return unsure


def hold_five_turns(page: ChatPage) -> list[str]:
    """testkit/conversation_model.py's five turns, each follow-up pointing back; every reply right,
    and each follow-up's run line shows the standalone task it was run as. Returns the run lines."""
    from testkit.conversation_model import FIVE_TURNS, UNKNOWN

    for n, (said, want) in enumerate(FIVE_TURNS, 1):
        page.ask(said)
        assert page.wait_for_reply(n, want) == want, page.replies()
        page.shot(f"conversation-{n}")
    assert page.said() == [said for said, _ in FIVE_TURNS]
    assert page.replies() == [want for _, want in FIVE_TURNS] and UNKNOWN not in page.text()
    lines = page.run_lines()
    assert "run as:" not in lines[0]  # a first turn runs as it was asked
    assert [line.split("run as: ")[-1] for line in lines[1:]] == [
        "What is half of 144?",
        "What is 72 plus 8?",
        "What is 80 times 2?",
        "What is 160 minus 144?",
    ]
    return lines
