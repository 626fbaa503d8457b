"""Unit tests never reach a real model: a test that forgets to pass its scripted Context
(`testkit/scripted_model.py`) fails fast against a closed port instead of quietly
starting the embedded model server."""

import pytest


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")


@pytest.fixture
def billing(monkeypatch):
    """`billing(reply, pricing)` starts a BillingServer (testkit/billing_server.py) and points every
    model call of the test at it, in OpenAI's json_schema form; `reply(body, k)` defaults to a vote
    for 42. Stopped after.
    """
    import json

    from parallax.runtime.chat_models import forget_clients
    from testkit.billing_server import BillingServer, Pricing

    running: list[BillingServer] = []

    def start(reply=None, pricing: Pricing | None = None) -> BillingServer:
        server = BillingServer(
            reply or (lambda body, k: json.dumps({"reasoning": "counted", "answer": "42"})),
            pricing or Pricing(base_ms=5, decode_ms_per_token=0.1),
        )
        monkeypatch.setenv("OPENAI_BASE_URL", server.start())
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        forget_clients()
        running.append(server)
        return server

    yield start
    for server in running:
        server.stop()
    forget_clients()
