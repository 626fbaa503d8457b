"""A run's timeline: lanes, waves, raced copies and plan edges read off stored traces, drawn as SVG,
and `parallax trace ID --timeline FILE` writing it (or refusing with one line and writing nothing).
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET

from typer.testing import CliRunner

from parallax.cli import app
from parallax.logic.timeline import timeline
from parallax.logic.timeline_svg import render_svg
from testkit.scripted_model import scripted

T0 = 1_800_000_000.0
SVG = "{http://www.w3.org/2000/svg}"


def steps(*pairs: tuple[str, float] | tuple[str, float, str]) -> list[dict]:
    return [{"state": p[0], "at": T0 + p[1], "reason": p[2] if len(p) > 2 else ""} for p in pairs]


def vote(
    branch_id: str, planned: float, start: float, end: float, last: str = "COMPLETED", **extra
) -> dict:
    return {
        "id": branch_id,
        "kind": "vote",
        "status": "cancelled" if last == "CANCELLED" else "ok",
        "attempts": 1,
        "transitions": steps(
            ("PENDING", planned), ("DISPATCHED", planned), ("IN_PROGRESS", start), (last, end)
        ),
        **extra,
    }


def two_wave_vote() -> dict:
    """Wave 1: three votes planned at 0 s; wave 2 planned at 1.2 s, once all three were back; in
    wave 2 a straggler raced by a backup copy that won (the original cancelled), and one vote that
    failed and retried.
    """
    retried = {
        "id": "vote-e",
        "kind": "vote",
        "status": "ok",
        "attempts": 2,
        "transitions": steps(
            ("PENDING", 1.2),
            ("DISPATCHED", 1.2),
            ("IN_PROGRESS", 1.3),
            ("FAILED", 1.5, "reply did not parse"),
            ("RETRY", 1.5, "re-ask"),
            ("IN_PROGRESS", 1.6),
            ("COMPLETED", 1.9),
        ),
    }
    raced = vote(
        "vote-f",
        1.2,
        2.5,
        2.9,
        backup={
            "winner": "backup",
            "reason": "straggler",
            "other_transitions": steps(
                ("PENDING", 1.2),
                ("DISPATCHED", 1.2),
                ("IN_PROGRESS", 1.3),
                ("CANCELLED", 2.9, "the other copy finished first"),
            ),
        },
    )
    return {
        "trace_id": "a" * 32,
        "mode": "vote",
        "status": "ok",
        "branches": [
            vote("vote-a", 0.0, 0.1, 0.9),
            vote("vote-b", 0.0, 0.1, 1.1),
            vote("vote-c", 0.0, 0.3, 1.15),
            vote("vote-d", 1.2, 1.3, 1.8),
            retried,
            raced,
        ],
    }


def test_votes_planned_after_the_last_return_of_a_wave_form_the_next_wave():
    line = timeline(two_wave_vote())
    assert line.waves == [0.0, 1.2]
    waves = {lane.label: lane.wave for lane in line.lanes}
    assert [waves[f"vote-{x}"] for x in "abcd"] == [1, 1, 1, 2] and waves["vote-e"] == 2
    assert line.duration == 2.9


def test_a_raced_branch_has_a_lane_per_copy_and_the_loser_ends_cancelled():
    lanes = {lane.id: lane for lane in timeline(two_wave_vote()).lanes}
    loser, winner = lanes["vote-f~original"], lanes["vote-f"]
    assert (loser.end, loser.winner, loser.wave) == ("cancelled", False, 2)
    assert (winner.copy, winner.winner, winner.label) == ("backup", True, "vote-f (backup, won)")
    assert [s.phase for s in winner.segments] == ["queued", "running"] and winner.segments[
        0
    ].end == 2.5


def test_a_retry_shows_where_it_failed_why_and_when_it_asked_again():
    lane = next(lane for lane in timeline(two_wave_vote()).lanes if lane.id == "vote-e")
    assert [(s.phase, s.start, s.end) for s in lane.segments] == [
        ("queued", 1.2, 1.3),
        ("running", 1.3, 1.5),
        ("failed", 1.5, 1.5),
        ("retry", 1.5, 1.6),
        ("running", 1.6, 1.9),
    ]
    assert lane.segments[2].reason == "reply did not parse" and lane.attempts == 2


def test_plan_tasks_come_with_their_branches_and_the_dependency_they_waited_on():
    def task(i, started, finished, deps=()):
        return {
            "id": i,
            "round": 0,
            "goal": f"goal {i}",
            "deps": list(deps),
            "status": "DONE",
            "started_at": T0 + started,
            "finished_at": T0 + finished,
        }

    trace = {
        "trace_id": "b" * 32,
        "mode": "plan",
        "status": "ok",
        "tasks": [
            task(1, 1.0, 3.0),
            task(2, 1.0, 1.5),
            task(3, 1.6, 2.0, [2]),
            task(4, 3.1, 3.5, [1, 3]),
            {**task(1, 0.0, 0.5), "round": -1},
        ],  # an earlier round's record: not drawn
        "branches": [
            {**vote("plan-1", 0.0, 0.1, 0.9), "kind": "plan"},
            {**vote("direct-1", 1.0, 1.05, 2.9), "kind": "direct", "task": 1},
            {**vote("direct-4", 3.1, 3.15, 3.4), "kind": "direct", "task": 4},
        ],
    }
    line = timeline(trace)
    assert [lane.id for lane in line.lanes] == [
        "plan-1",
        "task-1",
        "direct-1",
        "task-2",
        "task-3",
        "task-4",
        "direct-4",
    ]
    tasks = {lane.task: lane for lane in line.lanes if lane.kind == "task"}
    assert (tasks[4].deps, tasks[4].waited_on) == (
        [1, 3],
        1,
    )  # task 1 finished at 3.0, after task 3 (2.0)
    assert (tasks[3].waited_on, tasks[1].waited_on) == (2, None)
    svg = ET.fromstring(render_svg(line))
    arrows = [p for p in svg.iter(f"{SVG}path") if p.get("marker-end")]
    assert len(arrows) == 3  # 2 -> 3, 1 -> 4, 3 -> 4
    assert (
        sum("stroke-dasharray" not in a.attrib for a in arrows) == 2
    )  # solid: the edges a task waited on


def test_the_svg_has_a_row_per_lane_with_its_text_escaped():
    trace = two_wave_vote()
    trace["branches"][0]["id"] = "vote-<b>&"
    svg_text = render_svg(timeline(trace))
    root = ET.fromstring(svg_text)  # well-formed although an id holds markup characters
    labels = [t.text for t in root.iter(f"{SVG}text") if t.text and t.text.startswith("vote-")]
    assert len(labels) == 7 and "vote-<b>& [wave 1]" in " ".join(labels).replace("  ", " ")
    assert sum(1 for t in root.iter(f"{SVG}text") if (t.text or "").startswith("wave ")) == 2


def test_parallax_trace_writes_the_timeline_and_refuses_other_formats(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "22"}))
    runner = CliRunner()
    run = runner.invoke(
        app, ["run", "17 sheep plus 5 sheep: how many?", "--votes", "3", "--json"], obj=ctx
    )
    out = json.loads(run.stdout)
    picture = tmp_path / "run.svg"
    shown = runner.invoke(app, ["trace", out["trace_id"][:8], "--timeline", str(picture)])
    assert shown.exit_code == 0, shown.output
    root = ET.fromstring(picture.read_text())
    drawn = {
        t.text.split(" ")[0]
        for t in root.iter(f"{SVG}text")
        if t.text and t.text.split(" ")[0] in {b["id"] for b in out["branches"]}
    }
    assert drawn == {b["id"] for b in out["branches"]}  # every branch of the run has its lane

    html = runner.invoke(app, ["trace", out["trace_id"], "--timeline", str(tmp_path / "run.html")])
    assert html.exit_code == 0 and (tmp_path / "run.html").read_text().startswith("<!doctype html>")
    refused = runner.invoke(
        app, ["trace", out["trace_id"], "--timeline", str(tmp_path / "run.png")]
    )
    assert refused.exit_code == 2 and "name a file ending in .svg or .html" in refused.output
    assert len(refused.output.strip().splitlines()) == 1 and not (tmp_path / "run.png").exists()
