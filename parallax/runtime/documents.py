"""A user's document (PDF, DOCX, HTML, Markdown, text) read into page texts, within bounds.

Parsers run in a confined child process; every failure is a one-line `DocumentError`.
See docs/internals/untrusted-input.md#documents.
"""

from __future__ import annotations

import base64
import binascii
import dataclasses
import io
import json
import logging
import os
import re
import subprocess
import sys
import threading
import warnings
import zipfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:
    from bs4 import Tag
    from docx.document import Document as DocxDocument

KINDS = ("pdf", "docx", "html", "markdown", "text")
SUPPORTED = "PDF, DOCX, HTML, Markdown or UTF-8 text"

_OLE2 = b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1"  # the container of .doc, .xls and .ppt
_LIGATURES = str.maketrans(
    {
        "\ufb00": "ff",
        "\ufb01": "fi",
        "\ufb02": "fl",
        "\ufb03": "ffi",
        "\ufb04": "ffl",
        "\ufb05": "st",
        "\ufb06": "st",
        "\u00ad": None,
    }
)
_CONTROL = re.compile(r"[\x00-\x08\x0b\x0e-\x1f\x7f]")
_TRAILING = re.compile(r"[ \t\u00a0]+$", re.MULTILINE)
_BLANK_RUNS = re.compile(r"\n{3,}")


class DocumentError(ValueError):
    """One line: what is wrong with the file and what to do about it (the CLI prints it, exit 2)."""


@dataclass(frozen=True)
class DocumentLimits:
    """How much of a stranger's file is read (the PARALLAX_DOCUMENT_* settings;
    docs/configuration.md)."""

    max_bytes: int = 20_000_000
    max_pages: int = 2_000
    max_unpacked_bytes: int = 64_000_000
    max_chars: int = 2_000_000
    parse_s: float = 30.0
    parse_memory_mb: int = 1024

    @classmethod
    def from_settings(cls) -> DocumentLimits:
        from parallax.runtime.settings import load

        settings = load()
        return cls(
            max_bytes=settings.document_max_bytes,
            max_pages=settings.document_max_pages,
            max_unpacked_bytes=settings.document_max_unpacked_bytes,
            max_chars=settings.document_max_chars,
            parse_s=settings.document_parse_s,
            parse_memory_mb=settings.document_parse_memory_mb,
        )


def _over(label: str, what: str, bound: int | float, setting: str, fix: str) -> DocumentError:
    """The one line of a document over a bound: which bound, its value, the setting that raises
    it."""
    return DocumentError(f"{label} {what}, over the limit of {bound:,} (PARALLAX_{setting}): {fix}")


@dataclass(frozen=True)
class Document:
    name: str
    """The file name, or "" for bytes without a name."""
    kind: str
    """One of KINDS: "pdf" | "docx" | "html" | "markdown" | "text"."""
    pages: tuple[str, ...]
    """pages[0] is page 1; formats without pages have exactly one entry."""

    @property
    def paged(self) -> bool:
        """True only for PDFs: their page numbers are the ones a viewer shows."""
        return self.kind == "pdf"

    @property
    def text(self) -> str:
        return "\n\n".join(self.pages)


def clean(text: str) -> str:
    """Modest normalisation that keeps line breaks: no NULs or control characters, no ligatures
    or soft hyphens, no trailing spaces, at most one blank line in a row, no blank edges."""
    text = text.replace("\r\n", "\n").replace("\r", "\n").replace("\f", "\n").replace("\v", "\n")
    text = _CONTROL.sub("", text.translate(_LIGATURES))
    return _BLANK_RUNS.sub("\n\n", _TRAILING.sub("", text)).strip()


def _reason(exc: BaseException) -> str:
    """A library's exception as a few words for the one-line message."""
    text = " ".join(str(exc).split()) or type(exc).__name__
    return text if len(text) <= 80 else text[:77] + "..."


@contextmanager
def _quiet() -> Iterator[None]:
    """Mute the readers' warnings and log lines (pypdf logs about damaged files) while they read."""
    loggers = [logging.getLogger(n) for n in ("pypdf", "docx", "bs4")]
    levels = [lg.level for lg in loggers]
    try:
        for lg in loggers:
            lg.setLevel(logging.CRITICAL + 1)
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            yield
    finally:
        for lg, level in zip(loggers, levels, strict=True):
            lg.setLevel(level)


