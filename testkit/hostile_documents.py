"""Hostile documents built in memory, byte by byte: a PDF with many pages, a PDF whose one content
stream inflates to far more than its file, a DOCX whose ZIP holds a deflate bomb, and one whose ZIP
lies about its sizes.

Written by hand (no PDF or DOCX library) so each file is exactly as hostile as it says, and small on
disk.
"""

from __future__ import annotations

import io
import struct
import zipfile
import zlib


def pdf(objects: list[bytes]) -> bytes:
    """A PDF of `objects` (object 1 is the catalog), with a correct cross-reference table."""
    out = io.BytesIO()
    out.write(b"%PDF-1.7\n%\xe2\xe3\xcf\xd3\n")
    offsets = []
    for number, body in enumerate(objects, start=1):
        offsets.append(out.tell())
        out.write(b"%d 0 obj\n" % number + body + b"\nendobj\n")
    xref = out.tell()
    out.write(b"xref\n0 %d\n0000000000 65535 f \n" % (len(objects) + 1))
    for offset in offsets:
        out.write(b"%010d 00000 n \n" % offset)
    out.write(
        b"trailer\n<< /Size %d /Root 1 0 R >>\nstartxref\n%d\n%%%%EOF\n" % (len(objects) + 1, xref)
    )
    return out.getvalue()


_FONT = b"<< /Type /Font /Subtype /Type1 /BaseFont /Helvetica >>"


def _stream(data: bytes, compress: bool = False) -> bytes:
    body = zlib.compress(data, 9) if compress else data
    flate = b" /Filter /FlateDecode" if compress else b""
    return b"<< /Length %d%s >>\nstream\n" % (len(body), flate) + body + b"\nendstream"


def many_pages_pdf(pages: int) -> bytes:
    """`pages` pages sharing one content stream that prints "page" (objects: catalog, pages, font,
    content, ...)."""
    kids = b" ".join(b"%d 0 R" % (5 + i) for i in range(pages))
    objects = [
        b"<< /Type /Catalog /Pages 2 0 R >>",
        b"<< /Type /Pages /Kids [%s] /Count %d >>" % (kids, pages),
        _FONT,
        _stream(b"BT /F1 12 Tf 72 720 Td (page) Tj ET"),
    ]
    page = (
        b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R /Resources << /Font"
        b" << /F1 3 0 R >> >> >>"
    )
    return pdf(objects + [page] * pages)


def inflating_pdf(inflated_bytes: int, text: bytes = b"hello") -> bytes:
    """One page whose content stream prints `text` and then inflates to `inflated_bytes` of spaces
    (a deflate bomb: a few hundred kilobytes on disk)."""
    content = b"BT /F1 12 Tf 72 720 Td (" + text + b") Tj ET\n" + b" " * inflated_bytes
    return pdf(
        [
            b"<< /Type /Catalog /Pages 2 0 R >>",
            b"<< /Type /Pages /Kids [5 0 R] /Count 1 >>",
            _FONT,
            _stream(content, compress=True),
            (
                b"<< /Type /Page /Parent 2 0 R /MediaBox [0 0 612 792] /Contents 4 0 R "
                b"/Resources << /Font << /F1 3 0 R >> >> >>"
            ),
        ]
    )


_CONTENT_TYPES = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
    b'<Types xmlns="http://schemas.openxmlformats.org/package/2006/content-types">'
    b'<Default Extension="rels"'
    b' ContentType="application/vnd.openxmlformats-package.relationships+xml"/>'
    b'<Default Extension="xml" ContentType="application/xml"/>'
    b'<Override PartName="/word/document.xml" '
    b'ContentType="application/vnd.openxmlformats-officedocument.wordprocessingml.document.main+xml"/>'
    b"</Types>"
)
_RELS = (
    b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n<Relationships'
    b' xmlns="http://schemas.openxmlformats.org/package/2006/relationships"><Relationship Id="rId1"'
    b' Type="http://schemas.openxmlformats.org/officeDocument/2006/relationships/officeDocument"'
    b' Target="word/document.xml"/></Relationships>'
)


def docx_xml(text: str, padding: int = 0) -> bytes:
    """word/document.xml with one paragraph of `text`, then `padding` bytes of whitespace (which
    inflate, read as nothing)."""
    return (
        b'<?xml version="1.0" encoding="UTF-8" standalone="yes"?>\n'
        b"<w:document"
        b' xmlns:w="http://schemas.openxmlformats.org/wordprocessingml/2006/main"><w:body>'
        b"<w:p><w:r><w:t>"
        + text.encode()
        + b"</w:t></w:r></w:p>"
        + b" " * padding
        + b"</w:body></w:document>"
    )


def docx(document_xml: bytes, extra: dict[str, bytes] | None = None) -> bytes:
    """A minimal DOCX (content types, relationships, the document), deflated, with `extra`
    members."""
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as archive:
        archive.writestr("[Content_Types].xml", _CONTENT_TYPES)
        archive.writestr("_rels/.rels", _RELS)
        archive.writestr("word/document.xml", document_xml)
        for name, data in (extra or {}).items():
            archive.writestr(name, data)
    return out.getvalue()


def docx_lying_about_sizes(text: str, inflated_bytes: int) -> bytes:
    """A DOCX whose document.xml inflates to `inflated_bytes` while its ZIP headers declare 1,000 (a
    bomb that passes a check of the declared sizes alone)."""
    data = bytearray(docx(docx_xml(text, padding=inflated_bytes)))
    for signature, size_at in (
        (b"PK\x03\x04", 22),
        (b"PK\x01\x02", 24),
    ):  # local header, central directory entry
        start = 0
        while (start := data.find(signature, start)) >= 0:
            name_length = struct.unpack_from(
                "<H", data, start + (26 if signature == b"PK\x03\x04" else 28)
            )[0]
            name_at = start + (30 if signature == b"PK\x03\x04" else 46)
            if bytes(data[name_at : name_at + name_length]) == b"word/document.xml":
                struct.pack_into("<I", data, start + size_at, 1_000)
            start += 4
    return bytes(data)
