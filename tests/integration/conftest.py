"""Shared fixtures for integration tests: one real llama.cpp model server per session.

Loading SmolLM2 costs seconds, so every test that needs a model shares one
`LocalModelServer`, started lazily by the first test that asks for it.

`test_local_model.py` counts the llama.cpp servers that are direct children of the test
process (it expects exactly the ones it started), so its tests are moved to the front of
the run: they finish before the shared server exists.
"""

from __future__ import annotations

import weakref
from collections.abc import Iterator

import pytest

import parallax.runtime.chat_models
from parallax.runtime.model_server import LocalModelServer
from parallax.runtime.settings import load

MODEL_ALIAS = "smollm2-135m-instruct"


def pytest_collection_modifyitems(session, config, items):
    """Run test_local_model.py before any test that may start the shared server (stable order)."""
    items.sort(key=lambda item: 0 if item.path.name == "test_local_model.py" else 1)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    """Keep each phase's report on the item, so fixtures can tell whether the test failed."""
    report = yield
    setattr(item, f"rep_{report.when}", report)
    return report


@pytest.fixture(scope="session")
def model_server(tmp_path_factory) -> Iterator[str]:
    """URL (…/v1) of the one real model server shared by the whole session."""
    home = tmp_path_factory.mktemp("model-server-home")
    settings = load().model_copy(
        update={"home": home, "base_url": None, "model": MODEL_ALIAS, "gguf": None}
    )
    server = LocalModelServer(settings)
    server.start(timeout=180)
    try:
        yield server.url
    finally:
        server.stop()


@pytest.fixture
def real_model(model_server, monkeypatch) -> str:
    """Point this test's model calls at the shared server; nothing cached leaks to other tests."""
    monkeypatch.setenv("OPENAI_BASE_URL", model_server)
    monkeypatch.setenv(
        "PARALLAX_RESPONSE_FORMAT", "json_schema"
    )  # what the embedded server is asked by default
    monkeypatch.setenv("PARALLAX_MODEL", MODEL_ALIAS)
    for name in ("PARALLAX_GGUF", "PARALLAX_VOTE_MODELS", "PARALLAX_JUDGE_MODEL"):
        monkeypatch.delenv(name, raising=False)
    # chat_models caches its clients per event loop and endpoint for the whole process:
    # start each test without them (monkeypatch restores them afterwards), so no test's
    # client leaks into the next one.
    monkeypatch.setattr(parallax.runtime.chat_models, "_clients", weakref.WeakKeyDictionary())
    return model_server
