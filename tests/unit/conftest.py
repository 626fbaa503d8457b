"""Unit tests never reach a real model: a test that forgets to pass its scripted Context
(`tests/support/scripted_model.py`) fails fast against a closed port instead of quietly
starting the embedded model server."""

import pytest


@pytest.fixture(autouse=True)
def _no_real_model(monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://127.0.0.1:9/v1")
