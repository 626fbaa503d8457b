"""Every table of the CLI, rendered at 80 and 120 columns: no id split over two lines, no word cut
mid-word (a word may only be elided with `…`), no line wider than the terminal."""

from __future__ import annotations

import io
import re
from pathlib import Path

import pytest
from rich.console import Console

from parallax.cli.loop import rounds_table
from parallax.cli.playbook import candidates_table, history_table, items_table, quarantine_table
from parallax.cli.prompts import overview_table, prompt_history_table
from parallax.cli.release import arms_table
from parallax.cli.run import branch_table
from parallax.cli.stats import METRICS, stats_table
from parallax.cli.tables import elide, short_id
from parallax.cli.trace import letters_table, speculation_table, trace_table
from parallax.runtime.storage.playbook_store import Candidate
from parallax.state.playbook import PlaybookItem, PlaybookVersion

TRACE = "f3fe3d0e9a8b4c2d1e0f9a8b7c6d5e4f"
LONG = (
    "the model stopped at the token limit before it finished the JSON reply, so the branch was"
    " asked again with the parse error and a shorter budget; after three attempts it escalated to"
    " the dead-letter list where a person can retry it once the endpoint answers again"
)
BRANCH_IDS = ("vote-f3fe3d0e", "safety-1a2b3c4d", "red_team-deadbeef", "judge-0123abcd")
PATH = [
    {"state": s, "at": 1.0 + n, "reason": LONG if s == "FAILED" else ""}
    for n, s in enumerate(
        ("PENDING", "DISPATCHED", "IN_PROGRESS", "FAILED", "RETRY", "IN_PROGRESS", "COMPLETED")
    )
]


def branches() -> list[dict]:
    outputs = [
        {"vote": "22"},
        {"error": LONG},
        {"output": {"objection": LONG}},
        {"output": {"choice": "22"}},
    ]
    return [
        {
            "id": i,
            "kind": i.split("-")[0],
            "status": "ok",
            "latency_ms": 12345.6,
            "tokens": {"total": 1234},
            "attempts": 3,
            "reasks": 1,
            "state": "COMPLETED",
            "transitions": PATH,
            **extra,
        }
        for i, extra in zip(BRANCH_IDS, outputs, strict=True)
    ]


def metrics(n: float) -> dict:
    return {key: n for _, key, _ in METRICS}


ITEMS = [
    PlaybookItem(
        id=f"pb-{n:010d}", section="formulas and definitions", text=LONG, helpful=n, harmful=1
    )
    for n in range(3)
]
VERSION = PlaybookVersion(
    name="formula",
    version=3,
    parent=2,
    items=ITEMS,
    created_at="2026-12-02T02:41:44+00:00",
    created_by="learn",
    gate={"val_accuracy_before": 0.4, "val_accuracy_after": 0.45},
    note=LONG,
)
SUMMARY = {
    "version": 3,
    "parent": 2,
    "created_at": VERSION.created_at,
    "items": 3,
    "accepted": True,
    "created_by": "learn",
    "gate": VERSION.gate,
    "note": LONG,
}
CANDIDATE = Candidate(**VERSION.model_dump(), candidate_id="0123456789ab", reason=LONG)
ARM = {
    "runs": 1234,
    "success_rate": 0.71,
    "ci95": [0.68, 0.74],
    "ok_rate": 0.8,
    "accuracy": 0.7,
    "accuracy_runs": 1000,
    "feedback_mean": 0.5,
    "feedback_runs": 12,
    "latency_ms_p50": 1234.0,
    "latency_ms_p95": 23456.0,
}
PROMPT_VERSION = {
    "version": 2,
    "parent": 1,
    "created_at": VERSION.created_at,
    "created_by": "someone-with-a-long-name",
    "gate": {"val_accuracy_before": 0.4, "val_accuracy_after": 0.45},
    "note": LONG,
}

