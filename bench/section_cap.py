"""How often a section run's slice branches stop at the token cap, on the embedded model.

Why: a slice reply whose schema has no bounds lets a small model write past PARALLAX_MAX_TOKENS
(384 by default): the reply ends mid-JSON (`LengthFinishReasonError`, cause `length`) and the
branch is lost; when every slice of a run is lost, the run fails (issue 30, a HotpotQA document:
4 of 4). The slice, plan and judge reply schemas carry maxLength/maxItems now
(state/payloads.py), which llama.cpp's server turns into its grammar. This runs the REAL solve
graph in `mode: "section"` on the REAL embedded model and counts the slice branches that stopped
at the cap (goal: at most 10%).

`--data` is QMSum dev meetings (the default; each laid out as bench/slicing.py does) or a
FinanceBench folder (two consecutive filing pages a run, pdftotext -layout text, the filings in
turn, each pair with a question about its filing). Each document is cut to its first `--chars`
characters at a line end, so a run has a few slices, not a dozen: the figure is a share per slice
branch, and the machine is shared. Wall times are printed but are noisy. The JSON's `code` says
which checkout ran (PYTHONPATH may point at another) and whether its slice schema is bounded.

QMSum transcripts do not show the problem: on 9 meetings the unbounded schema stopped 0 of 24
slices at the cap. Filing tables do, so the figure is taken on FinanceBench (2026-12-03, shared
2-core machine, SmolLM2-135M, max_tokens 384, PARALLAX_SLICE_CHARS=3000, `--chars 6000`, 20 runs,
56 slices each time):

    PARALLAX_SLICE_CHARS=3000 python -m bench.section_cap --data bench/data/samples/financebench
    --chars 6000

| slice schema | slices at the cap | runs failed |
| --- | --- | --- |
| unbounded (main with e98ee2d's slice bounds taken out) | 47 of 56 (84%) | 11 of 20 |
| 3 findings, quotes 120 / points 160 characters (e98ee2d) | 10 of 56 (18%) | 0 |
| 2 findings, quotes 60 / points 90 characters (now) | 0 of 56 (0%; longest reply 370 tokens) | 0 |

The 3 x (120 + 160) bounds were sized at four characters a token; on tables SmolLM2 fills a point
with digits ("1.0000.0000…"), one token each, so they are sized now for a token per character.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import itertools
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.samples import SAMPLES, read_jsonl
from bench.slicing import first_question, meeting_document

DEFAULT_DATA = SAMPLES / "qmsum" / "val.jsonl.gz"
Document = tuple[str, str, str]
"""(name, text, question) of one run."""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_meetings(path: Path) -> list[dict[str, Any]]:
    """One meeting per line of a .jsonl or .jsonl.gz file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def meetings(path: Path) -> list[Document]:
    """QMSum: each meeting laid out as bench/slicing.py does, with its first question."""
    return [
        (m.get("meeting_id", f"meeting {i}"), meeting_document(m)[0], first_question(m))
        for i, m in enumerate(read_meetings(path))
    ]