# --- format detection -------------------------------------------------------------------


def _looks_binary(data: bytes) -> bool:
    """More than 5% control bytes (NULs included) in the first 8 KiB: a stray NUL in text is not
    enough."""
    head = data[:8192]
    controls = sum(1 for b in head if b < 9 or 13 < b < 32 or b == 127)
    return controls > 0.05 * len(head)


def detect_kind(data: bytes, name: str, label: str) -> str:
    """The format from the content, then from the suffix; DocumentError when it is none we read."""
    suffix = Path(name).suffix.lower()
    head = data[:1024]
    # A PDF may have a little junk before its header; text that only mentions "%PDF-" does not end
    # with %%EOF.
    if data.startswith(b"%PDF-") or (b"%PDF-" in head and b"%%EOF" in data[-2048:]):
        return "pdf"
    if data.startswith(b"PK\x03\x04"):
        try:
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                names = set(archive.namelist())
        except (zipfile.BadZipFile, ValueError, OSError) as exc:
            if suffix == ".docx" or b"word/" in data:
                raise DocumentError(
                    f"{label} is a damaged DOCX ({_reason(exc)}): open it and save it again"
                ) from None
            raise DocumentError(
                f"{label} is a damaged ZIP archive, not a format Parallax reads ({SUPPORTED})"
            ) from None
        if "word/document.xml" in names:
            return "docx"
        raise DocumentError(
            f"{label} is a ZIP archive but not a DOCX: save it as one of {SUPPORTED}"
        )
    if data.startswith(_OLE2):
        raise DocumentError(
            f"{label} is an old binary Office file (.doc, .xls, .ppt): save it as DOCX or PDF"
        )
    if suffix == ".pdf":
        raise DocumentError(
            f"{label} is named .pdf but is not a PDF (no %PDF header): download or export it again"
        )
    if suffix == ".docx":
        raise DocumentError(
            f"{label} is named .docx but is not a DOCX (not a ZIP archive): save it again from Word"
        )
    sniff = head.decode("latin-1").lstrip("\ufeff\xef\xbb\xbf \t\r\n").lower()
    if (
        sniff.startswith(("<!doctype html", "<html", "<head", "<body"))
        or (sniff.startswith(("<?xml", "<!--")) and "<html" in sniff)
        or (suffix in (".html", ".htm", ".xhtml") and not _looks_binary(data))
    ):
        return "html"
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):  # UTF-16 text with its byte order mark
        raise DocumentError(
            f"{label} is UTF-16 text, not UTF-8: convert it, e.g. iconv -f utf-16 -t utf-8"
        )
    if _looks_binary(data):
        raise DocumentError(f"{label} is not a format Parallax reads: convert it to {SUPPORTED}")
    if suffix in (".md", ".markdown"):
        return "markdown"
    return "text"


# --- the readers: bytes -> page texts ----------------------------------------------------


def _content_bytes(page: Any) -> int:
    """Bytes a PDF page's content streams decode to (what its text is extracted from)."""
    contents = page.get("/Contents")
    contents = contents.get_object() if contents is not None else None
    streams = (
        list(contents) if isinstance(contents, list) else [contents] if contents is not None else []
    )
    return sum(len(stream.get_object().get_data()) for stream in streams)


