"""The benchmarks run end to end at tiny sizes and print the JSON their readers rely on.

Why: benchmark code rots quietly; these keep both entry points, their result checks and
their JSON keys working. The QMSum data is part of the project's shared data: if it is
missing the test fails rather than skips, so a broken checkout is noticed.
"""

from __future__ import annotations

import json
from pathlib import Path

from bench import fanout, slicing

QMSUM = Path(__file__).resolve().parents[3] / "shared" / "data" / "qmsum" / "val.jsonl"


def test_fanout_small_run_prints_sane_json(capsys):
    result = fanout.main(["--branches", "50", "--latency-ms", "5", "--concurrency", "10", "--repeat", "1", "--json"])
    assert json.loads(capsys.readouterr().out) == result  # the one object on stdout
    for key in ("raw_s", "graph_s", "plain_send_s", "ratio_vs_raw", "overhead_ms_per_branch",
                "plain_send_overhead_ms_per_branch", "peak_rss_mb", "branches", "latency_ms", "concurrency"):
        assert key in result, key
    # 50 calls of 5 ms at 10 in flight cannot finish in under 25 ms
    assert min(result["raw_s"], result["graph_s"], result["plain_send_s"]) >= 0.025
    assert result["ratio_vs_raw"] > 0 and 0 < result["peak_rss_mb"] < 2000
    assert set(result["goals_met"]) == {"ratio_vs_raw_le_1.2", "overhead_le_half_plain_send", "peak_rss_le_300mb"}
    assert all(isinstance(v, bool) for v in result["goals_met"].values())


async def test_fanout_graph_run_checks_votes_and_records(tmp_path):
    """run_graph raises unless every vote came back as '42' with its own record."""
    wall, cpu = await fanout.run_graph(30, 0.001, 7, tmp_path / "c.sqlite")
    assert wall > 0 and cpu > 0


def test_slicing_two_meetings_prints_sane_json(capsys):
    assert QMSUM.is_file(), f"QMSum data missing at {QMSUM}"
    result = slicing.main(["--data", str(QMSUM), "--limit", "2", "--json"])
    assert json.loads(capsys.readouterr().out) == result
    assert result["meetings"] == 2
    assert result["branches_total"] >= 4  # both meetings are far longer than one slice
    assert 0 < result["section_prompt_tokens"] < result["whole_prompt_tokens"]
    assert 0 < result["ratio"] < 1 and 0 < result["median_ratio_per_meeting"] < 1
    assert result["tokenizer"] and isinstance(result["goal_met"], bool)


def test_meeting_document_has_one_heading_per_topic():
    meeting = {
        "meeting_transcripts": [{"speaker": "A", "content": "hello"}, {"speaker": "B", "content": "hi"},
                                {"speaker": "A", "content": "bye"}],
        "topic_list": [{"topic": "Greeting", "relevant_text_span": [["0", "1"]]},
                       {"topic": "Farewell", "relevant_text_span": [["2", "2"]]}],
    }
    document, used = slicing.meeting_document(meeting)
    assert document == "## Topic: Greeting\nA: hello\nB: hi\n## Topic: Farewell\nA: bye"
    assert used == 3
    assert slicing.meeting_document({**meeting, "topic_list": []})[0] == "A: hello\nB: hi\nA: bye"
