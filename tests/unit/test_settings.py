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
from parallax.runtime.settings import reload_settings
from parallax.state.context import Context

runner = CliRunner()


@pytest.mark.parametrize(
    "variable, value, says",
    [
        ("PARALLAX_MAX_TOKENS", "lots", "valid integer"),
        ("PARALLAX_MAX_CONCURRENCY", "0", "greater than or equal to 1"),
        ("PARALLAX_RESPONSE_FORMAT", "xml", "json_object_schema"),
    ],
)
def test_a_bad_variable_is_one_line_exit_2_naming_it(monkeypatch, tmp_path, variable, value, says):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    monkeypatch.setenv(variable, value)
    result = runner.invoke(app, ["run", "What is 2 + 2?"])
    assert (
        result.exit_code == 2 and f"{variable}={value!r}" in result.output and says in result.output
    )
    assert len(result.output.strip().splitlines()) == 1 and not home.exists()


def test_settings_are_read_once_and_again_only_on_reload(monkeypatch):
    monkeypatch.setenv(
        "PARALLAX_MAX_TOKENS", "100"
    )  # the tests' monkeypatch reloads (tests/conftest.py)
    assert settings_mod.load().max_tokens == 100 and settings_mod.load() is settings_mod.load()
    os.environ["PARALLAX_MAX_TOKENS"] = "200"  # a change nobody announces is not seen mid-run...
    assert settings_mod.load().max_tokens == 100
    reload_settings()  # ...until the process reloads, as every entry point does when it starts
    assert settings_mod.load().max_tokens == 200


def test_each_cli_command_reads_the_environment_as_it_is_when_it_starts(monkeypatch, tmp_path):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "first"))
    monkeypatch.setenv(
        "PARALLAX_MAX_TOKENS", "384"
    )  # undo restores both after the plain writes below
    assert runner.invoke(app, ["stats", "--json"]).exit_code == 0
    os.environ["PARALLAX_HOME"] = str(
        tmp_path / "second"
    )  # no reload: the next command reads it itself
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 0 and settings_mod.load().home == tmp_path / "second"
    os.environ["PARALLAX_MAX_TOKENS"] = "lots"
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 2 and "PARALLAX_MAX_TOKENS='lots'" in result.output


def test_a_python_api_call_reads_the_environment_as_it_is_when_it_starts(monkeypatch, tmp_path):
    import json

    import parallax
    from testkit.scripted_model import scripted

    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "before"))
    assert settings_mod.load().home == tmp_path / "before"
    os.environ["PARALLAX_HOME"] = str(tmp_path / "after")  # the caller's own code, with no reload
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "2 and 2", "answer": "4"}))
    result = parallax.solve("What is 2 + 2?", mode="direct", context=ctx)
    assert result.answer == "4"
    assert (tmp_path / "after" / "checkpoints.sqlite").exists() and not (
        tmp_path / "before"
    ).exists()


def test_a_dot_env_in_the_working_folder_is_read_and_the_environment_wins(monkeypatch, tmp_path):
    monkeypatch.delenv("OPENAI_BASE_URL", raising=False)
    monkeypatch.delenv("PARALLAX_MAX_TOKENS", raising=False)
    monkeypatch.setenv("PARALLAX_TEMPERATURE", "0.9")
    (tmp_path / ".env").write_text(
        "PARALLAX_MAX_TOKENS=77\nPARALLAX_TEMPERATURE=0.1\n"
        "OPENAI_BASE_URL=http://dotenv.example/v1\nUNRELATED=1\n"
    )
    monkeypatch.chdir(tmp_path)
    settings = settings_mod.load()
    assert (settings.max_tokens, settings.temperature, settings.base_url) == (
        77,
        0.9,
        "http://dotenv.example/v1",
    )
    assert resolved(Context()).max_tokens == 77  # runs take it through their Context
    assert "PARALLAX_MAX_TOKENS" not in os.environ  # Parallax's settings are not exported


def test_a_bad_value_in_dot_env_is_one_line_exit_2_naming_it(monkeypatch, tmp_path):
    monkeypatch.delenv("PARALLAX_MAX_CONCURRENCY", raising=False)
    (tmp_path / ".env").write_text("PARALLAX_MAX_CONCURRENCY=0\n")
    monkeypatch.chdir(tmp_path)
    result = runner.invoke(app, ["stats", "--json"])
    assert (
        result.exit_code == 2
        and "PARALLAX_MAX_CONCURRENCY='0'" in result.output
        and ".env" in result.output
    )
    assert len(result.output.strip().splitlines()) == 1


