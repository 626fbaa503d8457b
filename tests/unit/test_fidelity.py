"""bench.fidelity end to end at a tiny size: JSON keys, dumps, and batch-independent lessons.

Why: the fidelity benchmark is how we show that curate+merge keeps the lessons a naive
summarising call loses; it must keep running offline (rule curator, bag-of-words embedder,
scripted model) so that breakage is noticed before the slow real run.
"""

from __future__ import annotations

import json

import pytest

from bench import fidelity
from testkit.scripted_model import asked_for, scripted

LESSONS = {
    "gross_margin": [
        "Gross margin is revenue minus COGS, divided by revenue.",
        "Gross margin = (revenue - COGS) / revenue.",
        "For gross margin divide revenue minus COGS by revenue.",
    ],
    "operating_margin": [
        "Operating margin is operating income divided by revenue.",
        "Operating margin = operating income / revenue.",
        "For operating margin divide operating income by revenue.",
    ],
    "roe": [
        "ROE is net income divided by shareholders equity.",
        "ROE = net income / shareholders equity.",
        "For ROE divide net income by equity.",
    ],
    "stated_rate": [
        "Tag a stated coupon rate with DebtInstrumentInterestRateStatedPercentage.",
        "Use DebtInstrumentInterestRateStatedPercentage for a stated coupon rate.",
        "A stated coupon rate is DebtInstrumentInterestRateStatedPercentage.",
    ],
}


@pytest.fixture
def reflections(tmp_path):
    rows = [
        {
            "id": f"r{k}{i}",
            "text": f"The run failed because of a slip. Lesson: {text}",
            "lesson": lesson,
        }
        for k, (lesson, texts) in enumerate(LESSONS.items())
        for i, text in enumerate(texts)
    ]
    rows = rows[::2] + rows[1::2]  # interleave lessons
    path = tmp_path / "reflections.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rule_curator_names_the_subject_not_the_contrast():
    assert fidelity.subject("Unlike gross margin, operating margin also removes opex.") == [
        "operating margin"
    ]
    assert fidelity.subject(
        "Return on equity divides by equity; dividing by assets gives ROA."
    ) == ["return on equity"]
    assert fidelity.subject("Use DebtInstrumentFaceAmount for the principal.") == [
        "debtinstrumentfaceamount"
    ]
    assert fidelity.subject("Round only the final answer.") == []
    (op,) = fidelity.rule_curate({"id": "r1", "text": "Wrong. Lesson: EAR = (1 + i/n)^n - 1."})
    assert (op.op, op.text, op.about, op.provenance) == (
        "add",
        "EAR = (1 + i/n)^n - 1.",
        ["effective annual rate"],
        ["r1"],
    )


def test_small_run_keeps_every_lesson_at_every_batch_size(reflections, tmp_path, capsys):
    out = fidelity.main(
        [
            "--reflections",
            str(reflections),
            "--batches",
            "1,5,12",
            "--baseline",
            "none",
            "--embedder",
            "bow",
            "--dump",
            str(tmp_path / "dump"),
            "--json",
        ]
    )
    assert json.loads(capsys.readouterr().out) == out
    assert out["reflections"] == 12 and out["lessons_total"] == 4 and out["baseline"] is None
    for size in ("1", "5", "12"):
        figures = out["batches"][size]
        for key in ("items", "lessons_total", "lessons_retained", "duplicate_items", "seconds"):
            assert key in figures, key
        assert (
            figures["lessons_retained"] == 4
            and figures["duplicate_items"] == 0
            and figures["items"] == 4
        )
        dumped = json.loads((tmp_path / "dump" / f"batch_{size}.json").read_text())
        assert len(dumped) == 4 and all(set(d) == {"id", "text", "provenance"} for d in dumped)
        assert sorted(p for d in dumped for p in d["provenance"]) == sorted(
            f"r{k}{i}" for k in range(4) for i in range(3)
        )
    assert out["goals"] == {"retained_ratio": 1.0, "retained_ok": True, "duplicates_ok": True}


def test_baseline_and_model_curator_go_through_the_product_model_path(reflections, monkeypatch):
    def script(prompt, temperature, index):
        if asked_for() == "Curation":
            lesson = prompt.rsplit("- ", 1)[1].strip()
            return json.dumps(
                {"entries": [{"section": "s", "text": lesson, "about": fidelity.subject(lesson)}]}
            )
        return json.dumps(
            {
                "items": [
                    "Check the formula before computing.",
                    "Gross margin is revenue minus COGS over revenue.",
                ]
            }
        )

    model_ctx, calls = scripted(script)
    out = fidelity.main(
        [
            "--reflections",
            str(reflections),
            "--batches",
            "1,12",
            "--curator",
            "model",
            "--embedder",
            "bow",
        ],
        chat_model=model_ctx.chat_model,
    )
    curate_calls = sum("You turn lessons" in p for p, _ in calls)
    assert (
        curate_calls == 12 and len(calls) == 12 + 12 + 1
    )  # per reflection, then one call per baseline batch
    assert out["batches"]["1"]["lessons_retained"] == out["batches"]["12"]["lessons_retained"] == 4
    base = out["baseline"]["12"]
    assert base["items"] == 2 and base["lessons_retained"] <= 2 and "failed_calls" in base
