"""Documents as input: real small files made here (never committed), read back page by page.

What a user notices: the right text on the right page, in order; a quote copied from a page
is found on it again; and every file that cannot be read gets one line saying what to do,
from `read_document` and from `parallax run --input-file` (exit 2, nothing written)."""

from __future__ import annotations

import base64
import io
import json
import random
import zipfile

import docx
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pypdf import PdfReader, PdfWriter
from reportlab.pdfgen.canvas import Canvas
from typer.testing import CliRunner

from parallax.cli import app
from parallax.cli.run import read_task
from parallax.logic.quotes import quote_occurs
from parallax.runtime.documents import Document, DocumentError, document_from_input, read_document
from testkit.scripted_model import scripted

runner = CliRunner()

REPORT = [  # three pages of known text, drawn one line at a time
    ["Annual Report 2023", "Page one: the company at a glance."],
    [
        "Results of operations",
        "Net revenue rose 12% to $5.6 billion, driven by",
        "“strong demand” in the Americas — and lower costs.",
    ],
    ["Outlook", "Page three: we expect capital expenditure of $450 million."],
]
PAGE_TEXTS = (
    "Annual Report 2023\nPage one: the company at a glance.",
    (
        "Results of operations\nNet revenue rose 12% to $5.6 billion, driven by\n"
        "“strong demand” in the Americas — and lower costs."
    ),
    "Outlook\nPage three: we expect capital expenditure of $450 million.",
)


def make_pdf(pages: list[list[str]]) -> bytes:
    buffer = io.BytesIO()
    canvas = Canvas(buffer, invariant=True)
    for lines in pages:
        for row, line in enumerate(lines):
            canvas.drawString(72, 740 - 16 * row, line)
        canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def make_scanned_pdf() -> bytes:
    """A page that is only a picture of text, as a scanner makes it: no text layer."""
    from PIL import Image, ImageDraw
    from reportlab.lib.utils import ImageReader

    image = Image.new("L", (400, 100), 255)
    ImageDraw.Draw(image).text((10, 40), "Net revenue rose 12%", fill=0)
    buffer = io.BytesIO()
    canvas = Canvas(buffer, invariant=True)
    canvas.drawImage(ImageReader(image), 72, 600, width=400, height=100)
    canvas.showPage()
    canvas.save()
    return buffer.getvalue()


def encrypt(pdf: bytes, user_password: str) -> bytes:
    writer = PdfWriter(clone_from=PdfReader(io.BytesIO(pdf)))
    writer.encrypt(user_password=user_password, owner_password="owner", algorithm="AES-256")
    buffer = io.BytesIO()
    writer.write(buffer)
    return buffer.getvalue()


def make_docx() -> bytes:
    document = docx.Document()
    document.add_heading("Master services agreement", level=1)
    document.add_paragraph("The supplier delivers   the service  monthly.")
    table = document.add_table(rows=2, cols=2)
    for (row, col), text in {
        (0, 0): "Fee",
        (0, 1): "Due",
        (1, 0): "$1,200",
        (1, 1): "30 days",
    }.items():
        table.cell(row, col).text = text
    document.add_heading("Termination", level=2)
    document.add_paragraph("Either party may end it with 90 days' notice.")
    buffer = io.BytesIO()
    document.save(buffer)
    return buffer.getvalue()


HTML = (
    b"""<!DOCTYPE html>
<html><head><title>Q3</title><style>p { color: red }</style>"""
    b"""<script>var token = "do-not-read";</script></head>
<body><nav><a href="/">Home</a> <a href="/about">About us</a></nav>
<h1>Quarterly   results</h1>
<p>Revenue was
   <b>$1.2 billion</b>, up 5%.</p>
<ul><li>Stores: 120</li><li>Staff: <i>4,000</i></li></ul>
<table><tr><th>Year</th><th>Sales</th></tr><tr><td>2023</td><td>10</td></tr></table>
<h2>Risks</h2><div>Supply<br>and demand</div><!-- a comment --><script>track()</script>
</body></html>"""
)
HTML_TEXT = (
    "# Quarterly results\n\nRevenue was $1.2 billion, up 5%.\n\n- Stores: 120\n- Staff: 4,000\n\n"
    "Year | Sales\n2023 | 10\n\n## Risks\n\nSupply\nand demand"
)


