"""A document is a stranger's file: its bytes, pages, what it inflates to, its text and its parse
time are bounded, and one over a bound is refused in one line naming the bound and the setting that
raises it.

The hostile files are built here, byte by byte (testkit/hostile_documents.py): a DOCX whose ZIP
declares 200 MB, one whose ZIP lies about its sizes, a PDF of many pages, a PDF whose one content
stream inflates to 70 MB.
"""

from __future__ import annotations

import base64
import os

import pytest

from parallax.runtime.documents import (
    DocumentError,
    DocumentLimits,
    document_from_input,
    read_document,
)
from parallax.runtime.settings import reload_settings
from testkit import hostile_documents as hostile


def _refused(data: bytes, limits: DocumentLimits | None = None, name: str = "") -> str:
    with pytest.raises(DocumentError) as caught:
        read_document(data, name=name, limits=limits)
    message = str(caught.value)
    assert "\n" not in message
    return message


def test_the_hostile_files_are_what_they_say_and_read_within_their_bounds():
    assert (
        read_document(hostile.docx(hostile.docx_xml("Net revenue rose 12%."))).text
        == "Net revenue rose 12%."
    )
    assert read_document(hostile.many_pages_pdf(3)).pages == ("page", "page", "page")
    assert read_document(hostile.inflating_pdf(1_000_000, b"Revenue")).text == "Revenue"


def test_a_zip_bomb_docx_is_refused_by_what_its_zip_declares():
    bomb = hostile.docx(hostile.docx_xml("hello", padding=200_000_000))
    assert len(bomb) < 300_000
    assert (
        _refused(bomb)
        == "the input unpacks to 200,000,935 bytes, as its ZIP declares, over the limit of"
        " 64,000,000 "
        "(PARALLAX_DOCUMENT_MAX_UNPACKED_BYTES): send a smaller document"
    )


def test_a_docx_whose_zip_lies_about_its_sizes_is_refused_before_any_xml_parser_reads_it():
    liar = hostile.docx_lying_about_sizes(
        "hello", inflated_bytes=50_000_000
    )  # declares 1,000 bytes
    assert "whose ZIP lies about its sizes (Bad CRC-32 for file 'word/document.xml')" in _refused(
        liar
    )
    # and what it really unpacks to counts, not what it declares: a small limit is met by the real
    # sizes
    honest = hostile.docx(hostile.docx_xml("hello", padding=5_000))
    assert "unpacks to" in _refused(honest, DocumentLimits(max_unpacked_bytes=3_000))


def test_a_pdf_with_more_pages_than_the_limit_is_refused_before_its_text_is_read():
    assert (
        _refused(hostile.many_pages_pdf(2_001))
        == "the input has 2,001 pages, over the limit of 2,000 (PARALLAX_DOCUMENT_MAX_PAGES): "
        "send the pages the question is about"
    )


def test_a_pdf_stream_that_inflates_past_the_limit_is_refused():
    bomb = hostile.inflating_pdf(70_000_000)  # 68 KB on disk; pypdf took 9.7 s on its one page
    assert len(bomb) < 100_000
    assert _refused(bomb).startswith("the input inflates to more than 70,000,0")
    assert "over the limit of 64,000,000 (PARALLAX_DOCUMENT_MAX_UNPACKED_BYTES)" in _refused(bomb)


def test_text_past_the_character_limit_is_refused_for_every_kind():
    limits = DocumentLimits(max_chars=100)
    assert (
        "yields more than 104 characters of text by page 26, over the limit of 100"
        " (PARALLAX_DOCUMENT_MAX_CHARS)" in _refused(hostile.many_pages_pdf(30), limits)
    )
    assert "(PARALLAX_DOCUMENT_MAX_CHARS)" in _refused(
        hostile.docx(hostile.docx_xml("x" * 101)), limits
    )
    assert "yields 101 characters" in _refused(b"y" * 101, limits)
    assert "(PARALLAX_DOCUMENT_MAX_CHARS)" in _refused(
        b"<html><p>" + b"z" * 101 + b"</p></html>", limits
    )


def test_a_parse_that_takes_too_long_is_killed_and_refused():
    message = _refused(hostile.many_pages_pdf(1_500), DocumentLimits(parse_s=0.2))
    assert (
        message == "the input took too long to read (seconds), over the limit of 0.2"
        " (PARALLAX_DOCUMENT_PARSE_S): send a smaller or simpler document"
    )