def _read_pdf(data: bytes, label: str, limits: DocumentLimits) -> list[str]:
    from pypdf import PdfReader
    from pypdf.errors import DependencyError, FileNotDecryptedError

    encrypted = (
        f"{label} is encrypted and needs a password: decrypt it first, "
        "e.g. qpdf --decrypt --password=PASSWORD in.pdf out.pdf"
    )
    try:
        reader = PdfReader(io.BytesIO(data), strict=False)
        if reader.is_encrypted and not reader.decrypt(""):  # an owner password alone still opens
            raise DocumentError(encrypted)
        count = len(reader.pages)
        if count > limits.max_pages:
            raise _over(
                label,
                f"has {count:,} pages",
                limits.max_pages,
                "DOCUMENT_MAX_PAGES",
                "send the pages the question is about",
            )
        pages: list[str] = []
        unpacked = chars = 0
        for page in reader.pages:
            unpacked += _content_bytes(page)
            if unpacked > limits.max_unpacked_bytes:
                raise _over(
                    label,
                    f"inflates to more than {unpacked:,} bytes of page content by page"
                    f" {len(pages) + 1}",
                    limits.max_unpacked_bytes,
                    "DOCUMENT_MAX_UNPACKED_BYTES",
                    "send a smaller document",
                )
            pages.append(page.extract_text() or "")
            chars += len(pages[-1])
            if chars > limits.max_chars:
                raise _over(
                    label,
                    f"yields more than {chars:,} characters of text by page {len(pages)}",
                    limits.max_chars,
                    "DOCUMENT_MAX_CHARS",
                    "send the pages the question is about",
                )
        return pages
    except DocumentError:
        raise
    except FileNotDecryptedError:
        raise DocumentError(encrypted) from None
    except DependencyError as exc:
        raise DocumentError(
            f"{label} cannot be decrypted here ({_reason(exc)}): decrypt it first, e.g. qpdf"
            " --decrypt"
        ) from None
    except RecursionError:
        raise DocumentError(
            f"{label} is a damaged PDF (nested too deeply): download or export it again"
        ) from None
    except MemoryError:  # over the parser's address-space limit: said as that, not as damage
        raise
    except Exception as exc:  # noqa: BLE001 - a damaged file can make pypdf raise almost anything
        if b"%%EOF" not in data[-2048:]:
            raise DocumentError(
                f"{label} is a truncated PDF (it does not end with %%EOF): download or export it"
                " again"
            ) from None
        raise DocumentError(
            f"{label} is a damaged PDF ({_reason(exc)}): download or export it again"
        ) from None


def _docx_blocks(document: DocxDocument) -> Iterator[str]:
    """Paragraphs and tables in document order; headings as `#` lines, a table row as `a | b`."""
    from docx.table import Table

    for block in document.iter_inner_content():
        if isinstance(block, Table):
            rows = []
            for row in block.rows:
                cells: list[str] = []
                for cell in row.cells:
                    text = " ".join(cell.text.split())
                    if (
                        not cells or text != cells[-1]
                    ):  # a merged cell repeats in every column it spans
                        cells.append(text)
                rows.append(" | ".join(cells))
            yield "\n".join(rows)
            continue
        text = block.text.strip()
        style = (block.style.name if block.style is not None else "") or ""
        level = (
            1
            if style == "Title"
            else int(style[8:])
            if re.fullmatch(r"Heading [1-6]", style)
            else 0
        )
        yield f"{'#' * level} {' '.join(text.split())}" if level and text else text


def _check_zip(data: bytes, label: str, limits: DocumentLimits) -> None:
    """A DOCX's ZIP unpacks to no more than the limit, as its headers declare and as it actually
    inflates (a zip bomb either declares a huge size or lies about it; zipfile stops a member at its
    declared size and then fails its CRC, so a lie is caught here, before any XML parser sees the
    member)."""
    bound = limits.max_unpacked_bytes
    try:
        with zipfile.ZipFile(io.BytesIO(data)) as archive:
            members = archive.infolist()
            declared = sum(member.file_size for member in members)
            if declared > bound:
                raise _over(
                    label,
                    f"unpacks to {declared:,} bytes, as its ZIP declares",
                    bound,
                    "DOCUMENT_MAX_UNPACKED_BYTES",
                    "send a smaller document",
                )
            actual = 0
            for member in members:
                with archive.open(member) as unpacking:
                    while chunk := unpacking.read(1 << 20):
                        actual += len(chunk)
                        if actual > bound:
                            raise _over(
                                label,
                                f"unpacks to more than {actual:,} bytes",
                                bound,
                                "DOCUMENT_MAX_UNPACKED_BYTES",
                                "send a smaller document",
                            )
    except DocumentError:
        raise
    except (
        zipfile.BadZipFile,
        zipfile.LargeZipFile,
        NotImplementedError,
        EOFError,
        OSError,
        ValueError,
    ) as exc:
        raise DocumentError(
            f"{label} is a damaged DOCX, or one whose ZIP lies about its sizes ({_reason(exc)}): "
            "open it and save it again"
        ) from None


def _read_docx(data: bytes, label: str, limits: DocumentLimits) -> list[str]:
    import docx

    _check_zip(data, label, limits)
    try:
        blocks = [b for b in _docx_blocks(docx.Document(io.BytesIO(data))) if b.strip()]
    except MemoryError:  # over the parser's address-space limit: said as that, not as damage
        raise
    except Exception as exc:  # noqa: BLE001 - python-docx, lxml and zipfile each raise their own
        raise DocumentError(
            f"{label} is a damaged DOCX ({_reason(exc)}): open it and save it again"
        ) from None
    return ["\n\n".join(blocks)]