@pytest.fixture(scope="module")
def report_pdf() -> bytes:
    return make_pdf(REPORT)


# --- reading -------------------------------------------------------------------------------


def test_a_pdf_keeps_its_pages_in_order_with_their_text(report_pdf, tmp_path):
    path = tmp_path / "annual report.pdf"
    path.write_bytes(report_pdf)
    document = read_document(path)
    assert (document.name, document.kind, document.paged) == ("annual report.pdf", "pdf", True)
    assert document.pages == PAGE_TEXTS
    assert document.text == "\n\n".join(PAGE_TEXTS)
    assert read_document(str(path)) == document and read_document(report_pdf).name == ""


def test_a_quote_copied_from_page_2_is_found_on_page_2_only(report_pdf):
    pages = read_document(report_pdf).pages
    quote = (
        'Net revenue rose 12% to $5.6 billion, driven by "strong demand" in the Americas - and'
        " lower costs"
    )
    assert quote_occurs(quote, pages[1])
    assert not quote_occurs(quote, pages[0]) and not quote_occurs(quote, pages[2])
    assert quote_occurs("expect capital expenditure of $450 million", pages[2])


def test_a_pdf_with_an_empty_page_keeps_the_numbering():
    pages = read_document(make_pdf([["first page text"], [], ["third page text"]])).pages
    assert pages == ("first page text", "", "third page text")


def test_a_pdf_encrypted_with_only_an_owner_password_opens(report_pdf):
    assert read_document(encrypt(report_pdf, user_password="")).pages == PAGE_TEXTS


def test_docx_paragraphs_and_tables_in_order_with_headings_as_markdown():
    document = read_document(make_docx(), name="msa.docx")
    assert (document.kind, document.paged, len(document.pages)) == ("docx", False, 1)
    assert (
        document.text
        == "# Master services agreement\n\nThe supplier delivers   the service  monthly.\n\nFee |"
        " Due\n$1,200 | 30 days\n\n## Termination\n\nEither party may end it with 90 days'"
        " notice."
    )


def test_html_drops_scripts_styles_and_navigation_and_keeps_blocks_and_headings():
    document = read_document(HTML, name="q3.html")
    assert (document.kind, document.pages) == ("html", (HTML_TEXT,))
    assert (
        "do-not-read" not in document.text
        and "About us" not in document.text
        and "color" not in document.text
    )


def test_html_headings_and_cells_keep_the_pages_own_spacing():
    page = (
        b"<html><body><h1>is_<wbr>feature_<span>detected</span><br>2023</h1>"
        b"<table><tr><td>net<br>sales</td><td><b>1,2</b>00</td></tr></table></body></html>"
    )
    assert read_document(page).text == "# is_feature_detected 2023\n\nnet sales | 1,200"


def test_a_pdf_behind_a_little_junk_is_a_pdf_and_text_that_mentions_pdf_is_text(report_pdf):
    assert read_document(b"From: scanner@example.org\n\n" + report_pdf).pages == PAGE_TEXTS
    assert read_document(b"Every file starts with %PDF-1.7 and a version.").kind == "text"


def test_text_that_mentions_html_is_not_read_as_html():
    notes = b"# Notes\n\nThe page starts with <html> and a <script> tag.\n"
    document = read_document(notes, name="notes.md")
    assert (document.kind, document.text) == (
        "markdown",
        "# Notes\n\nThe page starts with <html> and a <script> tag.",
    )


def test_html_in_its_declared_charset_is_decoded():
    page = (
        '<html><head><meta charset="windows-1252"></head><body><p>Caf\xe9 revenue:'
        " \u20ac5</p></body></html>"
    )
    assert read_document(page.encode("cp1252")).text == "Café revenue: €5"


def test_html_headings_split_slices_like_markdown():
    from parallax.logic.slicing import split_into_slices

    slices = split_into_slices(read_document(HTML).text, budget=60)
    assert slices[0].startswith("# Quarterly results") and any(
        s.startswith("## Risks") for s in slices
    )


