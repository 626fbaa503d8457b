"""Build the labelled lesson set (bench/data/lessons_dev.jsonl) from the Formula and FiNER dev sets.

Each line: {"id", "lesson", "task" (the task text it is judged against), "label" ("keep" or
"junk"), "kind", "source"}. Half the lessons are worth keeping: instructions grounded in
their own task, written from the task's formula (Formula) or its target tag and sentence
(FiNER), in several phrasings. The other half are junk of the kinds a small model writes:
the six lessons of issue 12 (three quoted in it, three more of the same kinds), verdicts,
bare numbers, narratives, and instructions about something their task does not contain
(a lesson paired with a task of another formula, or a generic one).

    python -m bench.data.make_lessons --data /path/to/data   # rewrites bench/data/lessons_dev.jsonl

It reads the whole dev sets, which the repository does not keep (only the lessons made from
them, bench/data/README.md): `--data` is a folder with formula/val.jsonl (ace-agent/ace @ ba78d343,
finance/data/formula_val_subset_300.jsonl) and finer/val.jsonl (ace-agent/ace @ ba78d343,
finance/data/finer_val_batched_500_samples.jsonl), both Apache-2.0.
"""

from __future__ import annotations

import argparse
import json
import random
import re
from pathlib import Path

OUT = Path(__file__).with_name("lessons_dev.jsonl")

ISSUE_SIX = [  # the first three are quoted in issue 12; the other three are of the same kinds
    ("The solution is incorrect", "verdict"),
    ("1.8%", "number"),
    (
        (
            "This update brings with it several new features that have been added to the current"
            " version…"
        ),
        "narrative",
    ),
    ("The answer given was wrong.", "verdict"),
    ("$3,120.50", "number"),
    ("I calculated the ratio and the company looked healthy this year.", "narrative"),
]
VERDICTS = [
    "The answer is correct.",
    "Wrong.",
    "Incorrect answer.",
    "The solver was wrong",
    "This is correct",
    "The prediction was inaccurate.",
    "Good job!",
    "The final answer is right.",
    "The calculation is wrong.",
    "It was a mistake.",
    "The response is fine.",
    "Correct.",
]
NARRATIVES = [
    "The company reported strong growth in the quarter.",
    "In this task the model was asked to compute a ratio.",
    "I divided the numbers and got a result.",
    "Revenue grew because demand increased across all regions.",
    "The soap maker had high costs last year and kept a large inventory.",
    "This was a hard question about finance and accounting.",
    "The previous version of the playbook had fewer lessons.",
    "Our team discussed the numbers at length before the meeting.",
    "The market was volatile and investors were nervous.",
    "Several values appeared in the question, some of them large.",
    "The solver read the sentence and picked a tag from the list.",
    "It seems the data came from an annual report.",
]
GENERIC = [
    "Always double-check your arithmetic before answering.",
    "Read the question carefully.",
    "Think step by step and be precise.",
    "Make sure the answer is formatted nicely.",
    "Never give up on a hard problem.",
]


def formula_tasks(data: Path) -> list[dict]:
    rows = [
        json.loads(line)
        for line in (data / "formula" / "val.jsonl").read_text().splitlines()
        if line.strip()
    ]
    tasks = []
    for n, row in enumerate(rows):
        name = re.search(r"Use formula (.*?) to answer", row["context"]).group(1)
        formula = re.search(r"Formula: (.*?), Explanation:", row["context"])
        if formula and "=" in formula.group(1):
            tasks.append(
                {
                    "id": f"formula:{n + 1}",
                    "name": name,
                    "formula": formula.group(1).strip(),
                    "text": row["context"],
                    "target": row["target"],
                }
            )
    return tasks


def finer_items(data: Path) -> list[dict]:
    rows = [
        json.loads(line)
        for line in (data / "finer" / "val.jsonl").read_text().splitlines()
        if line.strip()
    ]
    items = []
    for n, row in enumerate(rows):
        questions = re.findall(
            r'What is best tag for entity "([^"]+)" in sentence: "(.*?)\?"', row["context"]
        )
        for (entity, sentence), tag in zip(questions, row["target"].split(","), strict=False):
            items.append(
                {
                    "id": f"finer:{n + 1}",
                    "entity": entity,
                    "sentence": sentence,
                    "tag": tag.strip(),
                    "text": row["context"],
                }
            )
    return items


def words_of(tag: str) -> str:
    return " ".join(
        p.lower() for p in re.findall(r"[A-Z][a-z]+|[A-Z]+(?![a-z])|\d+", tag) if not p.isdigit()
    )


