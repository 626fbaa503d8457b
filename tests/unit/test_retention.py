"""Retention without a database: its limits come from the settings, and `parallax sweep` refuses
what it cannot do.

The sweep itself runs against PostgreSQL in tests/integration/test_platform_api.py (old rows
removed, young ones and running threads kept, on the replicas' schedule and through `parallax
sweep`).
"""

from __future__ import annotations

from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime import settings as settings_mod
from parallax.runtime.storage import retention

runner = CliRunner()


def test_limits_come_from_the_settings_and_unset_ones_keep_everything(monkeypatch):
    monkeypatch.setenv("PARALLAX_RETAIN_THREADS_DAYS", "30")
    monkeypatch.setenv("PARALLAX_RETAIN_TRACES_DAYS", "0.5")
    monkeypatch.setenv("PARALLAX_SWEEP_BATCH", "50")
    for name in (
        "PARALLAX_RETAIN_CHECKPOINTS_DAYS",
        "PARALLAX_RETAIN_DEAD_LETTERS_DAYS",
        "PARALLAX_RETAIN_WEBHOOKS_DAYS",
        "PARALLAX_RETAIN_CHARGES_DAYS",
    ):
        monkeypatch.delenv(name, raising=False)
    limits = retention.from_settings(settings_mod.load())
    assert limits == retention.Retention(
        threads_days=30,
        checkpoints_days=None,
        traces_days=0.5,
        dead_letters_days=None,
        webhooks_days=7,
        charges_days=400,
        batch=50,
    )


def test_a_limit_of_zero_or_less_is_refused_naming_the_variable(monkeypatch):
    monkeypatch.setenv("PARALLAX_RETAIN_THREADS_DAYS", "0")
    result = runner.invoke(app, ["sweep"])
    assert result.exit_code == 2 and "PARALLAX_RETAIN_THREADS_DAYS='0'" in result.output


def test_sweep_needs_the_deployments_database(monkeypatch):
    monkeypatch.delenv("DATABASE_URL", raising=False)
    monkeypatch.delenv("PARALLAX_DATABASE_URL", raising=False)
    result = runner.invoke(app, ["sweep", "--threads-days", "10"])
    assert result.exit_code == 2 and "set DATABASE_URL" in result.output
    monkeypatch.setenv("DATABASE_URL", "mysql://db/x")
    result = runner.invoke(app, ["sweep"])
    assert result.exit_code == 2 and "not a PostgreSQL URL" in result.output


def test_store_namespaces_are_matched_whole():
    clause = retention._prefixes("traces", "plan_results")
    assert (
        clause == "prefix LIKE 'traces.%%' OR prefix LIKE 'plan\\_results.%%'"
    )  # `_` is no wildcard here
