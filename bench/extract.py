"""Typed extraction from real filings made into PDFs: does every value land, verified, on the right
page?

Why: a section run with the user's schema promises that each value in `data` rests on a quote
from the document and says which page that quote is on. This measures that promise on real
annual reports: FinanceBench's Adobe and Nike 10-K pages (the repository's sample in
bench/data/samples/financebench, or a full copy named with `--data`), the pages its questions
cite plus their neighbours, written into a real PDF per filing
(bench/data/make_filings.py), read back by Parallax (runtime/documents.py) and run through the
Python API (`parallax.asolve(document=..., mode="section", schema=...)`, the product path:
SQLite store, trace, ChatOpenAI) against a scripted OpenAI-compatible server with latency.

The scripted model (testkit/extraction_model.py) reports, for its part of the
document, each fact whose evidence line it can see, copying the evidence as the quote, and
makes stated mistakes (seeded): for fields its part does not give it invents a value and a
quote (`--hallucinate`: the quote is not in the part, so the value must be dropped), and it
misreads some figures while copying the true evidence (`--misread`: the quote verifies, but it
does not print the number, so the value must be dropped too).

The truth is mined from the page texts: for each field, the lines that start with its label
and carry a number (`Total current liabilities ... 2,213,556`), each with its pages.

Each PDF also gets a planted appendix page that restates its total current liabilities 5% higher
(`--no-restate` leaves it out): the document then says two things about one field, and the run
must report that conflict (`restatements_reported_as_conflict` of `restatements_planted`) and go to
review rather than pick one. A restatement that lands in the same slice as the figure it restates
is up to that slice's model, which reports one value per field: no check after it can see two.

Figures (one JSON object on stdout): `on_right_page_share` (verified values placed on a page
whose text holds their evidence), `value_matches_quote_share` (verified values equal to the
figure their evidence prints: a misread number must not pass), `recall` (fields whose settled
value is one the document gives), `dropped` against `hallucinations_injected + misreads_injected`
(every invented quote and every misread figure should be dropped), `conflicts_reported` (two
slices verifying different values for a field; fields the document itself gives several values
for are counted beside it), wall time and model calls. `--embedded` adds one run of the same
extraction on one filing with the embedded model (SmolLM2-135M), reported as it comes.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import random
import re
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench.samples import SAMPLES, read_jsonl
from parallax.runtime.settings import reload_settings
from testkit.extraction_model import ExtractionModel, Fact
from testkit.fault_server import FaultConfig, FaultServer

DATA = SAMPLES / "financebench"
DOCUMENTS = {  # the pages (from 0, as in the data) FinanceBench's questions cite, with neighbours
    "ADOBE_2015_10K": list(range(55, 64)),
    "ADOBE_2017_10K": list(range(54, 62)),
    "ADOBE_2022_10K": list(range(51, 58)),
    "NIKE_2019_10K": list(range(50, 56)),
    "NIKE_2021_10K": list(range(56, 62)),
}
FIELDS = {
    "total_current_assets": ("Total current assets",),
    "total_assets": ("Total assets",),
    "total_current_liabilities": ("Total current liabilities",),
    "total_stockholders_equity": ("Total stockholders", "Total shareholders"),
    "cash_from_operations": (
        "Net cash provided by operating activities",
        "Cash provided by operations",
    ),
    "net_income": ("Net income",),
}
SCHEMA = {
    "type": "object",
    "properties": {
        **{
            name: {
                "type": "number",
                "description": f"the {labels[0]} line's first figure, as printed",
            }
            for name, labels in FIELDS.items()
        },
        "statements": {
            "type": "array",
            "items": {"type": "string"},
            "description": "titles of the financial statements shown (CONSOLIDATED ...)",
        },
    },
}
NUMBER = re.compile(r"\(?\$?\s*(\d{1,3}(?:,\d{3})+|\d+)(?:\.\d+)?\)?")
TITLE = re.compile(r"^\s*(CONSOLIDATED [A-Z ,']{6,60}?)\s*$")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


@dataclass
class Truth:
    fact: Fact
    pages: set[int] = field(default_factory=set)
    """Pages of the PDF (from 1, as a viewer counts) whose text holds the quote."""


def source_pages(doc: str, wanted: list[int], data: Path = DATA) -> dict[int, str]:
    """Source page (from 0, as in the data) -> its text; make_filings puts source page N on PDF page
    N + 1."""
    pages = {row["page"]: row["text"] for row in read_jsonl(data / "docs_text" / f"{doc}.jsonl.gz")}
    return {p: pages[p] for p in wanted if p in pages}


def mine(pages: dict[int, str]) -> list[Truth]:
    """The facts the pages give: labelled figures and statement titles, each with its evidence and
    pages."""
    found: dict[tuple[str, str], Truth] = {}
    for source, text in pages.items():
        number = source + 1
        for line in text.splitlines():
            stripped = " ".join(line.split())
            for name, labels in FIELDS.items():
                label = next((x for x in labels if stripped.startswith(x)), None)
                match = NUMBER.search(stripped, len(label)) if label else None
                if label and match and "," in match.group(1):
                    quote = stripped[: match.end(1)]
                    value = float(match.group(1).replace(",", ""))
                    found.setdefault((name, quote), Truth(Fact(name, value, quote))).pages.add(
                        number
                    )
            title = TITLE.match(line)
            if title:
                name = " ".join(title.group(1).split())
                found.setdefault(
                    ("statements", name),
                    Truth(Fact("statements", name.title(), name, is_list=True)),
                ).pages.add(number)
    return list(found.values())


def scripted_model(
    truths: list[Truth], seed: int, hallucinate: float, misread: float, injected: dict[str, int]
) -> ExtractionModel:
    """The careful-but-fallible extraction model: true facts, some misread, plus invented quotes."""
    rng = random.Random(seed)
    facts = []
    for truth in truths:
        fact = truth.fact
        if not fact.is_list and rng.random() < misread:
            injected["misreads"] += 1
            fact = Fact(fact.path, round(fact.value * 1.1), fact.quote)
        facts.append(fact)

    def wrong(part: str) -> list[Fact]:
        """The same invented facts for the same part, whatever order the slices are asked in."""
        draw = random.Random(f"{seed}/{hashlib.sha256(part.encode()).hexdigest()}")
        return [
            Fact(name, 1234.0, f"{labels[0]} of 1,234 (not in this part)")
            for name, labels in FIELDS.items()
            if draw.random() < hallucinate
        ]

    return ExtractionModel(facts=facts, wrong=wrong)


def restatement(truths: list[Truth], page: int) -> tuple[Truth, str] | None:
    """A planted appendix page that restates one balance-sheet figure 5% higher: the document then
    gives two values for that field on two pages, and the run must report the conflict, not pick
    one."""
    figure = next((t for t in truths if t.fact.path == "total_current_liabilities"), None)
    if figure is None:
        return None
    value = round(figure.fact.value * 1.05)
    quote = f"Total current liabilities {value:,}"
    return (
        Truth(Fact(figure.fact.path, float(value), quote), {page}),
        f"RESTATEMENT (unaudited)\n\n{quote}",
    )


async def extract(pdf: Path, context: Any) -> dict[str, Any]:
    import parallax

    result = await parallax.asolve(
        document=pdf,
        question="the figures of the financial statements",
        mode="section",
        schema=SCHEMA,
        context=context,
    )
    return result.model_dump(mode="json")


def score(result: dict[str, Any], truths: list[Truth]) -> dict[str, Any]:
    from parallax.logic.quotes import normalise
    from parallax.logic.user_schema import normal

    pages_of: dict[tuple[str, str], set[int]] = {}
    value_of: dict[tuple[str, str], str] = {}
    true_values: dict[str, set[str]] = {}
    for truth in truths:
        key = (truth.fact.path, normalise(truth.fact.quote))
        pages_of.setdefault(key, set()).update(truth.pages)
        value_of[key] = normal(truth.fact.value)
        true_values.setdefault(truth.fact.path, set()).add(normal(truth.fact.value))
    verified = [p for p in result["provenance"] if p["verified"]]
    keys = [(p["path"].split("[")[0], normalise(p["quote"] or "")) for p in verified]
    right_page = [
        p for p, k in zip(verified, keys, strict=True) if p["page"] in pages_of.get(k, set())
    ]
    right_value = [
        p for p, k in zip(verified, keys, strict=True) if value_of.get(k) == normal(p["value"])
    ]
    data = result.get("raw_data") or {}
    scalar_fields = [f for f in true_values if f != "statements"]
    found = [
        f for f in scalar_fields if data.get(f) is not None and normal(data[f]) in true_values[f]
    ]
    facts = result["verification"].get("facts", {})
    return {
        "verified": len(verified),
        "on_right_page": len(right_page),
        "value_matches_its_quote": len(right_value),
        "fields": len(scalar_fields),
        "fields_found": len(found),
        "dropped": facts.get("dropped", 0),
        "conflicts": [c["path"] for c in facts.get("conflicts", [])],
        "fields_with_several_values_in_document": sorted(
            f for f in scalar_fields if len(true_values[f]) > 1
        ),
        "conflict_on_restated_field": (
            "total_current_liabilities" in [c["path"] for c in facts.get("conflicts", [])]
        ),
        "status": result["status"],
        "statements": len(data.get("statements") or []),
    }


async def main_async(args: argparse.Namespace) -> dict[str, Any]:
    from bench.data.make_filings import make_filing_pdf
    from parallax.runtime.chat_models import forget_clients
    from parallax.state.context import Context

    out_dir = Path(tempfile.mkdtemp(prefix="parallax-extract-"))
    os.environ.setdefault("PARALLAX_HOME", str(out_dir / "home"))
    reload_settings()
    docs = list(DOCUMENTS)[: args.documents]
    rows, injected = [], {"misreads": 0, "hallucinations": 0}
    calls = 0
    started = time.perf_counter()
    for i, doc in enumerate(docs):
        truths = mine(source_pages(doc, DOCUMENTS[doc], args.data))
        restated = restatement(truths, max(DOCUMENTS[doc]) + 2) if args.restate else None
        pdf = make_filing_pdf(
            doc,
            DOCUMENTS[doc],
            out_dir,
            appendix=[restated[1]] if restated else None,
            data=args.data,
        )
        if restated:
            truths.append(restated[0])
        model = scripted_model(truths, args.seed + i, args.hallucinate, args.misread, injected)
        with FaultServer(FaultConfig(reply=model, latency_ms=args.latency_ms)) as url:
            os.environ["OPENAI_BASE_URL"] = url
            os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_schema")
            reload_settings()
            forget_clients()
            result = await extract(
                pdf, Context(slice_chars=args.slice_chars, max_concurrency=args.concurrency)
            )
            import httpx

            calls += sum(
                1
                for e in httpx.get(f"{url[:-3]}/_log").json()  # requests (no vote here asks with n)
                if e["path"].endswith("/chat/completions")
            )
        injected["hallucinations"] += model.invented
        row = {"document": doc, "pages": len(DOCUMENTS[doc]), **score(result, truths)}
        rows.append(row)
        log(json.dumps(row))
    wall = time.perf_counter() - started
    verified = sum(r["verified"] for r in rows)
    report: dict[str, Any] = {
        "benchmark": "extract",
        "documents": len(rows),
        "pages": sum(r["pages"] for r in rows),
        "latency_ms": args.latency_ms,
        "seed": args.seed,
        "hallucinate": args.hallucinate,
        "misread": args.misread,
        "values_verified": verified,
        "on_right_page_share": (
            round(sum(r["on_right_page"] for r in rows) / verified, 3) if verified else None
        ),
        "value_matches_quote_share": (
            round(sum(r["value_matches_its_quote"] for r in rows) / verified, 3)
            if verified
            else None
        ),
        "recall": round(
            sum(r["fields_found"] for r in rows) / max(1, sum(r["fields"] for r in rows)), 3
        ),
        "dropped": sum(r["dropped"] for r in rows),
        "hallucinations_injected": injected["hallucinations"],
        "conflicts_reported": sum(len(r["conflicts"]) for r in rows),
        "restatements_planted": sum(
            "total_current_liabilities" in r["fields_with_several_values_in_document"] for r in rows
        ),
        "restatements_reported_as_conflict": sum(r["conflict_on_restated_field"] for r in rows),
        "fields_with_several_values_in_document": sum(
            len(r["fields_with_several_values_in_document"]) for r in rows
        ),
        "misreads_injected": injected["misreads"],
        "statuses": {
            s: sum(r["status"] == s for r in rows) for s in ("ok", "needs_review", "failed")
        },
        "model_calls": calls,
        "model_calls_counted_as": "requests",
        "wall_s": round(wall, 2),
        "per_document": rows,
    }
    if args.embedded:
        os.environ.pop("OPENAI_BASE_URL", None)
        reload_settings()
        forget_clients()
        doc = docs[0]
        pdf = make_filing_pdf(doc, DOCUMENTS[doc], out_dir, data=args.data)
        began = time.perf_counter()
        result = await extract(pdf, Context(slice_chars=args.slice_chars))
        report["embedded"] = {
            "document": doc,
            **score(result, mine(source_pages(doc, DOCUMENTS[doc], args.data))),
            "reason": result["reason"][:300],
            "wall_s": round(time.perf_counter() - began, 1),
        }
    return report


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--documents", type=int, default=len(DOCUMENTS), help="filings to use (default all)"
    )
    parser.add_argument(
        "--latency-ms", type=float, default=200.0, help="scripted server latency per call"
    )
    parser.add_argument(
        "--hallucinate",
        type=float,
        default=0.1,
        help="share of (part, field) with an invented quote",
    )
    parser.add_argument(
        "--misread",
        type=float,
        default=0.1,
        help="share of true facts reported with a wrong number",
    )
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument(
        "--no-restate",
        dest="restate",
        action="store_false",
        help="plant no restatement page (by default each filing gets one: a conflict to report)",
    )
    parser.add_argument("--slice-chars", type=int, default=6000)
    parser.add_argument("--concurrency", type=int, default=8)
    parser.add_argument(
        "--embedded", action="store_true", help="also one filing on the embedded model"
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DATA,
        help=(
            "FinanceBench folder with docs_text/ (default: the repository's sample, which has these"
            " pages)"
        ),
    )
    args = parser.parse_args()
    print(json.dumps(asyncio.run(main_async(args))))


if __name__ == "__main__":
    main()
