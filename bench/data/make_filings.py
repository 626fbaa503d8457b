"""Make real PDFs from FinanceBench's page texts, so document benchmarks read what users bring.

Why: `parallax run --input-file report.pdf` and the extraction bench must be measured on PDFs,
not on text we already have, and the repository keeps no binaries. FinanceBench gives each
filing's pages as text (`docs_text/*.jsonl.gz`, lines {"doc_name", "page", "text"}, `page` counted
from 0, the questions' `evidence_page_num`; the repository keeps a sample of pages in
bench/data/samples/financebench, `--data` names a full copy);
this script draws them back into a PDF, one PDF page per source page, so PDF page N+1
(what a viewer shows) holds source page N. Pages left out of a subset are blank, which keeps
that numbering and gives a reader nothing to quote from them.

The text is drawn with reportlab's Helvetica: runs of spaces from `pdftotext -layout` are
collapsed, long lines wrapped, and the few characters the standard fonts cannot draw are
folded (bullets to "-", check boxes to "[ ]"/"[x]", others outside cp1252 to "?"). The check
reads each PDF back with `parallax.runtime.documents.read_document` and counts the drawn
lines found on the right page (whitespace and case forgiven, as `logic/quotes.py` does), and
how many source lines came through without the fold (`source_lines_unchanged`).

    python -m bench.data.make_filings                 # the questions' evidence pages and neighbours
    python -m bench.data.make_filings --all-pages PEPSICO_2023Q1_EARNINGS --out /tmp/filings python
    -m bench.data.make_filings --data /path/to/financebench_dev   # a full copy: every document
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

from bench.samples import SAMPLES, read_jsonl
from parallax.logic.quotes import normalise

DATA = SAMPLES / "financebench"
OUT = Path(__file__).with_name("filings")
PAGE_W, PAGE_H, MARGIN = 612.0, 792.0, 40.0  # US letter, in points
FONT, MAX_SIZE, MIN_SIZE = "Helvetica", 8.0, 3.0

_FOLD = str.maketrans(
    {
        "\u2022": "-",
        "\u25e6": "-",
        "\u2610": "[ ]",
        "\u2612": "[x]",
        "\u2611": "[x]",
        "\u2011": "-",
        "\u2154": "2/3",
        "\u00a0": " ",
    }
)


def source_pages(doc_name: str, data: Path = DATA) -> dict[int, str]:
    """FinanceBench's page texts of one document: {page counted from 0: text} (a sample holds some
    pages)."""
    path = data / "docs_text" / f"{doc_name}.jsonl.gz"
    if not path.is_file():
        raise FileNotFoundError(f"no page texts for {doc_name!r} under {path.parent}")
    return {row["page"]: row["text"] for row in read_jsonl(path)}


def drawn_lines(text: str) -> list[str]:
    """A source page as the lines drawn into the PDF: spaces collapsed, folded to what Helvetica
    draws."""
    lines = []
    for line in text.translate(_FOLD).splitlines():
        line = " ".join(line.split())
        lines.append("".join(ch if _drawable(ch) else "?" for ch in line))
    return lines


def _drawable(ch: str) -> bool:
    try:
        ch.encode("cp1252")
    except UnicodeEncodeError:
        return False
    return True


def _draw_page(canvas, lines: list[str]) -> None:
    from reportlab.lib.utils import simpleSplit

    width = PAGE_W - 2 * MARGIN
    size = MAX_SIZE
    while True:  # shrink the font until the wrapped page fits
        wrapped = [part for line in lines for part in simpleSplit(line, FONT, size, width) or [""]]
        leading = size * 1.2
        if len(wrapped) * leading <= PAGE_H - 2 * MARGIN or size <= MIN_SIZE:
            break
        size = max(MIN_SIZE, size * 0.9)
    canvas.setFont(FONT, size)
    y = PAGE_H - MARGIN - size
    for part in wrapped:
        if part:
            canvas.drawString(MARGIN, y, part)
        y -= leading
    canvas.showPage()


def make_filing_pdf(
    doc_name: str,
    pages: list[int] | None,
    out_dir: Path | str,
    appendix: list[str] | None = None,
    data: Path = DATA,
) -> Path:
    """Write `out_dir/doc_name.pdf`: PDF page N+1 holds source page N; pages not in `pages` are
    blank. `pages=None` takes every page; `appendix` texts are drawn as further pages after them (a
    benchmark's planted restatement). Returns the PDF's path."""
    from reportlab.pdfgen.canvas import Canvas

    texts = source_pages(doc_name, data)
    wanted = sorted(texts) if pages is None else sorted(set(pages))
    missing = [p for p in wanted if p not in texts]
    if missing:
        raise ValueError(
            f"{doc_name} has no page(s) {missing} under {data} (it has {min(texts)}-{max(texts)})"
        )
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{doc_name}.pdf"
    canvas = Canvas(str(path), pagesize=(PAGE_W, PAGE_H), invariant=True)  # same bytes on every run
    canvas.setTitle(doc_name)
    chosen = set(wanted)
    for page in range(max(wanted) + 1):
        _draw_page(canvas, drawn_lines(texts[page]) if page in chosen else [])
    for text in appendix or []:
        _draw_page(canvas, drawn_lines(text))
    canvas.save()
    return path


def check_filing(path: Path, doc_name: str, pages: list[int] | None, data: Path = DATA) -> dict:
    """Read the PDF back: how many of the drawn lines are found on the PDF page that should hold
    them."""
    from parallax.runtime.documents import read_document

    texts = source_pages(doc_name, data)
    document = read_document(path)
    wanted = sorted(texts) if pages is None else sorted(set(pages))
    lines = found = found_unfolded = 0
    for page in wanted:
        extracted = normalise(document.pages[page]) if page < len(document.pages) else ""
        for source, drawn in zip(texts[page].splitlines(), drawn_lines(texts[page]), strict=True):
            if normalise(drawn):
                lines += 1
                found += normalise(drawn) in extracted
                found_unfolded += normalise(source) in extracted
    return {
        "doc_name": doc_name,
        "pdf_pages": len(document.pages),
        "pages_with_text": len(wanted),
        "lines": lines,
        "lines_on_right_page": round(found / lines, 4) if lines else None,
        "source_lines_unchanged": round(found_unfolded / lines, 4) if lines else None,
    }


def evidence_pages(neighbours: int = 1, data: Path = DATA) -> dict[str, list[int]]:
    """The FinanceBench questions' evidence pages per document, with `neighbours` pages either side
    (those the page texts have: a sample keeps the evidence pages and one neighbour each side)."""
    chosen: dict[str, set[int]] = {}
    questions = data / "questions.jsonl"
    for row in read_jsonl(questions if questions.is_file() else questions.with_suffix(".jsonl.gz")):
        texts = source_pages(row["doc_name"], data)
        for evidence in row.get("evidence", []):
            page = evidence["evidence_page_num"]
            chosen.setdefault(row["doc_name"], set()).update(
                p for p in range(page - neighbours, page + neighbours + 1) if p in texts
            )
    return {doc: sorted(pages) for doc, pages in sorted(chosen.items())}


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--out", type=Path, default=OUT, help="folder for the PDFs (default: bench/data/filings)"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help=(
            "FinanceBench folder: questions.jsonl[.gz] and docs_text/ (default: the repository's"
            " sample)"
        ),
    )
    parser.add_argument(
        "--docs", type=int, default=0, help="how many documents (default 0: all the data has)"
    )
    parser.add_argument(
        "--all-pages",
        nargs="*",
        default=[],
        metavar="DOC",
        help="documents to draw whole (every page), besides the evidence subsets",
    )
    args = parser.parse_args(argv)
    started = time.perf_counter()
    plan: dict[str, list[int] | None] = dict(
        list(evidence_pages(data=args.data).items())[: args.docs or None]
    )
    plan.update({doc: None for doc in args.all_pages})
    reports = []
    for doc, pages in plan.items():
        path = make_filing_pdf(doc, pages, args.out, data=args.data)
        reports.append(
            {
                **check_filing(path, doc, pages, args.data),
                "pdf": str(path),
                "bytes": path.stat().st_size,
            }
        )
    lines = sum(r["lines"] for r in reports)
    found = sum(round(r["lines_on_right_page"] * r["lines"]) for r in reports if r["lines"])
    unchanged = sum(round(r["source_lines_unchanged"] * r["lines"]) for r in reports if r["lines"])
    report = {
        "documents": reports,
        "pages_with_text": sum(r["pages_with_text"] for r in reports),
        "pdf_pages": sum(r["pdf_pages"] for r in reports),
        "lines": lines,
        "lines_on_right_page": round(found / lines, 4) if lines else None,
        "source_lines_unchanged": round(unchanged / lines, 4) if lines else None,
        "seconds": round(time.perf_counter() - started, 2),
    }
    print(json.dumps(report, indent=2))
    return report


if __name__ == "__main__":
    main()
