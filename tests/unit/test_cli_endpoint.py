"""`--model` and `--base-url` reach the model call, for that command only; `--version` prints the
package's version."""

from __future__ import annotations

import json
import os
from importlib.metadata import version

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime.chat_models import forget_clients
from testkit.fault_server import FaultConfig, FaultServer

runner = CliRunner()
MODEL_COMMANDS = (
    ["run"],
    ["resume"],
    ["learn"],
    ["eval"],
    ["dlq", "retry"],
    ["prompts", "set"],
    ["serve"],
)
"""Every command that calls a model (serve: the replica's runs do)."""


@pytest.fixture
def server():
    server = FaultServer(FaultConfig())
    server.start()
    forget_clients()
    try:
        yield server
    finally:
        server.stop()
        forget_clients()


def chat_models(server) -> set[str]:
    return {entry["model"] for entry in server.log() if entry["path"].endswith("/chat/completions")}


def test_version_prints_the_installed_version():
    result = runner.invoke(app, ["--version"])
    assert result.exit_code == 0
    assert result.output == f"parallax {version('parallax-graph')}\n"


def test_flags_point_the_run_at_another_endpoint_and_model(server, monkeypatch):
    monkeypatch.setenv(
        "PARALLAX_MODEL", "model-from-env"
    )  # OPENAI_BASE_URL is a closed port (tests/unit/conftest.py)
    closed_port = os.environ["OPENAI_BASE_URL"]
    result = runner.invoke(
        app,
        [
            "run",
            "Write a haiku about caching.",
            "--mode",
            "direct",
            "--json",
            "--base-url",
            server.url,
            "--model",
            "model-from-flag",
        ],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["status"] == "ok"
    assert chat_models(server) == {"model-from-flag"}
    # for that run only: the environment is as it was
    assert (
        os.environ["OPENAI_BASE_URL"] == closed_port
        and os.environ["PARALLAX_MODEL"] == "model-from-env"
    )


def test_without_flags_the_environment_chooses(server, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", server.url)
    monkeypatch.setenv("PARALLAX_MODEL", "model-from-env")
    result = runner.invoke(
        app, ["run", "Write a haiku about caching.", "--mode", "direct", "--json"]
    )
    assert result.exit_code == 0, result.output
    assert chat_models(server) == {"model-from-env"}


@pytest.mark.parametrize("url", ["localhost:8000/v1", "ftp://example.com/v1"])
def test_a_base_url_without_http_is_refused_in_one_line(url):
    result = runner.invoke(app, ["run", "hi", "--base-url", url])
    assert result.exit_code == 2
    assert "--base-url" in result.output and len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize("command", MODEL_COMMANDS, ids=" ".join)
def test_every_command_that_calls_a_model_takes_both_flags(command):
    help_text = runner.invoke(app, [*command, "--help"], env={"COLUMNS": "200"}).output
    assert "--model" in help_text and "--base-url" in help_text