def filings(folder: Path) -> list[Document]:
    """FinanceBench: two consecutive pages of a filing (pdftotext -layout text, tables and all),
    each pair with one of the questions about that filing in turn; the filings taken in turn, so the
    first N runs cover every filing. Why: their tables are what made unbounded slice replies run to
    the cap."""
    questions = read_jsonl(next(folder.glob("questions.jsonl*")))
    per_doc: list[list[Document]] = []
    for path in sorted((folder / "docs_text").glob("*.jsonl*")):
        pages = sorted(read_jsonl(path), key=lambda row: row["page"])
        doc = path.name.split(".")[0]
        asked = [q["question"] for q in questions if q["doc_name"] == doc]
        if not asked:
            continue
        per_doc.append(
            [
                (
                    f"{doc} pages {pages[i]['page']}-{pages[i + 1]['page']}",
                    pages[i]["text"] + "\n\n" + pages[i + 1]["text"],
                    asked[(i // 2) % len(asked)],
                )
                for i in range(0, len(pages) - 1, 2)
            ]
        )
    return [d for turn in itertools.zip_longest(*per_doc) for d in turn if d is not None]


def documents(data: Path) -> list[Document]:
    """A folder is FinanceBench (docs_text/ and questions.jsonl[.gz]); a file is QMSum meetings."""
    return filings(data) if data.is_dir() else meetings(data)


def cut(document: str, chars: int) -> str:
    """The first `chars` characters of `document`, ended at the last line end inside them."""
    if len(document) <= chars:
        return document
    head = document[:chars]
    return head[: head.rfind("\n")] if "\n" in head else head


async def run_one(graph: Any, item: Document, chars: int) -> dict[str, Any]:
    name, text, question = item
    document = cut(text, chars)
    started = time.perf_counter()
    out = await graph.ainvoke({"task": document, "question": question, "mode": "section"})
    slices = [b for b in out["branches"] if b["kind"] == "slice"]
    return {
        "status": out["status"],
        "mode": out["mode"],
        "slices": len(slices),
        "at_cap": sum(b.get("cause") == "length" for b in slices),
        "causes": dict(Counter(b.get("cause") or "ok" for b in slices)),
        "completion_tokens": [b["tokens"]["completion"] for b in slices],
        "seconds": round(time.perf_counter() - started, 1),
        "chars": len(document),
        "document": name,
    }


async def measure(items: list[Document], chars: int, results: list[dict[str, Any]]) -> None:
    """Runs one document after another into `results` (which keeps the finished ones if
    interrupted)."""
    from parallax.graphs.solve import graph

    for i, item in enumerate(items):
        results.append(await run_one(graph, item, chars))
        r = results[-1]
        log(
            f"run {i + 1}/{len(items)} ({r['document']}): {r['status']}, {r['at_cap']} of"
            f" {r['slices']} slices at the cap, {r['seconds']} s"
        )


def code() -> dict[str, Any]:
    """Which Parallax ran (a bench may be pointed at another checkout with PYTHONPATH) and whether
    its slice reply schema is bounded, so a before/after pair of results says which side each is."""
    import parallax
    from parallax.state.payloads import SliceFinding

    schema = json.dumps(SliceFinding.model_json_schema())
    return {
        "parallax": str(Path(parallax.__file__).resolve().parent.parent),
        "slice_schema_bounded": "maxItems" in schema and "maxLength" in schema,
    }


def report(data: Path, chars: int, results: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    from parallax.runtime import settings as settings_mod

    slices = sum(r["slices"] for r in results)
    per_run = [
        {
            k: r[k]
            for k in ("document", "status", "slices", "at_cap", "completion_tokens", "seconds")
        }
        for r in results
    ]
    at_cap = sum(r["at_cap"] for r in results)
    causes: Counter[str] = Counter()
    for r in results:
        causes.update(r["causes"])
    tokens = sorted(t for r in results for t in r["completion_tokens"])
    share = round(at_cap / slices, 4) if slices else None
    return {
        "benchmark": "section_cap",
        "data": str(data),
        "code": code(),
        "runs": len(results),
        "document_chars_max": chars,
        "slice_chars": settings_mod.load().slice_chars,
        "max_tokens": settings_mod.load().max_tokens,
        "slice_branches": slices,
        "slice_branches_at_cap": at_cap,
        "share_at_cap": share,
        "goal": "share_at_cap <= 0.10",
        "goal_met": share is not None and share <= 0.10,
        "slice_causes": dict(causes),
        "slice_completion_tokens": {
            "median": tokens[len(tokens) // 2] if tokens else None,
            "max": tokens[-1] if tokens else None,
        },
        "run_statuses": dict(Counter(r["status"] for r in results)),
        "runs_failed": sum(r["status"] == "failed" for r in results),
        "wall_seconds": round(seconds, 1),
        "per_run": per_run,
        "note": "wall time on a shared 2-core machine (other sessions running): noisy",
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.section_cap",
        description=(
            "Share of section-mode slice branches that stop at the token cap (real solve graph,"
            " embedded model), over QMSum dev meetings or FinanceBench filing pages. Prints JSON."
        ),
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=(
            f"QMSum .jsonl or .jsonl.gz, one meeting per line (default {DEFAULT_DATA}); or a"
            " FinanceBench folder with docs_text/ and questions.jsonl[.gz]"
            f" ({SAMPLES / 'financebench'})"
        ),
    )
    parser.add_argument(
        "--limit", type=int, default=20, help="runs: the first N documents (default 20)"
    )
    parser.add_argument(
        "--chars",
        type=int,
        default=12000,
        help=(
            "each document is cut to its first N characters, at a line end (default 12000: "
            "two or three slices at the default PARALLAX_SLICE_CHARS)"
        ),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="accepted for the CLI contract; the output is always JSON",
    )
    args = parser.parse_args(argv)
    if args.limit < 1 or args.chars < 1:
        parser.error("--limit and --chars must be >= 1")
    if not args.data.is_file() and not (args.data / "docs_text").is_dir():
        parser.error(
            f"data not found: {args.data} (a QMSum .jsonl[.gz] file or a FinanceBench folder with"
            " docs_text/)"
        )
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    items = documents(args.data)[: args.limit]
    started, results = time.perf_counter(), list[dict[str, Any]]()
    try:
        asyncio.run(measure(items, args.chars, results))
    except KeyboardInterrupt:  # Ctrl-C (SIGINT): report the runs that finished, and say so
        log(f"interrupted after {len(results)} of {len(items)} runs")
    result = {
        **report(args.data, args.chars, results, time.perf_counter() - started),
        "interrupted": len(results) < len(items),
    }
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
