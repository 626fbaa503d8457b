"""One settings object for the process, Context for per-run overrides."""

from __future__ import annotations

import dataclasses

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import graph
from parallax.runtime import settings as settings_mod
from parallax.runtime.run_context import resolved
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


def test_settings_are_reread_when_a_variable_changes(monkeypatch):
    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "100")
    assert settings_mod.load().max_tokens == 100 and settings_mod.load() is settings_mod.load()
    monkeypatch.setenv("PARALLAX_MAX_TOKENS", "200")
    assert settings_mod.load().max_tokens == 200


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
