"""bench.data.make_filings: FinanceBench pages drawn into PDFs land on the page a viewer shows.

The FinanceBench page texts are a sample kept in the repository (bench/data/samples/financebench):
if they are missing the test fails rather than skips, so a broken checkout is noticed."""

from __future__ import annotations

import json

from bench.data.make_filings import check_filing, drawn_lines, main, make_filing_pdf, source_pages
from parallax.logic.quotes import normalise
from parallax.runtime.documents import read_document

DOC = "PEPSICO_2023Q1_EARNINGS"  # two source pages, counted from 0


def test_source_page_n_is_pdf_page_n_plus_1_and_left_out_pages_are_blank(tmp_path):
    path = make_filing_pdf(DOC, [1], tmp_path)
    document = read_document(path)
    assert (path.name, document.kind, len(document.pages)) == (f"{DOC}.pdf", "pdf", 2)
    assert document.pages[0] == ""  # source page 0 was left out
    lines = [normalise(line) for line in drawn_lines(source_pages(DOC)[1]) if line.strip()]
    assert len(lines) > 10 and all(line in normalise(document.pages[1]) for line in lines)
    assert check_filing(path, DOC, [1])["lines_on_right_page"] == 1.0
    assert (
        check_filing(path, DOC, [0])["lines_on_right_page"] == 0.0
    )  # the check can fail: page 0 is blank


def test_main_writes_the_pdfs_and_prints_its_report(tmp_path, capsys):
    report = main(["--out", str(tmp_path), "--docs", "1", "--all-pages", DOC])
    assert json.loads(capsys.readouterr().out) == report
    assert [d["doc_name"] for d in report["documents"]] == ["ADOBE_2015_10K", DOC]
    first = report["documents"][0]
    assert (
        first["pdf_pages"] == 64 and first["pages_with_text"] == 6
    )  # evidence pages 58 and 62, a neighbour each side
    assert report["lines"] > 200 and report["lines_on_right_page"] >= 0.99
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ADOBE_2015_10K.pdf", f"{DOC}.pdf"]
