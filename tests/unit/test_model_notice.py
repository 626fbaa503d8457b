"""On the embedded default model a run ends with one dim line on stderr saying so; a setting hides
it, and it is never printed when an endpoint answered."""

from __future__ import annotations

import json
import os

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime import model_server
from parallax.runtime import settings as settings_mod
from parallax.runtime.chat_models import forget_clients
from testkit.fault_server import FaultConfig, FaultServer

runner = CliRunner()
ARGS = ["run", "Write a haiku about caching.", "--mode", "direct", "--json"]


@pytest.fixture
def advertised(monkeypatch):
    """No endpoint configured; a stand-in for the embedded server advertised where `parallax model
    serve` would advertise it (PARALLAX_HOME/model-server.json), so the run takes the embedded path
    without loading a model.
    """
    monkeypatch.delenv("OPENAI_BASE_URL")
    monkeypatch.delenv("PARALLAX_GGUF", raising=False)
    server = FaultServer(FaultConfig())
    server.start()
    path = settings_mod.load().model_server_file
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"url": server.url, "pid": os.getpid(), "parallel": 5}))
    model_server.shutdown()
    forget_clients()
    try:
        yield server
    finally:
        model_server.shutdown()  # forget the URL this process settled on
        forget_clients()
        server.stop()


def test_a_run_on_the_embedded_model_says_so_once(advertised):
    result = runner.invoke(app, ARGS)
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"  # stdout stays one JSON object
    assert result.stderr.count("SmolLM2-135M") == 1 and len(result.stderr.strip().splitlines()) == 1
    assert (
        "often wrong" in result.stderr and "--base-url URL --model NAME" in result.stderr
    )  # a real endpoint needs both
    assert len(result.stderr.rstrip("\n")) <= 80  # one line on an 80-column terminal
    assert any(
        entry["path"].endswith("/chat/completions") for entry in advertised.log()
    )  # it answered


def test_the_setting_hides_it(advertised, monkeypatch):
    monkeypatch.setenv("PARALLAX_QUIET_MODEL_NOTICE", "1")
    result = runner.invoke(app, ARGS)
    assert result.exit_code == 0 and result.stderr == ""


def test_an_endpoint_gets_no_notice(advertised):
    result = runner.invoke(app, [*ARGS, "--base-url", advertised.url])
    assert result.exit_code == 0 and result.stderr == ""


def test_the_python_api_result_carries_the_note_on_the_embedded_model_only(advertised):
    import parallax
    from parallax.runtime.model_note import EMBEDDED_NOTE

    toy = parallax.solve("Write a haiku about caching.", mode="direct")
    assert toy.status == "ok" and toy.note == EMBEDDED_NOTE and "OPENAI_BASE_URL" in toy.note
    os.environ["OPENAI_BASE_URL"] = (
        advertised.url
    )  # restored by monkeypatch's delenv at the end of the test
    try:
        real = parallax.solve("Write a haiku about caching.", mode="direct")
    finally:
        del os.environ["OPENAI_BASE_URL"]
    assert real.status == "ok" and real.note == ""


def test_serve_says_at_start_what_its_runs_answer_with(advertised, monkeypatch):
    from parallax.cli.serve import model_line

    said = model_line()
    assert said.startswith(
        "model: no OPENAI_BASE_URL, so runs use the embedded smollm2-135m-instruct: "
    )
    assert "tiny test model that is often wrong" in said and "set OPENAI_BASE_URL" in said
    monkeypatch.setenv("OPENAI_BASE_URL", "http://10.1.2.3:8000/v1")
    monkeypatch.setenv("PARALLAX_MODEL", "qwen2.5:7b")
    assert model_line() == "model: qwen2.5:7b at http://10.1.2.3:8000/v1"


async def test_the_chat_reply_says_so_in_its_metadata(advertised):
    """Studio's chat mode and Agent Chat UI show the reply's metadata: the note travels with the
    turn."""
    from parallax.graphs.chat import graph
    from parallax.runtime.model_note import EMBEDDED_NOTE

    out = await graph.ainvoke(
        {
            "messages": [{"type": "human", "content": "Write a haiku about caching."}],
            "mode": "direct",
        }
    )
    assert out["messages"][-1].response_metadata["parallax"]["note"] == EMBEDDED_NOTE
    assert out["last_run"]["note"] == EMBEDDED_NOTE
