"""The `ttl` configuration `parallax serve` gives Aegra and the store (runtime/ttl_config.py,
docs/retention.md)."""

from __future__ import annotations

import json

import pytest

from parallax.runtime import settings as settings_mod
from parallax.runtime.ttl_config import NEVER_MIN, store_ttl, thread_ttl_env


@pytest.fixture
def settings(monkeypatch):
    for name in settings_mod.VARIABLES:
        monkeypatch.delenv(name, raising=False)
    return settings_mod.Settings(_env_file=None)


def test_serve_turns_aegras_thread_ttl_on_with_a_sweep_and_no_default_expiry(settings):
    on = json.loads(thread_ttl_env(settings, {"graphs": {}}, {}))
    assert on == {"strategy": "delete", "default_ttl": NEVER_MIN, "sweep_interval_minutes": 1.0}
    shorter = settings.model_copy(
        update={"thread_ttl_sweep_s": 6.0, "thread_default_ttl_min": 1440.0}
    )
    assert json.loads(thread_ttl_env(shorter, {}, {})) == {
        "strategy": "delete",
        "default_ttl": 1440.0,
        "sweep_interval_minutes": 0.1,
    }


def test_an_operators_own_aegra_thread_ttl_is_left_as_it_is(settings):
    assert thread_ttl_env(settings, {"checkpointer": {"ttl": {"default_ttl": 60}}}, {}) is None
    assert thread_ttl_env(settings, {}, {"AEGRA_THREAD_TTL": "60"}) is None
    assert thread_ttl_env(settings, {}, {"LANGGRAPH_THREAD_TTL": "60"}) is None
    assert thread_ttl_env(settings, {}, {"AEGRA_THREAD_TTL": " "}) is not None  # blank: not set


def test_store_ttl_is_aegra_json_over_the_settings(settings):
    assert store_ttl(settings, None).model_dump() == {
        "default_ttl": None,
        "refresh_on_read": True,
        "sweep_interval_minutes": 1.0,
    }
    mine = settings.model_copy(update={"store_default_ttl_min": 30, "store_refresh_on_read": False})
    assert store_ttl(mine, {"default_ttl": 5}).model_dump() == {
        "default_ttl": 5,
        "refresh_on_read": False,
        "sweep_interval_minutes": 1.0,
    }


@pytest.mark.parametrize(
    ("block", "says"),
    [
        ({"default_ttl": 0}, "store.ttl.default_ttl: Input should be greater than or equal to 1"),
        ({"default_ttl": 1.5}, "store.ttl.default_ttl"),
        ({"sweep_interval": 1}, "store.ttl.sweep_interval: Extra inputs are not permitted"),
        ([1], "store.ttl must be an object, not list"),
    ],
)
def test_a_bad_store_ttl_is_one_line_naming_the_key(settings, block, says):
    with pytest.raises(ValueError, match=None) as caught:
        store_ttl(settings, block)
    assert says in str(caught.value) and "\n" not in str(caught.value)


def test_serve_refuses_a_bad_store_ttl_in_one_line_and_sets_aegras_thread_ttl(
    settings, tmp_path, monkeypatch, capsys
):
    import typer

    from parallax.cli.serve import configure_ttl

    for name in ("AEGRA_THREAD_TTL", "LANGGRAPH_THREAD_TTL"):
        monkeypatch.setenv(name, "")  # so the one configure_ttl sets is gone after the test
        monkeypatch.delenv(name)
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps({"store": {"ttl": {"default_ttl": 0.5}}}))
    with pytest.raises(typer.Exit) as caught:
        configure_ttl(settings, bad)
    assert caught.value.exit_code == 2
    said = " ".join(capsys.readouterr().err.split())
    assert "store.ttl.default_ttl" in said and "retention.md" in said
    good = tmp_path / "good.json"
    good.write_text(json.dumps({"store": {"ttl": {"default_ttl": 60}}}))
    configure_ttl(settings, good)
    import os

    assert json.loads(os.environ["AEGRA_THREAD_TTL"])["default_ttl"] == NEVER_MIN