FORMULA_PHRASES = [
    "Compute {name} as {rhs}, then round to 2 decimal places.",
    "For {name}, use {formula}; do not swap the numerator and the denominator.",
    "{formula}: take each input from the question in the same units before dividing.",
    "When the question asks for {name}, apply {formula} exactly as given.",
]
FINER_PHRASES = [
    "Tag a number that states the {words} as {tag}.",
    "When a sentence gives the {words}, the best tag is {tag}.",
    "Use {tag} for the {words}, not a more general tag.",
]


def build(data: Path, seed: int = 12) -> list[dict]:
    rng = random.Random(seed)
    formulas, finer = formula_tasks(data), finer_items(data)
    by_name: dict[str, dict] = {}
    for t in formulas:
        by_name.setdefault(t["name"], t)
    distinct = list(by_name.values())
    rng.shuffle(distinct)
    lines = []

    def add(lesson: str, task: dict, label: str, kind: str, source: str) -> None:
        lines.append(
            {
                "id": f"l{len(lines) + 1:03d}",
                "lesson": lesson,
                "task": task["text"],
                "task_id": task["id"],
                "label": label,
                "kind": kind,
                "source": source,
            }
        )

    # 33 grounded Formula lessons, one per formula, phrasings in turn
    for i, t in enumerate(distinct[:33]):
        rhs = t["formula"].split("=", 1)[1].strip()
        add(
            FORMULA_PHRASES[i % len(FORMULA_PHRASES)].format(
                name=t["name"], rhs=rhs, formula=t["formula"]
            ),
            t,
            "keep",
            "grounded",
            "formula",
        )
    # 22 grounded FiNER lessons, distinct tags
    seen, picked = set(), []
    for item in finer:
        if item["tag"] not in seen and len(words_of(item["tag"]).split()) >= 2:
            seen.add(item["tag"])
            picked.append(item)
    rng.shuffle(picked)
    for i, item in enumerate(picked[:22]):
        add(
            FINER_PHRASES[i % len(FINER_PHRASES)].format(
                words=words_of(item["tag"]), tag=item["tag"]
            ),
            item,
            "keep",
            "grounded",
            "finer",
        )

    junk_tasks = distinct[33:] + distinct[:33]
    k = 0

    def next_task() -> dict:
        nonlocal k
        k += 1
        return junk_tasks[k % len(junk_tasks)]

    for lesson, kind in ISSUE_SIX:
        add(lesson, next_task(), "junk", kind, "issue 12")
    for lesson in VERDICTS:
        add(lesson, next_task(), "junk", "verdict", "written")
    for t in formulas[:10]:
        add(
            t["target"] if rng.random() < 0.5 else f"{t['target']}%",
            next_task(),
            "junk",
            "number",
            "targets",
        )
    for lesson in NARRATIVES:
        add(lesson, next_task(), "junk", "narrative", "written")
    # instructions about something else: a formula lesson on a task of another formula family,
    # a FiNER lesson on a Formula task, and generic advice
    for i in range(6):
        lesson_task, other = distinct[i], distinct[-1 - i]
        rhs = lesson_task["formula"].split("=", 1)[1].strip()
        add(
            f"Compute {lesson_task['name']} as {rhs}.", other, "junk", "ungrounded", "other formula"
        )
    for i, item in enumerate(picked[22:26]):
        add(
            FINER_PHRASES[i % len(FINER_PHRASES)].format(
                words=words_of(item["tag"]), tag=item["tag"]
            ),
            distinct[i + 6],
            "junk",
            "ungrounded",
            "FiNER lesson on a Formula task",
        )
    for lesson in GENERIC:
        add(lesson, next_task(), "junk", "ungrounded", "generic")
    return lines


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        prog="python -m bench.data.make_lessons", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--data", type=Path, required=True, help="folder with formula/val.jsonl and finer/val.jsonl"
    )
    args = parser.parse_args(argv)
    for need in ("formula/val.jsonl", "finer/val.jsonl"):
        if not (args.data / need).is_file():
            parser.error(
                f"{args.data / need} not found: --data must be a folder with formula/val.jsonl and"
                " finer/val.jsonl"
            )
    lines = build(args.data)
    OUT.write_text("".join(json.dumps(line, ensure_ascii=False) + "\n" for line in lines))
    keep = sum(line["label"] == "keep" for line in lines)
    print(
        json.dumps(
            {"lessons": len(lines), "keep": keep, "junk": len(lines) - keep, "out": str(OUT)}
        )
    )


if __name__ == "__main__":
    main()
