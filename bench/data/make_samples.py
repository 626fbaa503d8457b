"""Cut the repository's data samples from full copies of the public datasets they come from.

Why: a clone must run its tests, benchmarks and examples with nothing beside it, so the few
rows each one reads live in the repository (bench/data/samples/, examples/), each folder with
a README.md giving source, licence and selection. This script is that selection, written down:
given a folder laid out like the datasets' sources (below), it rewrites every sample, byte for
byte the same on every run (rows copied unchanged, gzip without a timestamp).

    python -m bench.data.make_samples --source /path/to/data   # formula/ gsm8k/ qmsum/
    financebench_dev/

The layout of `--source` and where each dataset comes from:

- formula/{train,val}.jsonl: ace-agent/ace @ ba78d343,
  finance/data/formula_{train_subset_500,val_subset_300}.jsonl
- gsm8k/test.jsonl: openai/grade-school-math @ 3101c7d5, grade_school_math/data/test.jsonl
- qmsum/val.jsonl: Yale-LILY/QMSum @ 83d7768c, data/ALL/jsonl/val.jsonl
- financebench_dev/questions.jsonl (written gzipped) and docs_text/<DOC>.jsonl.gz:
  patronus-ai/financebench @ cc39aeb4 (questions from data/financebench_open_source.jsonl; page
  texts made from pdfs/<DOC>.pdf with `pdftotext -layout`)
"""

from __future__ import annotations

import argparse
import gzip
import io
import json
from pathlib import Path

from bench.samples import SAMPLES
from bench.samples import read_lines as lines

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

EXAMPLE_TRAIN, EXAMPLE_VAL = 40, 20
"""The README's `parallax learn train.jsonl --val val.jsonl --batch 20`: two batches, a small gate.
"""
LEARN_SPEED_TASKS = 300
"""bench.learn_speed's default `--tasks`."""
GSM8K_QUESTIONS = 100
"""bench.adaptive_vote's documented `--embedded 100`."""
QMSUM_MEETINGS = 20
"""Section runs over dev documents: bench.slicing, bench.facts,
tests/integration/test_solve_real_model.py."""
FINANCEBENCH_PAGES = {  # bench/extract.py's DOCUMENTS (pages from 0, as in the data)
    "ADOBE_2015_10K": range(55, 64),
    "ADOBE_2017_10K": range(54, 62),
    "ADOBE_2022_10K": range(51, 58),
    "NIKE_2019_10K": range(50, 56),
    "NIKE_2021_10K": range(56, 62),
}
MEETING_LINE = 34
"""examples/meeting.md: QMSum val.jsonl's line 34, an AMI product-design meeting about a TV remote
(168 turns)."""
# examples/annual_report.pdf: a made-up company, two pages (the README's schema example)
ANNUAL_REPORT = [
    [
        "EXAMPLE TOOLS INC.",
        "ANNUAL REPORT 2025",
        "",
        (
            "Example Tools Inc. is a made-up company: this report exists to show Parallax reading a"
            " PDF."
        ),
        "",
        "HIGHLIGHTS",
        "Total net revenue was 4,796 million for the year.",
        "Hand tools grew faster than power tools; the new plant opened in March.",
    ],
    [
        "CONSOLIDATED STATEMENT OF INCOME",
        "(in millions)",
        "",
        "Net income was 629 million, up from 268 million.",
        "Operating expenses rose with the opening of the new plant.",
    ],
]
FINANCEBENCH_WHOLE = ["PEPSICO_2023Q1_EARNINGS"]
"""Documents kept with every page (tests/unit/test_make_filings.py draws one whole)."""


def write(path: Path, rows: list[str]) -> None:
    """Rows as JSONL; a `.gz` path is gzipped with mtime 0, so the same rows give the same bytes."""
    path.parent.mkdir(parents=True, exist_ok=True)
    data = "".join(row + "\n" for row in rows).encode("utf-8")
    if path.suffix == ".gz":
        buffer = io.BytesIO()
        with gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as gz:
            gz.write(data)
        data = buffer.getvalue()
    path.write_bytes(data)


def shortest(rows: list[str], n: int) -> list[str]:
    """The `n` shortest rows (ties by position), kept in their original order."""
    keep = set(sorted(range(len(rows)), key=lambda i: (len(rows[i]), i))[:n])
    return [row for i, row in enumerate(rows) if i in keep]