TABLES = {
    "run: branches": (lambda: branch_table(branches()), BRANCH_IDS),
    "trace": (lambda: trace_table({"branches": branches()}), BRANCH_IDS),
    "dlq list": (
        lambda: letters_table(
            "acme",
            [
                {
                    "id": i,
                    "kind": "vote",
                    "trace_id": TRACE,
                    "status": "open",
                    "escalated_at": VERSION.created_at,
                    "retries": [{}],
                    "error": LONG,
                }
                for i in BRANCH_IDS
            ],
        ),
        (*BRANCH_IDS, short_id(TRACE)),
    ),
    "stats": (
        lambda: stats_table(
            "acme",
            {
                "by_version": [
                    {"playbook": "formula", "version": v, **metrics(1234.5)} for v in (1, 2, 3)
                ],
                "overall": metrics(0.5),
            },
        ),
        (),
    ),
    "playbook show": (lambda: items_table("formula", VERSION), tuple(i.id for i in ITEMS)),
    "playbook show --all": (
        lambda: items_table("formula", VERSION, all_items=True),
        tuple(i.id for i in ITEMS),
    ),
    "playbook history": (
        lambda: history_table(
            "formula", [SUMMARY, {**SUMMARY, "candidate": "0123456789ab", "accepted": False}]
        ),
        ("v3", "0123456789ab"),
    ),
    "playbook candidates": (lambda: candidates_table("formula", [CANDIDATE]), ("0123456789ab",)),
    "playbook quarantine": (
        lambda: quarantine_table(
            "formula",
            [
                {
                    "id": "q-0123456789ab",
                    "created_at": VERSION.created_at,
                    "source": "lesson check",
                    "reason": LONG,
                    "text": LONG,
                }
            ],
        ),
        ("q-0123456789ab",),
    ),
    "prompts show": (
        lambda: overview_table(
            "acme",
            [{"name": "red_team", "head": 12, "production": 11, "canary": 12, "used_by": LONG}],
        ),
        ("red_team",),
    ),
    "prompts history": (
        lambda: prompt_history_table(
            "answer",
            {
                "production": 1,
                "canary": 2,
                "versions": [PROMPT_VERSION],
                "candidates": [{**PROMPT_VERSION, "candidate_id": "0123456789ab", "reason": LONG}],
            },
        ),
        ("v2", "0123456789ab"),
    ),
    "loop status": (
        lambda: rounds_table(
            "formula",
            "acme",
            [
                {
                    "round": "round-1",
                    "started_at": VERSION.created_at,
                    "status": status,
                    "traces": {"consumed": 1234},
                    "candidate": {"version": 12},
                    "gate": {"claimed": True, "before": 0.4, "after": 0.45},
                    "canary": {"state": "collecting", "version": 12},
                    "why": LONG,
                }
                for status in ("learned", "skipped")
            ],
        ),
        ("v12", "learned", "skipped"),
    ),
    "run/trace: candidates": (
        lambda: speculation_table(
            {
                "by": "check",
                "candidates": [
                    {
                        "id": "candidate-0a1b2c3d",
                        "approach": "straightforward",
                        "temperature": 0.2,
                        "status": "ok",
                        "result": "lost",
                        "why": LONG,
                        "check": {"passed": False, "passed_tests": 2},
                    },
                    {
                        "id": "candidate-4e5f6a7b",
                        "approach": "alternative",
                        "temperature": 1.0,
                        "status": "cancelled",
                        "result": "cancelled",
                        "why": LONG,
                        "check": None,
                    },
                ],
            }
        ),
        ("candidate-0a1b2c3d", "candidate-4e5f6a7b"),
    ),
    "canary": (
        lambda: arms_table({"base": 1, "version": 2, "arms": {"production": ARM, "canary": ARM}}),
        (),
    ),
}


def rendered(table, width: int) -> list[str]:
    console = Console(width=width, file=io.StringIO(), color_system=None, record=True)
    console.print(table)
    return console.export_text().splitlines()


def source_words(table) -> set[str]:
    texts = (
        [table.title or ""]
        + [str(c.header) for c in table.columns]
        + [str(v) for c in table.columns for v in c.cells]
    )
    return {w for t in texts for w in t.split()}


@pytest.mark.parametrize("width", [80, 120])
@pytest.mark.parametrize("name", list(TABLES))
def test_table_reads_at_width(name, width):
    build, ids = TABLES[name]
    table = build()
    lines = rendered(table, width)
    assert max(map(len, lines)) <= width
    for shown in ids:
        assert any(re.search(rf"(?<![\w-]){re.escape(shown)}(?![\w-])", line) for line in lines), (
            shown,
            lines,
        )
    words = source_words(table)
    for token in (t for line in lines for t in line.replace("━", " ").replace("─", " ").split()):
        whole = token in words
        elided = token.endswith("…") and any(w.startswith(token[:-1]) for w in words)
        assert whole or elided, (token, "\n".join(lines))


def test_every_table_of_the_cli_is_rendered_here():
    source = "".join(
        p.read_text() for p in Path("parallax/cli").glob("*.py") if p.name != "tables.py"
    )
    assert (
        source.count("new_table(") == len(TABLES) - 1
    )  # `playbook show` is rendered twice (with and without --all)


def test_long_ids_are_short_in_tables_and_words_are_elided_whole():
    assert short_id(TRACE) == "f3fe3d0e" and short_id("vote-f3fe3d0e") == "vote-f3fe3d0e"
    assert elide("the token limit was reached", 16) == "the token limit…"
    assert elide("short", 16) == "short"
    assert elide("abcdefghijklmnopqrstuvwxyz", 10) == "abcdefghi…"


async def test_the_short_id_a_table_shows_finds_its_trace():
    from langgraph.store.memory import InMemoryStore

    from parallax.runtime.storage.namespaces import NotFound
    from parallax.runtime.storage.trace_store import TraceStore

    traces = TraceStore(InMemoryStore(), "acme")
    for trace_id in (TRACE, "f3fe3d0e" + "0" * 24, "0123abcd" + "0" * 24):
        await traces.put_trace({"trace_id": trace_id, "status": "ok"})
    assert (await traces.get_trace("0123abcd"))["trace_id"] == "0123abcd" + "0" * 24
    assert (await traces.get_trace(TRACE))["trace_id"] == TRACE
    with pytest.raises(NotFound, match="2 traces"):
        await traces.get_trace(short_id(TRACE))  # two traces start with it: more digits needed
    with pytest.raises(NotFound, match="no trace"):
        await traces.get_trace("0123a")  # too short to be looked up as a prefix
