"""`parallax playbook ...` on the SQLite store under PARALLAX_HOME: JSON shapes, one-line exit-2
errors."""

from __future__ import annotations

import asyncio
import json

import pytest
from langgraph.store.sqlite.aio import AsyncSqliteStore
from typer.testing import CliRunner

from parallax.cli.playbook import playbook_app
from parallax.runtime import settings
from parallax.runtime.storage.playbook_store import PlaybookStore
from parallax.state.playbook import Operation

runner = CliRunner()


def seed(versions: int = 3, gate_key: str = "val_accuracy_after") -> None:
    """Versions 1..N in the CLI's store, each adding one lesson; v2 archives v1's lesson."""

    async def main():
        home = settings.load().home
        home.mkdir(parents=True, exist_ok=True)
        async with AsyncSqliteStore.from_conn_string(str(home / "store.sqlite")) as store:
            await store.setup()
            ps = PlaybookStore(store)
            for n in range(versions):
                ops = [Operation(op="add", text=f"lesson {n}")]
                if n == 1:
                    ops.append(
                        Operation(op="archive", item_id=(await ps.head("default")).items[0].id)
                    )
                gate = {gate_key: 0.3 + n / 10} if n != 1 else {}
                await ps.commit("default", n, ops, f"learn-{n}", gate)

    asyncio.run(main())


def invoke(*args: str):
    return runner.invoke(playbook_app, list(args))


def test_history_json_shape():
    seed()
    result = invoke("history", "--json")
    assert result.exit_code == 0, result.output
    rows = json.loads(result.output)
    assert [(r["version"], r["parent"], r["items"], r["accepted"]) for r in rows] == [
        (1, 0, 1, True),
        (2, 1, 1, True),
        (3, 2, 2, True),
    ]
    assert rows[0]["created_by"] == "learn-0" and rows[2]["gate"] == {"val_accuracy_after": 0.5}
    assert all(r["created_at"] for r in rows)


def test_show_and_diff():
    seed()
    shown = json.loads(invoke("show", "--json").output)
    assert shown["version"] == 3 and [
        i["text"] for i in shown["items"] if i["status"] == "active"
    ] == ["lesson 1", "lesson 2"]
    result = invoke("diff", "1", "3", "--json")
    assert result.exit_code == 0, result.output
    d = json.loads(result.output)
    assert [i["text"] for i in d["added"]] == ["lesson 1", "lesson 2"]
    assert [i["text"] for i in d["archived"]] == ["lesson 0"] and d["changed"] == []
    text = invoke("diff", "1", "3")
    assert "2 added, 0 changed, 1 archived" in text.output and "lesson 2" in text.output


def test_rollback_then_history():
    seed()
    result = invoke("rollback", "1", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["version"] == 4
    shown = json.loads(invoke("show", "--json").output)
    assert (shown["version"], shown["note"], [i["text"] for i in shown["items"]]) == (
        4,
        "rollback to v1",
        ["lesson 0"],
    )
    assert [r["version"] for r in json.loads(invoke("history", "--json").output)] == [1, 2, 3, 4]


@pytest.mark.parametrize(
    "args, message",
    [
        (
            ["rollback", "7"],
            (
                "playbook 'default' has no version 7 (latest is 3): see `parallax playbook history"
                " --playbook default`"
            ),
        ),
        (["diff", "1", "9"], "has no version 9 (latest is 3)"),
        (["show", "--version", "4"], "has no version 4"),
        (["history", "--playbook", "typo"], "unknown playbook 'typo' (known: default)"),
        (["export", "--format", "yaml", "--output", "out.yaml"], "unknown format 'yaml'"),
        (["export", "--version", "8", "--output", "out.json"], "has no version 8"),
        (["plot", "--output", "out.jpg"], "--output must end in .png"),
        (["import", "missing.json"], "file not found"),
    ],
)
def test_bad_input_is_one_line_exit_2_and_writes_nothing(args, message, tmp_path, monkeypatch):
    seed()
    monkeypatch.chdir(tmp_path)
    before = sorted(p.name for p in tmp_path.iterdir())
    result = invoke(*args)
    assert result.exit_code == 2
    assert message in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == before
    assert len(json.loads(invoke("history", "--json").output)) == 3


def test_read_commands_on_a_fresh_home_create_nothing():
    home = settings.load().home
    assert json.loads(invoke("history", "--json").output) == []
    assert invoke("show", "--version", "1").exit_code == 2
    assert not home.exists()


@pytest.mark.parametrize("fmt", ["json", "markdown"])
def test_export_writes_a_file_and_import_reads_it_back(fmt, tmp_path):
    seed()
    (tmp_path / "out").mkdir()
    out = tmp_path / "out" / f"pb.{fmt}"
    result = invoke("export", "--format", fmt, "--output", str(out))
    assert result.exit_code == 0, result.output
    assert [p.name for p in out.parent.iterdir()] == [out.name]  # no temp file left behind
    if fmt == "json":
        assert json.loads(out.read_text())["version"] == 3
    else:
        assert out.read_text().startswith("# Playbook `default`, version 3")
    result = invoke("import", str(out), "--playbook", "copy", "--json")
    assert result.exit_code == 0, result.output
    assert json.loads(result.output)["version"] == 1
    original, copy = (
        json.loads(invoke("show", "--json", "--playbook", p).output) for p in ("default", "copy")
    )
    assert copy["items"] == original["items"]


def test_candidates_lists_rejections():
    seed(1)

    async def reject():
        async with AsyncSqliteStore.from_conn_string(
            str(settings.load().home / "store.sqlite")
        ) as store:
            await PlaybookStore(store).reject(
                "default", 1, [Operation(op="add", text="bad")], "learn-9", {}, "val fell"
            )

    asyncio.run(reject())
    rows = json.loads(invoke("candidates", "--json").output)
    assert [(r["reason"], r["accepted"], r["parent"]) for r in rows] == [("val fell", False, 1)]
    assert len(json.loads(invoke("history", "--json").output)) == 1
    assert len(json.loads(invoke("history", "--json", "--candidates").output)) == 2


def test_plot_writes_a_png(tmp_path):
    seed(4)
    out = tmp_path / "plot.png"
    result = invoke("plot", "--output", str(out), "--json")
    assert result.exit_code == 0, result.output
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert json.loads(result.output) == {
        "playbook": "default",
        "output": str(out),
        "versions": 4,
        "with_accuracy": 3,
    }


def test_plot_without_versions_fails(tmp_path):
    out = tmp_path / "plot.png"
    result = invoke("plot", "--output", str(out))
    assert result.exit_code == 2 and "no versions to plot" in result.output and not out.exists()