_DROP = ("script", "style", "nav", "noscript", "template", "head", "svg", "iframe", "object")
_HEADINGS = {f"h{n}": n for n in range(1, 7)}
_BLOCKS = {
    "p",
    "div",
    "section",
    "article",
    "main",
    "header",
    "footer",
    "aside",
    "blockquote",
    "address",
    "dl",
    "dt",
    "dd",
    "figure",
    "figcaption",
    "form",
    "fieldset",
    "details",
    "summary",
    "hr",
    "body",
    "html",
    "caption",
}


class _HtmlText:
    """Collects an HTML tree's text as blocks: paragraphs, `#` headings, list items, table rows."""

    def __init__(self) -> None:
        self.blocks: list[str] = []
        self.inline: list[str] = []

    def flush(self) -> None:
        lines = "".join(self.inline).split("\n")
        text = "\n".join(" ".join(line.split()) for line in lines).strip()
        if text:
            self.blocks.append(text)
        self.inline = []

    def walk(self, node: Tag) -> None:
        from bs4 import Tag
        from bs4.element import NavigableString, PreformattedString

        for child in node.children:
            if isinstance(
                child, PreformattedString
            ):  # comments, doctype, CDATA, processing instructions
                continue
            if isinstance(child, NavigableString):
                self.inline.append(re.sub(r"\s+", " ", str(child)))
                continue
            if not isinstance(child, Tag):
                continue
            name = child.name
            if name in _HEADINGS:
                self.flush()
                text = _inline_text(child)
                if text:
                    self.blocks.append(f"{'#' * _HEADINGS[name]} {text}")
            elif name == "br":
                self.inline.append("\n")
            elif name == "pre":
                self.flush()
                if child.get_text().strip():
                    self.blocks.append(child.get_text().strip("\n"))
            elif name == "table":
                self.flush()
                rows = [
                    " | ".join(_inline_text(c) for c in tr.find_all(["td", "th"]))
                    for tr in child.find_all("tr")
                ]
                if any(r.strip(" |") for r in rows):
                    self.blocks.append("\n".join(r for r in rows if r.strip(" |")))
            elif name in ("ul", "ol"):  # one block, an item a line
                self.flush()
                items = _HtmlText()
                items.walk(child)
                items.flush()
                if items.blocks:
                    self.blocks.append("\n".join(items.blocks))
            elif name == "li":
                self.flush()
                self.inline.append("- ")
                self.walk(child)
                self.flush()
            elif name in _BLOCKS:
                self.flush()
                self.walk(child)
                self.flush()
            else:
                self.walk(child)


def _inline_text(tag: Tag) -> str:
    """A heading's or table cell's text on one line, spaced as the page spaces it (no space added
    between inline tags, so `is_<wbr>detected` stays one word)."""
    collector = _HtmlText()
    collector.walk(tag)
    collector.flush()
    return " ".join(" ".join(collector.blocks).split())


def _read_html(data: bytes, label: str, limits: DocumentLimits) -> list[str]:
    from bs4 import BeautifulSoup

    try:
        try:
            markup: str | bytes = data.decode("utf-8-sig")
        except UnicodeDecodeError:
            markup = data  # Beautiful Soup honours a declared charset (<meta charset=...>)
        soup = BeautifulSoup(markup, "html.parser")
        for tag in soup.find_all(_DROP):
            tag.decompose()
        collector = _HtmlText()
        collector.walk(soup)
        collector.flush()
    except RecursionError:
        raise DocumentError(
            f"{label} is HTML nested too deeply to read: save the page as PDF or text"
        ) from None
    except MemoryError:  # over the parser's address-space limit: said as that, not as damage
        raise
    except Exception as exc:  # noqa: BLE001 - html.parser is lenient, but a reader must never crash the CLI
        raise DocumentError(
            f"{label} is HTML that cannot be read ({_reason(exc)}): save the page as PDF or text"
        ) from None
    return ["\n\n".join(collector.blocks)]