def test_markdown_and_utf8_text_read_as_before_with_modest_cleaning(tmp_path):
    notes = tmp_path / "notes.md"
    notes.write_text("# Decisions\n\nShip the remote.   \n\n\n\nDone.\n", encoding="utf-8")
    assert (read_document(notes).kind, read_document(notes).text) == (
        "markdown",
        "# Decisions\n\nShip the remote.\n\nDone.",
    )
    raw = (
        "\ufeffLine one\x00  \r\nCafé ﬁnance\r\n".encode()
    )  # BOM, a NUL, CRLF, trailing spaces, a ligature
    document = read_document(raw, name="t.txt")
    assert (document.kind, document.pages) == ("text", ("Line one\nCafé finance",))


@pytest.mark.parametrize(
    "data, name, message",
    [
        (
            make_scanned_pdf(),
            "scan.pdf",
            "scan.pdf has no text layer (scanned?): run OCR first, e.g. ocrmypdf in.pdf out.pdf",
        ),
        (
            encrypt(make_pdf(REPORT), user_password="secret"),
            "locked.pdf",
            (
                "locked.pdf is encrypted and needs a password: decrypt it first, e.g. qpdf"
                " --decrypt --password=PASSWORD in.pdf out.pdf"
            ),
        ),
        (
            make_pdf(REPORT)[:900],
            "cut.pdf",
            "cut.pdf is a truncated PDF (it does not end with %%EOF): download or export it again",
        ),
        (
            b"%PDF-1.7\n",
            "",
            (
                "the input is a truncated PDF (it does not end with %%EOF): download or export it"
                " again"
            ),
        ),
        (
            b"hello, not a pdf",
            "report.pdf",
            (
                "report.pdf is named .pdf but is not a PDF (no %PDF header): download or export it"
                " again"
            ),
        ),
        (
            make_docx()[:2000],
            "msa.docx",
            "msa.docx is a damaged DOCX (File is not a zip file): open it and save it again",
        ),
        (
            "café au lait".encode("latin-1"),
            "menu.txt",
            (
                "menu.txt is not UTF-8 text (byte 3): convert it, e.g. iconv -f latin1 -t utf-8"
                " in.txt > out.txt"
            ),
        ),
        (
            "notes".encode("utf-16"),
            "n.txt",
            "n.txt is UTF-16 text, not UTF-8: convert it, e.g. iconv -f utf-16 -t utf-8",
        ),
        (
            random.Random(7).randbytes(4096),
            "blob.bin",
            (
                "blob.bin is not a format Parallax reads: convert it to PDF, DOCX, HTML, Markdown"
                " or UTF-8 text"
            ),
        ),
        (
            b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1" + bytes(600),
            "old.doc",
            "old.doc is an old binary Office file (.doc, .xls, .ppt): save it as DOCX or PDF",
        ),
        (b"", "empty.txt", "empty.txt is empty: give a document with some text"),
        (b" \n\t\n", "", "the input is empty: give a document with some text"),
        (
            b"<html><body><script>x()</script></body></html>",
            "x.html",
            "x.html has no text: give a document with some text",
        ),
    ],
)
def test_files_that_cannot_be_read_get_one_line_saying_what_to_do(data, name, message):
    with pytest.raises(DocumentError) as raised:
        read_document(data, name=name)
    assert str(raised.value) == message and "\n" not in str(raised.value)


def test_a_zip_that_is_not_a_docx_is_refused():
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        archive.writestr("xl/workbook.xml", "<workbook/>")
    with pytest.raises(
        DocumentError,
        match=r"^book.xlsx is a ZIP archive but not a DOCX: save it as one of PDF, DOCX",
    ):
        read_document(buffer.getvalue(), name="book.xlsx")


def test_a_damaged_pdf_that_ends_properly_names_the_damage(report_pdf):
    damaged = report_pdf[:400] + b"\x00garbage" * 50 + report_pdf[-300:]
    try:
        document = read_document(damaged, name="d.pdf")
    except DocumentError as exc:
        assert str(exc).startswith("d.pdf is a damaged PDF (") and str(exc).endswith(
            "download or export it again"
        )
    else:  # pypdf may recover what is left; it must not claim text it does not have
        assert isinstance(document, Document) and "company at a glance" not in document.text


