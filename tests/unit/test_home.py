"""Where data lives: PARALLAX_HOME, else an existing ./.parallax (with a one-line notice), else the
user data directory; and every "not found" names the store it searched."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime import settings as settings_mod
from testkit.scripted_model import scripted

runner = CliRunner()


@pytest.fixture
def no_home(tmp_path, monkeypatch):
    """PARALLAX_HOME unset, the user data directory under tmp_path, the working folder empty."""
    monkeypatch.delenv("PARALLAX_HOME", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    work = tmp_path / "work"
    work.mkdir()
    monkeypatch.chdir(work)
    # monkeypatch reloads the settings: the default depends on the folder and XDG_DATA_HOME
    yield work


def test_default_home_is_the_user_data_directory(no_home, tmp_path):
    assert settings_mod.load().home == tmp_path / "xdg" / "parallax"
    result = runner.invoke(app, ["playbook", "show"])
    assert result.exit_code == 0 and "note:" not in result.output
    assert not (no_home / ".parallax").exists()


def test_an_existing_dot_parallax_keeps_working_with_one_notice(no_home, tmp_path):
    (no_home / ".parallax").mkdir()
    assert settings_mod.load().home.resolve() == (no_home / ".parallax").resolve()
    result = runner.invoke(
        app, ["stats", "--json"], env={"COLUMNS": "400"}
    )  # one line where it fits
    assert result.exit_code == 0, result.output
    assert result.stderr.count("note: using ./.parallax") == 1
    assert str(tmp_path / "xdg" / "parallax") in result.stderr and "PARALLAX_HOME" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
    json.loads(result.stdout)  # stdout stays machine-readable


def test_parallax_home_wins_over_dot_parallax_and_says_nothing(no_home, tmp_path, monkeypatch):
    (no_home / ".parallax").mkdir()
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "chosen"))
    assert settings_mod.load().home == tmp_path / "chosen"
    result = runner.invoke(app, ["stats", "--json"])
    assert result.exit_code == 0 and result.stderr == ""


@pytest.fixture
def recorded_home(tmp_path, monkeypatch):
    """A home with one recorded run (so the store exists)."""
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    model_ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "22"}))
    result = runner.invoke(
        app, ["run", "17 sheep plus 5 sheep: how many?", "--votes", "1", "--json"], obj=model_ctx
    )
    assert result.exit_code == 0, result.output
    return home


@pytest.mark.parametrize(
    "args",
    [
        ["trace", "no-such-trace"],
        ["dlq", "show", "no-such-branch"],
        ["playbook", "show", "--playbook", "no-such-playbook"],
        ["playbook", "show", "--version", "9"],
        ["prompts", "show", "answer", "--version", "9"],
        ["feedback", "no-such-trace", "--score", "up"],
        ["plan", "show", "no-such-trace"],
    ],
    ids=lambda a: " ".join(a[:2]),
)
def test_not_found_names_the_store_it_searched(recorded_home, args):
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert f"searched {recorded_home / 'store.sqlite'}" in result.output
    assert len(result.output.strip().splitlines()) == 1


def test_resume_of_an_unknown_thread_names_the_checkpoints(recorded_home):
    result = runner.invoke(app, ["resume", "no-such-thread"])
    assert (
        result.exit_code == 2
        and f"searched {recorded_home / 'checkpoints.sqlite'}" in result.output
    )


@pytest.mark.parametrize(
    "args",
    [["trace", "abc"], ["dlq", "list"], ["feedback", "abc", "--score", "up"], ["resume", "abc"]],
    ids=" ".join,
)
def test_a_home_without_runs_says_where_it_looked(args, tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "empty"))
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert str(tmp_path / "empty") in result.output and len(result.output.strip().splitlines()) == 1