def _read_text(data: bytes, label: str, limits: DocumentLimits) -> list[str]:
    try:
        return [data.decode("utf-8-sig")]
    except UnicodeDecodeError as exc:
        raise DocumentError(
            f"{label} is not UTF-8 text (byte {exc.start}): convert it, "
            "e.g. iconv -f latin1 -t utf-8 in.txt > out.txt"
        ) from None


_READERS: dict[str, Callable[[bytes, str, DocumentLimits], list[str]]] = {
    "pdf": _read_pdf,
    "docx": _read_docx,
    "html": _read_html,
    "markdown": _read_text,
    "text": _read_text,
}


# --- reading in a child process ----------------------------------------------------------

_PARSERS = threading.BoundedSemaphore(max(1, os.cpu_count() or 1))
"""Documents parsed at once by this process (a child each): a burst of uploads waits its turn."""


def _parse(
    data: bytes, name: str, label: str, limits: DocumentLimits
) -> tuple[str, tuple[str, ...]]:
    """The document's kind and cleaned pages; DocumentError when it cannot be read or is over a
    bound."""
    kind = detect_kind(data, name, label)
    with _quiet():
        pages = tuple(clean(page) for page in _READERS[kind](data, label, limits))
    chars = sum(len(page) for page in pages)
    if chars > limits.max_chars:
        raise _over(
            label,
            f"yields {chars:,} characters of text",
            limits.max_chars,
            "DOCUMENT_MAX_CHARS",
            "send the part the question is about",
        )
    return kind, pages


def _memory_error(label: str, limits: DocumentLimits) -> DocumentError:
    return _over(
        label,
        "needs more memory to read (MB)",
        limits.parse_memory_mb,
        "DOCUMENT_PARSE_MEMORY_MB",
        "send a smaller or simpler document",
    )


def _needs_parser(data: bytes, name: str) -> bool:
    """Whether reading `data` takes a parser (PDF, ZIP, HTML, or a name that says so), not just a
    UTF-8 decode."""
    head = data[:1024]
    sniff = head.decode("latin-1").lstrip("\ufeff\xef\xbb\xbf \t\r\n").lower()
    return (
        b"%PDF-" in head
        or data.startswith((b"PK\x03\x04", _OLE2))
        or sniff.startswith("<")
        or Path(name).suffix.lower() in (".pdf", ".docx", ".html", ".htm", ".xhtml")
    )


