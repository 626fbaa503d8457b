"""Both servers mount the one OpenAI face at /v1, and what it refuses never reaches the graph API
(offline)."""

from __future__ import annotations

import json
from pathlib import Path

from starlette.routing import Mount
from starlette.testclient import TestClient

from parallax.server import dev_app, openai_face, timeline_face

ROOT = Path(__file__).resolve().parents[2]


def test_parallax_serve_and_langgraph_dev_mount_the_same_face():
    aegra, langgraph = (
        json.loads((ROOT / name).read_text())
        for name in ("parallax/server/aegra.json", "langgraph.json")
    )
    assert aegra["http"]["app"] == "parallax.server.app:app"
    assert langgraph["http"]["app"] == "./parallax/server/dev_app.py:app"
    assert (
        'app.mount("/v1", openai_face.app)' in (ROOT / "parallax/server/app.py").read_text()
    )  # needs Aegra to import
    assert (
        'app.mount("/timeline", timeline_face.app)' in (ROOT / "parallax/server/app.py").read_text()
    )
    mounts = [r for r in dev_app.app.routes if isinstance(r, Mount)]
    assert [(m.path, m.app) for m in mounts] == [
        ("/v1", openai_face.app),
        ("/timeline", timeline_face.app),
    ]


def test_refusals_are_openai_error_json_before_any_thread_exists(monkeypatch):
    def no_loopback(request):  # a refused request must not talk to the graph API at all
        raise AssertionError("the graph API was called for a refused request")

    monkeypatch.setattr(openai_face, "loopback", no_loopback)
    client = TestClient(dev_app.app)
    ask = [{"role": "user", "content": "What is 6 * 7?"}]
    cases = [
        (json.dumps({"model": "parallax-vote", "messages": ask, "n": 2}), 400, "n"),
        (json.dumps({"model": "nope", "messages": ask}), 404, "model"),
        ("{broken", 400, None),
        ("", 400, None),
    ]
    for body, status, param in cases:
        answer = client.post(
            "/v1/chat/completions", content=body, headers={"content-type": "application/json"}
        )
        assert answer.status_code == status, answer.text
        assert (
            answer.json()["error"]["param"] == param
            and answer.json()["error"]["type"] == "invalid_request_error"
        )

    # the key check the model routes make through the graph API: every key passes here
    class Assistants:
        async def search(self, **kwargs):
            return []

    for method, path, status in (
        ("POST", "/v1/completions", 404),
        ("POST", "/v1/embeddings", 404),
        ("POST", "/v1/responses", 404),
        ("GET", "/v1/nothing/here", 404),
        ("GET", "/v1/chat/completions", 405),
    ):
        answer = client.request(method, path, json={"model": "parallax-vote"})
        assert (
            answer.status_code == status and answer.headers["content-type"] == "application/json"
        ), answer.text
        error = answer.json()["error"]
        assert (
            set(error) == {"message", "type", "param", "code"}
            and "/v1/chat/completions" in error["message"]
        )
    assert "does not serve embeddings" in client.post("/v1/embeddings").json()["error"]["message"]

    monkeypatch.setattr(
        openai_face, "loopback", lambda request: type("Client", (), {"assistants": Assistants()})()
    )
    assert client.get("/v1/models/parallax-plan").json()["id"] == "parallax-plan"
    missing = client.get("/v1/models/gpt-4o")
    assert missing.status_code == 404 and missing.json()["error"]["code"] == "model_not_found"