def test_langsmith_and_deploy_variables_in_dot_env_reach_the_environment_without_overriding_it(
    monkeypatch, tmp_path
):
    for name in ("LANGSMITH_API_KEY", "LANGSMITH_PROJECT", "DATABASE_URL"):
        monkeypatch.setenv(
            name, "placeholder"
        )  # so that undo restores both as they were before the test
    monkeypatch.delenv("LANGSMITH_API_KEY")
    monkeypatch.delenv("DATABASE_URL")
    monkeypatch.setenv("LANGSMITH_PROJECT", "from-environment")
    monkeypatch.delenv("PARALLAX_MAX_TOKENS", raising=False)
    (tmp_path / ".env").write_text(
        "LANGSMITH_API_KEY=lsv2-from-dotenv\nLANGSMITH_PROJECT=from-dotenv\n"
        "PARALLAX_MAX_TOKENS=12\nDATABASE_URL=postgresql://db.example/parallax\n"
    )
    settings_mod.export_dotenv_for_libraries(tmp_path / ".env")
    assert os.environ["LANGSMITH_API_KEY"] == "lsv2-from-dotenv"  # what langsmith reads
    assert (
        os.environ["DATABASE_URL"] == "postgresql://db.example/parallax"
    )  # what `parallax serve` and Aegra read
    assert os.environ["LANGSMITH_PROJECT"] == "from-environment"
    assert "PARALLAX_MAX_TOKENS" not in os.environ  # Parallax's own settings are read, not exported


def test_a_run_context_overrides_settings_and_fills_only_what_it_left_unset(monkeypatch):
    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "111")
    monkeypatch.setenv("PARALLAX_TEMPERATURE", "0.7")
    ctx = resolved({"max_tokens": 5})
    assert (ctx.max_tokens, ctx.temperature, ctx.max_concurrency) == (5, 0.7, 8)
    assert resolved(ctx) is ctx  # resolving twice changes nothing


def test_every_context_field_is_described_for_studio():
    schema = graph.get_context_jsonschema()
    fields = {f.name for f in dataclasses.fields(Context)}
    assert set(schema["properties"]) == fields
    assert all(schema["properties"][name].get("description") for name in fields)


def test_each_run_setting_is_said_once():
    """A run setting is a Context field (its meaning) and a Settings field (its default and bounds)
    of one name; resolving fills exactly those, and Settings describes each with its Context field's
    words."""
    from parallax.runtime.run_context import FROM_SETTINGS

    code_only = {"chat_model", "embedder", "services"}
    run_settings = {
        f.name for f in dataclasses.fields(Context) if f.default is None and f.name not in code_only
    }
    assert run_settings <= set(settings_mod.Settings.model_fields)
    assert set(FROM_SETTINGS) | {"straggler_factor"} == run_settings
    described = {f.name: f.metadata["description"] for f in dataclasses.fields(Context)}
    for name in run_settings:
        assert settings_mod.Settings.model_fields[name].description.startswith(described[name]), (
            name
        )
    full = resolved(Context())
    assert all(getattr(full, name) is not None for name in run_settings - {"dedupe_threshold"})


def test_the_configuration_page_states_the_defaults_the_code_has(monkeypatch):
    """docs/configuration.md is the one table a user reads: each plain default there is the Settings
    default."""
    import re
    from pathlib import Path

    for name in settings_mod.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("PARALLAX_HOME", "/tmp/parallax-docs-check")
    defaults = settings_mod.Settings(_env_file=None)  # not a .env of the folder the tests run in
    page = (Path(__file__).resolve().parents[2] / "docs" / "configuration.md").read_text()
    checked = 0
    for variables, values in re.findall(r"^\| (`PARALLAX_[^|]+) \| ([^|]+) \|", page, re.M):
        names = [v.strip().strip("`") for v in variables.split(" / ")]
        shown = [v.strip() for v in values.split(" / ")]
        if len(names) != len(shown):  # a default stated in words ("`a` / `b` with an endpoint")
            continue
        for name, value in zip(names, shown, strict=True):
            plain = re.fullmatch(r"`([^`]+)`", value)
            field = name.removeprefix("PARALLAX_").lower()
            if not plain or field not in settings_mod.Settings.model_fields:
                continue
            default, text = getattr(defaults, field), plain.group(1)
            if default in (None, ""):  # unset: the page says what takes its place
                continue
            if isinstance(default, bool):
                assert text == str(default).lower(), name
            elif isinstance(default, int | float):
                assert float(text) == default, (name, text, default)
            else:
                assert text == str(default), (name, text, default)
            checked += 1
    assert checked >= 30