def _parse_bounded(
    data: bytes, name: str, label: str, limits: DocumentLimits
) -> tuple[str, tuple[str, ...]]:
    """`_parse` in a child Python (`python -m parallax.runtime.documents`) with an address-space
    limit, no environment (no keys, no database URL), killed after `limits.parse_s`; its answer
    comes back as JSON. Blocks: call it off an event loop. Text needs no parser and is read here."""
    if not _needs_parser(data, name):
        return _parse(data, name, label, limits)
    header = json.dumps(
        {"name": name, "label": label, "limits": dataclasses.asdict(limits)}
    ).encode()
    with _PARSERS:
        # our own parser module in an isolated interpreter: a fixed argv, no shell (bandit B603)
        child = subprocess.Popen(
            [sys.executable, "-I", "-m", "parallax.runtime.documents"],
            stdin=subprocess.PIPE,  # nosec B603
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            env={"PATH": os.environ.get("PATH", ""), "LANG": "C.UTF-8"},
        )
        try:
            out, _ = child.communicate(header + b"\n" + data, timeout=limits.parse_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            raise _over(
                label,
                "took too long to read (seconds)",
                limits.parse_s,
                "DOCUMENT_PARSE_S",
                "send a smaller or simpler document",
            ) from None
    try:
        answer = json.loads(out)
    except ValueError:  # the child died without a word: out of memory in C code, or killed
        raise _memory_error(label, limits) from None
    if "error" in answer:
        raise DocumentError(str(answer["error"]))
    return str(answer["kind"]), tuple(str(page) for page in answer["pages"])


def _child_main() -> None:
    """The child's side of `_parse_bounded`: a JSON header line, then the document's bytes, on
    stdin."""
    import resource

    header_line, _, data = sys.stdin.buffer.read().partition(b"\n")
    header = json.loads(header_line)
    limits = DocumentLimits(**header["limits"])
    memory = limits.parse_memory_mb * 1024 * 1024
    resource.setrlimit(resource.RLIMIT_AS, (memory, memory))
    try:
        kind, pages = _parse(data, header["name"], header["label"], limits)
        answer: dict[str, object] = {"kind": kind, "pages": list(pages)}
    except DocumentError as exc:
        answer = {"error": str(exc)}
    except MemoryError:
        answer = {"error": str(_memory_error(header["label"], limits))}
    sys.stdout.buffer.write(json.dumps(answer).encode())


# --- the interface -----------------------------------------------------------------------


def read_document(
    source: str | os.PathLike[str] | bytes, name: str = "", limits: DocumentLimits | None = None
) -> Document:
    """A file (path) or its bytes as a Document; DocumentError (one line) when it cannot be read or
    is over one of `limits` (default: the settings'). Blocks while a child process parses: from
    async code, call it in a thread.

    `name` names bytes (its suffix helps when the content does not decide); for a path it
    defaults to the file's name. Messages name the path as given, else `name`, else "the input".
    """
    limits = limits or DocumentLimits.from_settings()
    if isinstance(source, bytes | bytearray | memoryview):
        data, label = bytes(source), name or "the input"
        _check_size(len(data), label, limits)
    elif isinstance(source, str | os.PathLike):
        path = Path(source)
        name, label = name or path.name, str(source)
        try:
            if path.is_file():
                _check_size(path.stat().st_size, label, limits)  # before a byte is read
            data = path.read_bytes()
        except FileNotFoundError:
            raise DocumentError(f"{label}: no such file") from None
        except IsADirectoryError:
            raise DocumentError(f"{label} is a folder: give a file") from None
        except OSError as exc:
            raise DocumentError(
                f"{label} cannot be read ({exc.strerror or _reason(exc)}): "
                "check the path and its permissions"
            ) from None
        _check_size(
            len(data), label, limits
        )  # a pipe or a special file has no size until it is read
    else:
        raise DocumentError(f"a document is a path or bytes, not {type(source).__name__}")
    if not data.strip():
        raise DocumentError(f"{label} is empty: give a document with some text")
    kind, pages = _parse_bounded(data, name, label, limits)
    if not any(pages):
        if kind == "pdf" and pages:
            raise DocumentError(
                f"{label} has no text layer (scanned?): run OCR first, e.g. ocrmypdf in.pdf out.pdf"
            )
        what = "has no pages" if kind == "pdf" else "has no text"
        raise DocumentError(f"{label} {what}: give a document with some text")
    return Document(name=name, kind=kind, pages=pages)


def _check_size(size: int, label: str, limits: DocumentLimits) -> None:
    if size > limits.max_bytes:
        raise _over(
            label,
            f"is {size:,} bytes",
            limits.max_bytes,
            "DOCUMENT_MAX_BYTES",
            "send a smaller document",
        )


def document_from_input(value: object) -> Document:
    """A graph input's `document`: a path (str or path-like), raw bytes, or {"name": str, "base64":
    str}; anything else -> DocumentError."""
    if isinstance(value, os.PathLike):
        return read_document(value)
    if isinstance(value, str):
        if not value.strip():
            raise DocumentError(
                'document is an empty path: give a file path, bytes or {"name", "base64"}'
            )
        return read_document(value)
    if isinstance(value, bytes | bytearray):
        return read_document(bytes(value))
    if isinstance(value, dict) and isinstance(value.get("base64"), str):
        name = value.get("name", "")
        if not isinstance(name, str):
            raise DocumentError(f"document name must be text, got {type(name).__name__}")
        limits = DocumentLimits.from_settings()
        label = f"document {name!r}" if name else "document"
        _check_size(len(value["base64"]) // 4 * 3, label, limits)  # before it is decoded
        try:
            data = base64.b64decode(value["base64"], validate=True)
        except (binascii.Error, ValueError):
            raise DocumentError(
                f"{label} is not valid base64: send the file's bytes base64-encoded"
            ) from None
        return read_document(data, name=Path(name).name, limits=limits)
    raise DocumentError(
        'document must be a path, bytes or {"name": ..., "base64": ...}, got'
        f" {type(value).__name__}"
    )


class RunInput(TypedDict):
    """The graph input keys a document stands for."""

    task: str
    pages: list[str]


def run_input(document: Document) -> RunInput:
    """The graph input a document stands for: its text as `task`, and its pages when it has real
    ones (a PDF)."""
    return {"task": document.text, "pages": list(document.pages) if document.paged else []}


if __name__ == "__main__":
    _child_main()
