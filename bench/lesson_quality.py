"""bench.lesson_quality: does the lesson check keep grounded lessons and reject junk, and where is
the floor?

On the labelled set bench/data/lessons_dev.jsonl (110 lessons from the Formula and FiNER dev
sets, half worth keeping, half junk; bench/data/make_lessons.py builds it), it reports:

- the share of grounded lessons kept and of junk rejected, by the key-term check alone and
  with the local MiniLM similarity as the fallback (the product's setting), with reasons;
- the calibration of the similarity floor: MiniLM similarity of each instruction to its own
  task (grounded) and to a task of another formula (ungrounded), the floor in use
  (parallax/logic/lesson_quality.py: SIMILARITY_FLOOR) and the share of each side above it.

    python -m bench.lesson_quality --json
"""

from __future__ import annotations

import argparse
import json
import time
from collections import Counter
from pathlib import Path

import numpy as np

from parallax.logic.lesson_quality import SIMILARITY_FLOOR, check_lesson, form_problem

DATA = Path(__file__).with_name("data") / "lessons_dev.jsonl"


def shares(rows: list[dict], embed) -> dict:
    verdicts = [(r, check_lesson(r["lesson"], r["task"], embed)) for r in rows]
    junk = [(r, v) for r, v in verdicts if r["label"] == "junk"]
    keep = [(r, v) for r, v in verdicts if r["label"] == "keep"]
    return {
        "grounded_kept_share": round(sum(v.ok for _, v in keep) / len(keep), 4),
        "junk_rejected_share": round(sum(not v.ok for _, v in junk) / len(junk), 4),
        "junk_kept": [r["lesson"] for r, v in junk if v.ok],
        "grounded_rejected": [
            {"lesson": r["lesson"], "reason": v.reason} for r, v in keep if not v.ok
        ],
        "junk_rejected_by_kind": dict(Counter(r["kind"] for r, v in junk if not v.ok)),
        "reasons": dict(Counter(v.reason.split(" (")[0] for _, v in junk if not v.ok)),
        "kept_by_similarity": sum(v.ok and v.similarity is not None for _, v in verdicts),
    }


def calibration(rows: list[dict], embed) -> dict:
    """Similarity of every instruction (grounded lessons and instruction-shaped junk) to its own
    task vs another."""
    instructions = [r for r in rows if not form_problem(r["lesson"])]
    keep = [r for r in instructions if r["label"] == "keep"]
    tasks = sorted({r["task"] for r in keep})
    own = embed([r["lesson"] for r in keep])
    own_tasks = embed([r["task"] for r in keep])
    grounded = (own * own_tasks).sum(axis=1)
    task_vectors = embed(tasks)
    index = {t: i for i, t in enumerate(tasks)}
    other = [task_vectors[(index[r["task"]] + len(tasks) // 2) % len(tasks)] for r in keep]
    ungrounded = (own * np.stack(other)).sum(axis=1)
    junk = [r for r in instructions if r["label"] == "junk"]
    junk_sims = (
        (embed([r["lesson"] for r in junk]) * embed([r["task"] for r in junk])).sum(axis=1)
        if junk
        else []
    )

    def q(values, p):
        return round(float(np.percentile(values, p)), 4) if len(values) else None

    return {
        "floor": SIMILARITY_FLOOR,
        "grounded_pairs": {
            "n": len(grounded),
            "p5": q(grounded, 5),
            "p50": q(grounded, 50),
            "above_floor_share": round(float((grounded >= SIMILARITY_FLOOR).mean()), 4),
        },
        "ungrounded_pairs": {
            "n": len(ungrounded),
            "p50": q(ungrounded, 50),
            "p95": q(ungrounded, 95),
            "max": q(ungrounded, 100),
            "above_floor_share": round(float((ungrounded >= SIMILARITY_FLOOR).mean()), 4),
        },
        "junk_instructions": {
            "n": len(junk),
            "max": q(junk_sims, 100),
            "above_floor_share": (
                round(float((np.asarray(junk_sims) >= SIMILARITY_FLOOR).mean()), 4)
                if len(junk)
                else None
            ),
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--data", type=Path, default=DATA)
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    from parallax.runtime import embeddings

    rows = [json.loads(line) for line in args.data.read_text().splitlines() if line.strip()]
    started = time.perf_counter()
    embeddings.embed(["warm up"])
    result = {
        "lessons": len(rows),
        "keep": sum(r["label"] == "keep" for r in rows),
        "junk": sum(r["label"] == "junk" for r in rows),
        "key_terms_only": shares(rows, None),
        "with_minilm": shares(rows, embeddings.embed),
        "calibration": calibration(rows, embeddings.embed),
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(result, indent=None if args.json else 2, ensure_ascii=False))


if __name__ == "__main__":
    main()