def test_a_parse_that_needs_more_memory_than_its_limit_is_refused():
    message = _refused(
        hostile.inflating_pdf(60_000_000),
        DocumentLimits(parse_memory_mb=64, max_unpacked_bytes=10**9),
    )
    assert (
        "needs more memory to read (MB), over the limit of 64 (PARALLAX_DOCUMENT_PARSE_MEMORY_MB)"
        in message
    )


def test_bytes_over_the_limit_are_refused_before_they_are_read_or_decoded(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_DOCUMENT_MAX_BYTES", "1000")
    reload_settings()
    try:
        assert (
            _refused(b"a" * 1_001)
            == "the input is 1,001 bytes, over the limit of 1,000 (PARALLAX_DOCUMENT_MAX_BYTES): "
            "send a smaller document"
        )
        huge = tmp_path / "huge.txt"
        with huge.open(
            "wb"
        ) as sparse:  # 10 GB on paper, nothing on disk: refused by its size, never read
            sparse.truncate(10_000_000_000)
        with pytest.raises(
            DocumentError, match=r"huge.txt is 10,000,000,000 bytes, over the limit of 1,000"
        ):
            read_document(huge)
        with pytest.raises(
            DocumentError, match=r"^document 'a.txt' is 1,500 bytes, over the limit of 1,000"
        ):
            document_from_input(
                {"name": "a.txt", "base64": base64.b64encode(b"a" * 1_500).decode()}
            )
        assert (
            document_from_input(
                {"name": "a.txt", "base64": base64.b64encode(b"a" * 999).decode()}
            ).text
            == "a" * 999
        )
    finally:
        monkeypatch.delenv("PARALLAX_DOCUMENT_MAX_BYTES")
        reload_settings()


def test_the_parser_child_sees_no_keys(monkeypatch):
    """The child Python gets no environment: a parser bug never meets OPENAI_API_KEY or a database
    URL."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-secret-of-the-server")
    from parallax.runtime import documents

    seen: dict[str, dict[str, str]] = {}
    real = documents.subprocess.Popen

    def spy(*args, **kwargs):
        seen["env"] = kwargs["env"]
        return real(*args, **kwargs)

    monkeypatch.setattr(documents.subprocess, "Popen", spy)
    read_document(hostile.many_pages_pdf(1))
    assert set(seen["env"]) == {"PATH", "LANG"} and "sk-secret-of-the-server" not in str(
        seen["env"]
    )
    assert os.environ["OPENAI_API_KEY"] == "sk-secret-of-the-server"


def test_documents_read_at_once_each_get_their_own_text():
    from concurrent.futures import ThreadPoolExecutor

    files = [hostile.docx(hostile.docx_xml(f"document number {n}")) for n in range(4)]
    files += [hostile.inflating_pdf(1_000, f"pdf number {n}".encode()) for n in range(4)]
    with ThreadPoolExecutor(8) as pool:
        texts = list(pool.map(lambda data: read_document(data).text, files))
    assert texts == [f"document number {n}" for n in range(4)] + [
        f"pdf number {n}" for n in range(4)
    ]


async def test_the_graph_and_the_async_api_parse_a_document_off_the_event_loop(monkeypatch):
    """The parse blocks its caller until the child answers: the route node and `asolve` wait for it
    in a thread."""
    import asyncio
    import threading

    import parallax
    from parallax.graphs.solve import graph
    from parallax.runtime import documents
    from testkit.scripted_model import scripted

    threads: list[threading.Thread] = []

    def parse(data, name, label, limits):
        threads.append(threading.current_thread())
        raise DocumentError(f"{label} is refused here")

    monkeypatch.setattr(documents, "_parse_bounded", parse)
    loop_thread = threading.current_thread()
    ctx, calls = scripted(lambda p, t, i: "{}")
    document = {"name": "r.pdf", "base64": base64.b64encode(hostile.many_pages_pdf(1)).decode()}
    with pytest.raises(Exception, match="is refused here"):
        await graph.ainvoke({"document": document, "question": "revenue?"}, context=ctx)
    with pytest.raises(parallax.InvalidInput, match="is refused here"):
        await parallax.asolve(document=hostile.many_pages_pdf(1), question="revenue?")
    assert len(threads) == 2 and loop_thread not in threads and calls == []
    assert asyncio.get_running_loop().is_running()