def test_paths_that_are_not_files(tmp_path):
    with pytest.raises(DocumentError, match="^/no/such.pdf: no such file$"):
        read_document("/no/such.pdf")
    with pytest.raises(DocumentError, match="is a folder: give a file$"):
        read_document(tmp_path)


# --- graph input ----------------------------------------------------------------------------


def test_document_from_input_takes_a_path_bytes_or_base64(report_pdf, tmp_path):
    path = tmp_path / "r.pdf"
    path.write_bytes(report_pdf)
    encoded = {"name": "r.pdf", "base64": base64.b64encode(report_pdf).decode()}
    for value in (str(path), report_pdf, encoded):
        assert document_from_input(value).pages == PAGE_TEXTS
    assert document_from_input(encoded).name == "r.pdf"
    assert (
        document_from_input({"base64": base64.b64encode(b"plain words").decode()}).text
        == "plain words"
    )


@pytest.mark.parametrize(
    "value, message",
    [
        (42, 'document must be a path, bytes or {"name": ..., "base64": ...}, got int'),
        (None, 'document must be a path, bytes or {"name": ..., "base64": ...}, got NoneType'),
        (["a.pdf"], 'document must be a path, bytes or {"name": ..., "base64": ...}, got list'),
        (
            {"name": "a.pdf"},
            'document must be a path, bytes or {"name": ..., "base64": ...}, got dict',
        ),
        (
            {"name": "a.pdf", "base64": "not base64!"},
            "document 'a.pdf' is not valid base64: send the file's bytes base64-encoded",
        ),
        ({"name": 3, "base64": "aGk="}, "document name must be text, got int"),
        ("  ", 'document is an empty path: give a file path, bytes or {"name", "base64"}'),
    ],
)
def test_document_from_input_refuses_anything_else_with_one_line(value, message):
    with pytest.raises(DocumentError) as raised:
        document_from_input(value)
    assert str(raised.value) == message


FUZZ = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@FUZZ
@given(
    st.binary(max_size=3000), st.sampled_from(["", "x.pdf", "x.docx", "x.html", "x.md", "x.txt"])
)
def test_no_bytes_end_in_anything_but_a_document_or_a_document_error(data, name):
    try:
        assert isinstance(read_document(data, name=name), Document)
    except DocumentError as exc:
        assert "\n" not in str(exc)


@FUZZ
@given(st.data())
def test_a_damaged_pdf_or_docx_never_ends_in_a_traceback(report_pdf, data):
    original = data.draw(st.sampled_from([report_pdf, make_docx()]))
    damaged = bytearray(original)
    for _ in range(data.draw(st.integers(1, 30))):
        damaged[data.draw(st.integers(0, len(damaged) - 1))] = data.draw(st.integers(0, 255))
    try:
        read_document(bytes(damaged[: data.draw(st.integers(1, len(damaged)))]))
    except DocumentError as exc:
        assert "\n" not in str(exc)


# --- the CLI --------------------------------------------------------------------------------


def test_read_task_gives_a_pdfs_pages_and_none_for_other_formats(report_pdf, tmp_path):
    pdf, md = tmp_path / "r.pdf", tmp_path / "n.md"
    pdf.write_bytes(report_pdf)
    md.write_text("# Notes\n\nShip it.", encoding="utf-8")
    assert read_task(None, pdf) == ("\n\n".join(PAGE_TEXTS), list(PAGE_TEXTS))
    assert read_task(None, md) == ("# Notes\n\nShip it.", None)
    assert read_task("plain task", None) == ("plain task", None)


