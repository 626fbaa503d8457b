"""bench/section_cap.py's arithmetic and input: the share of slice branches at the token cap, a cut
at a line end, gzipped meetings, FinanceBench pages in pairs (the run itself needs the embedded
model: `python -m bench.section_cap`).
"""

from __future__ import annotations

import gzip
import json

from bench.samples import SAMPLES
from bench.section_cap import cut, documents, read_meetings, report


def test_the_share_counts_slice_branches_at_the_cap_over_all_runs(tmp_path):
    runs = [
        {
            "status": "ok",
            "slices": 3,
            "at_cap": 0,
            "causes": {"ok": 3},
            "completion_tokens": [90, 120, 200],
            "seconds": 10.0,
            "document": "a",
        },
        {
            "status": "failed",
            "slices": 2,
            "at_cap": 2,
            "causes": {"length": 2},
            "completion_tokens": [384, 384],
            "seconds": 20.0,
            "document": "b",
        },
    ]
    out = report(tmp_path / "m.jsonl", 12000, runs, 30.0)
    assert (out["slice_branches"], out["slice_branches_at_cap"], out["share_at_cap"]) == (5, 2, 0.4)
    assert (
        out["goal_met"] is False
        and out["slice_causes"] == {"ok": 3, "length": 2}
        and out["runs_failed"] == 1
    )
    assert out["slice_completion_tokens"] == {"median": 200, "max": 384}


def test_a_document_is_cut_at_a_line_end_and_meetings_are_read_gzipped(tmp_path):
    assert cut("one\ntwo\nthree", 9) == "one\ntwo" and cut("short", 100) == "short"
    path = tmp_path / "val.jsonl.gz"
    with gzip.open(path, "wt") as handle:
        handle.write(json.dumps({"meeting_transcripts": []}) + "\n\n")
    assert read_meetings(path) == [{"meeting_transcripts": []}]


def test_filing_runs_take_the_filings_in_turn_two_pages_each_with_a_question_about_that_filing():
    runs = documents(SAMPLES / "financebench")
    firsts = [name for name, _, _ in runs[:6]]
    assert firsts == [
        "ADOBE_2015_10K pages 55-56",
        "ADOBE_2017_10K pages 54-55",
        "ADOBE_2022_10K pages 51-52",
        "NIKE_2019_10K pages 50-51",
        "NIKE_2021_10K pages 56-57",
        "PEPSICO_2023Q1_EARNINGS pages 0-1",
    ]
    name, text, question = runs[5]
    assert "PepsiCo" in text and "Pepsico" in question and len(runs) == 25
