"""The fact layer on QMSum with a real model: what share of section findings quote their slice.

Why: a section finding now carries a short quote that must occur in the slice it came
from (parallax/logic/quotes.py); findings whose quote is absent are dropped. This runs the
REAL solve graph in section mode on the first `--meetings` QMSum dev meetings (each cut to
its first `--max-chars` characters, so a slow local model finishes), asking each meeting's
first specific question, against whatever model is configured (the embedded SmolLM2 by
default), and reports how many findings verified and how the runs ended.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
import time

from bench.samples import read_jsonl
from bench.slicing import DEFAULT_DATA, first_question, meeting_document
from parallax.graphs.solve import graph
from parallax.runtime.run_context import resolved
from parallax.runtime.settings import reload_settings


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


async def measure(args: argparse.Namespace) -> dict:
    meetings = read_jsonl(args.data)[: args.meetings]
    ctx = resolved()
    runs, started = [], time.perf_counter()
    for index, meeting in enumerate(meetings):
        document = meeting_document(meeting)[0][: args.max_chars]
        out = await graph.ainvoke(
            {"task": document, "question": first_question(meeting), "mode": "section"}, context=ctx
        )
        facts = out.get("verification", {}).get("facts", {})
        slices = [b for b in out["branches"] if b["kind"] == "slice"]
        runs.append(
            {
                "status": out["status"],
                "slices": len(slices),
                "failed_slices": sum(b["status"] != "ok" for b in slices),
                "checked": facts.get("checked", 0),
                "verified": facts.get("verified", 0),
                "examples_kept": [f["quote"][:80] for f in facts.get("findings", [])[:2]],
                "examples_dropped": [
                    f["quote"][:80] for f in facts.get("dropped_findings", [])[:2]
                ],
            }
        )
        log(
            f"meeting {index + 1}/{len(meetings)}: {out['status']}, {facts.get('verified', 0)} of "
            f"{facts.get('checked', 0)} findings verified ({len(slices)} slices)"
        )
    checked = sum(r["checked"] for r in runs)
    verified = sum(r["verified"] for r in runs)
    return {
        "benchmark": "facts",
        "model": ctx.model or "embedded",
        "meetings": len(runs),
        "max_chars": args.max_chars,
        "findings_checked": checked,
        "findings_verified": verified,
        "share_verified": round(verified / checked, 3) if checked else None,
        "runs_ok": sum(r["status"] == "ok" for r in runs),
        "runs_needs_review": sum(r["status"] == "needs_review" for r in runs),
        "runs_failed": sum(r["status"] == "failed" for r in runs),
        "seconds": round(time.perf_counter() - started, 1),
        "runs": runs,
    }


def main(argv: list[str] | None = None) -> dict:
    parser = argparse.ArgumentParser(
        prog="python -m bench.facts",
        description=(
            "Share of section findings whose quotes "
            "occur in their slice, on QMSum dev with the configured model. Prints JSON."
        ),
    )
    parser.add_argument(
        "--data",
        default=str(DEFAULT_DATA),
        help="QMSum jsonl file, may be gzipped (default: the repository's 20 dev meetings)",
    )
    parser.add_argument("--meetings", type=int, default=5, help="meetings to run (default 5)")
    parser.add_argument(
        "--max-chars",
        type=int,
        default=12000,
        help="characters of each meeting to read (default 12000)",
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="accepted for the CLI contract; the output is always JSON",
    )
    args = parser.parse_args(argv)
    if args.meetings < 1 or args.max_chars < 100:
        parser.error("--meetings must be >= 1 and --max-chars >= 100")
    os.environ.setdefault("PARALLAX_RESPONSE_FORMAT", "json_object_schema")
    reload_settings()
    result = asyncio.run(measure(args))
    print(json.dumps(result, indent=2, ensure_ascii=False))
    return result


if __name__ == "__main__":
    main()