def test_run_puts_a_pdfs_pages_into_the_graph_input_and_nothing_for_other_files(
    report_pdf, tmp_path, monkeypatch
):
    import typer

    import parallax.cli.run as run_module

    sent = []

    def finish(name, payload, thread_id, context, as_json):
        sent.append((name, payload))
        raise typer.Exit(0)

    monkeypatch.setattr(run_module, "_finish", finish)
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    pdf, html = tmp_path / "r.pdf", tmp_path / "q3.html"
    pdf.write_bytes(report_pdf)
    html.write_bytes(HTML)
    for path in (pdf, html):
        assert (
            runner.invoke(
                app, ["run", "-f", str(path), "--mode", "section", "-q", "revenue?"]
            ).exit_code
            == 0
        )
    (name, from_pdf), (_, from_html) = sent
    assert (
        name == "solve"
        and from_pdf["pages"] == list(PAGE_TEXTS)
        and from_pdf["task"] == "\n\n".join(PAGE_TEXTS)
    )
    assert "pages" not in from_html and from_html["task"] == HTML_TEXT


BAD_FILES = {
    "scan.pdf": (
        make_scanned_pdf(),
        "has no text layer (scanned?): run OCR first, e.g. ocrmypdf in.pdf out.pdf",
    ),
    "locked.pdf": (
        encrypt(make_pdf(REPORT), "secret"),
        (
            "is encrypted and needs a password: decrypt it first, e.g. qpdf --decrypt"
            " --password=PASSWORD in.pdf out.pdf"
        ),
    ),
    "cut.pdf": (
        make_pdf(REPORT)[:900],
        "is a truncated PDF (it does not end with %%EOF): download or export it again",
    ),
    "blob.bin": (
        random.Random(3).randbytes(2048),
        "is not a format Parallax reads: convert it to PDF, DOCX, HTML, Markdown or UTF-8 text",
    ),
    "menu.txt": (
        "café".encode("latin-1"),
        "is not UTF-8 text (byte 3): convert it, e.g. iconv -f latin1 -t utf-8 in.txt > out.txt",
    ),
    "empty.pdf": (b"", "is empty: give a document with some text"),
}


@pytest.mark.parametrize("name", sorted(BAD_FILES))
def test_cli_refuses_each_bad_file_with_one_line_exit_2_and_writes_nothing(
    name, tmp_path, monkeypatch
):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    data, message = BAD_FILES[name]
    path = tmp_path / name
    path.write_bytes(data)
    model_ctx, calls = scripted(lambda p, t, i: "{}")
    result = runner.invoke(
        app,
        ["run", "--input-file", str(path), "--mode", "section", "-q", "revenue?"],
        obj=model_ctx,
    )
    assert result.exit_code == 2, result.output
    assert result.output.strip() == f"error: {path} {message}"  # one line, no traceback
    assert calls == [] and not home.exists()


def test_cli_refuses_a_bad_document_on_stdin(tmp_path, monkeypatch):
    home = tmp_path / "home"
    monkeypatch.setenv("PARALLAX_HOME", str(home))
    result = runner.invoke(app, ["run", "-f", "-"], input=random.Random(5).randbytes(1000))
    assert result.exit_code == 2
    assert result.output.strip().endswith(
        "the input is not a format Parallax reads: convert it to PDF, DOCX, HTML, "
        "Markdown or UTF-8 text"
    )
    assert len(result.output.strip().splitlines()) == 1 and not home.exists()


def test_a_pdf_runs_in_section_mode_and_its_slices_carry_the_page_text(
    report_pdf, tmp_path, monkeypatch
):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
    path = tmp_path / "report.pdf"
    path.write_bytes(report_pdf)

    def script(prompt, t, i):
        if "Net revenue rose 12%" in prompt and "relevant" in prompt:
            return json.dumps(
                {
                    "relevant": True,
                    "points": [
                        {
                            "quote": "Net revenue rose 12% to $5.6 billion",
                            "point": "revenue grew 12% to $5.6 billion",
                        }
                    ],
                }
            )
        return json.dumps(
            {
                "relevant": False,
                "points": [],
                "safe": True,
                "reason": "",
                "reasoning": "r",
                "answer": "x",
            }
        )

    model_ctx, calls = scripted(script)
    result = runner.invoke(
        app,
        ["run", "-f", str(path), "--mode", "section", "-q", "What was revenue?", "--json"],
        obj=model_ctx,
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert "revenue grew 12% to $5.6 billion" in out["answer"]
    assert out["verification"]["facts"]["verified"] >= 1
    assert any("Net revenue rose 12% to $5.6 billion, driven by" in prompt for prompt, _ in calls)