def meeting_markdown(meeting: dict) -> str:
    """A QMSum meeting as a user would keep it: a title, then `## topic` with its turns as `Speaker:
    words`."""
    turns = meeting["meeting_transcripts"]
    parts = ["# Product design meeting: a remote control (AMI corpus, from QMSum)"]
    for topic in meeting["topic_list"]:
        lines = [
            f"{turn['speaker']}: {' '.join(turn['content'].split())}"
            for start, end in topic["relevant_text_span"]
            for turn in turns[int(start) : int(end) + 1]
        ]
        parts.append(f"## {topic['topic']}\n\n" + "\n".join(lines))
    return "\n\n".join(parts) + "\n"


def annual_report_pdf(path: Path) -> None:
    """examples/annual_report.pdf, the same bytes every time (reportlab's invariant mode)."""
    from reportlab.pdfgen.canvas import Canvas

    canvas = Canvas(str(path), pagesize=(612.0, 792.0), invariant=True)
    canvas.setTitle("Example Tools Inc. annual report 2025 (made up)")
    for page in ANNUAL_REPORT:
        for i, line in enumerate(page):
            canvas.setFont("Helvetica-Bold" if i == 0 else "Helvetica", 14 if i == 0 else 11)
            canvas.drawString(72, 720 - 18 * i, line)
        canvas.showPage()
    canvas.save()


def financebench(source: Path) -> dict[str, list[int]]:
    """Write the page subsets and the questions about them; returns the pages kept per document."""
    questions = [
        row
        for row in lines(source / "questions.jsonl")
        if json.loads(row)["doc_name"] in {*FINANCEBENCH_PAGES, *FINANCEBENCH_WHOLE}
    ]
    wanted: dict[str, set[int]] = {doc: set(pages) for doc, pages in FINANCEBENCH_PAGES.items()}
    for row in map(
        json.loads, questions
    ):  # the evidence pages and a neighbour each side (make_filings' default)
        for evidence in row.get("evidence", []):
            page = evidence["evidence_page_num"]
            wanted.setdefault(row["doc_name"], set()).update(range(page - 1, page + 2))
    kept = {}
    for doc in sorted({*wanted, *FINANCEBENCH_WHOLE}):
        pages = lines(source / "docs_text" / f"{doc}.jsonl.gz")
        rows = [
            row
            for row in pages
            if doc in FINANCEBENCH_WHOLE or json.loads(row)["page"] in wanted[doc]
        ]
        write(SAMPLES / "financebench" / "docs_text" / f"{doc}.jsonl.gz", rows)
        kept[doc] = [json.loads(row)["page"] for row in rows]
    write(SAMPLES / "financebench" / "questions.jsonl.gz", questions)
    return kept


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.data.make_samples", description=__doc__.split("\n\n")[0]
    )
    parser.add_argument(
        "--source",
        type=Path,
        required=True,
        help="folder with formula/, gsm8k/, qmsum/, financebench_dev/",
    )
    args = parser.parse_args(argv)
    src = args.source
    train, val = lines(src / "formula" / "train.jsonl"), lines(src / "formula" / "val.jsonl")
    write(EXAMPLES / "train.jsonl", train[:EXAMPLE_TRAIN])
    write(EXAMPLES / "val.jsonl", val[:EXAMPLE_VAL])
    write(SAMPLES / "formula" / "train.jsonl.gz", train[:LEARN_SPEED_TASKS])
    write(
        SAMPLES / "gsm8k" / "test.jsonl.gz", lines(src / "gsm8k" / "test.jsonl")[:GSM8K_QUESTIONS]
    )
    write(
        SAMPLES / "qmsum" / "val.jsonl.gz",
        shortest(lines(src / "qmsum" / "val.jsonl"), QMSUM_MEETINGS),
    )
    meeting = json.loads(lines(src / "qmsum" / "val.jsonl")[MEETING_LINE - 1])
    (EXAMPLES / "meeting.md").write_text(meeting_markdown(meeting), encoding="utf-8")
    annual_report_pdf(EXAMPLES / "annual_report.pdf")
    report = {"financebench_pages": financebench(src / "financebench_dev")}
    print(json.dumps(report))
    return report


if __name__ == "__main__":
    main()
