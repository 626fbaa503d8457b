"""One settings object for the process, Context for per-run overrides."""

from __future__ import annotations

import dataclasses
import os

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import graph
from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import resolved
from parallax.runtime.services import reload_settings
from parallax.state.context import Context

runner = CliRunner()


@pytest.mark.parametrize("variable, value, says", [
    ("PARALLAX_MAX_TOKENS", "lots", "valid integer"),
    ("PARALLAX_MAX_CONCURRENCY", "0", "greater than or equal to 1"),
    ("PARALLAX_RESPONSE_FORMAT", "xml", "json_object_schema"),
])
def test_a_bad_variable_is_one_line_exit_2_naming_it(monkeypatch, tmp_path, variable, value, says):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["run", "What is 2 + 2?"])
    assert result.exit_code == 2 and f"{variable}={value!r}" in result.output and says in result.output
    assert len(result.output.strip().splitlines()) == 1 and not home.exists()


def test_settings_are_read_once_and_again_only_on_reload(monkeypatch):
    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "100")  # the tests' monkeypatch reloads (tests/conftest.py)
    assert settings_mod.load().max_tokens == 100 and settings_mod.load() is settings_mod.load()
    os.environ["PARALLAX_MAX_TOKENS"] = "200"  # a change nobody announces is not seen mid-run...
    assert settings_mod.load().max_tokens == 100
    reload_settings()  # ...until the process reloads, as every entry point does when it starts
    assert settings_mod.load().max_tokens == 200


def test_each_cli_command_reads_the_environment_as_it_is_when_it_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "first"))
    assert runner.invoke(app, ["stats", "--json"]).exit_code == 0
    os.environ["PARALLAX_HOME"] = str(tmp_path / "second")  # no reload: the next command reads it itself
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 0 and settings_mod.load().home == tmp_path / "second"
    os.environ["PARALLAX_MAX_TOKENS"] = "lots"
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 2 and "PARALLAX_MAX_TOKENS='lots'" in result.output


def test_a_dot_env_in_the_working_folder_is_read_and_the_environment_wins(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PARALLAX_MAX_TOKENS", raising=False)
    monkeypatch.setenv("PARALLAX_TEMPERATURE", "0.9")
    (tmp_path / ".env").write_text("PARALLAX_MAX_TOKENS=77\nPARALLAX_TEMPERATURE=0.1\n"
                                   "OPENAI_BASE_URL=http://dotenv.example/v1\nUNRELATED=1\n")
    monkeypatch.chdir(tmp_path)
    settings = settings_mod.load()
    assert (settings.max_tokens, settings.temperature, settings.base_url) == (77, 0.9, "http://dotenv.example/v1")
    assert resolved(Context()).max_tokens == 77  # runs take it through their Context
    assert "PARALLAX_MAX_TOKENS" not in os.environ  # Parallax's settings are not exported


def test_a_bad_value_in_dot_env_is_one_line_exit_2_naming_it(monkeypatch, tmp_path):
    monkeypatch.delenv("PARALLAX_MAX_CONCURRENCY", raising=False)
    (tmp_path / ".env").write_text("PARALLAX_MAX_CONCURRENCY=0\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 2 and "PARALLAX_MAX_CONCURRENCY='0'" in result.output and ".env" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_langsmith_variables_in_dot_env_reach_langsmith_without_overriding_the_environment(monkeypatch, tmp_path):
    for name in ("LANGSMITH_API_KEY", "LANGSMITH_PROJECT"):
        monkeypatch.setenv(name, "placeholder")  # so that undo restores both as they were before the test
    monkeypatch.delenv("LANGSMITH_API_KEY")
    monkeypatch.setenv("LANGSMITH_PROJECT", "from-environment")
    monkeypatch.delenv("PARALLAX_MAX_TOKENS", raising=False)
    (tmp_path / ".env").write_text("LANGSMITH_API_KEY=lsv2-from-dotenv\nLANGSMITH_PROJECT=from-dotenv\n"
                                   "PARALLAX_MAX_TOKENS=12\n")
    settings_mod.export_langsmith_dotenv(tmp_path / ".env")
    assert os.environ["LANGSMITH_API_KEY"] == "lsv2-from-dotenv"  # what langsmith reads
    assert os.environ["LANGSMITH_PROJECT"] == "from-environment"
    assert "PARALLAX_MAX_TOKENS" not in os.environ  # only LangSmith's own variables are exported
