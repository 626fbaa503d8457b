"""How often a section run's slice branches stop at the token cap, on the embedded model.

Why: a slice reply whose schema has no bounds lets a small model write past PARALLAX_MAX_TOKENS
(384 by default): the reply ends mid-JSON (`LengthFinishReasonError`, cause `length`) and the
branch is lost; when every slice of a run is lost, the run fails (seen on a HotpotQA document:
4 of 4). The slice, plan and judge reply schemas carry maxLength/maxItems now
(state/payloads.py), which llama.cpp's server turns into its grammar. This runs the REAL solve
graph in `mode: "section"` on the REAL embedded model over QMSum dev meetings and counts the slice
branches that stopped at the cap (goal: at most 10%).

Each meeting is laid out as bench/slicing.py does (one `## Topic:` section per topic) and cut to
its first `--chars` characters at a line end, so a run has a few slices, not a dozen: the figure
is a share per slice branch, and the machine is shared. Wall times are printed but are noisy.

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.slicing import first_question, meeting_document

DEFAULT_DATA = Path(__file__).resolve().parent / "data" / "samples" / "qmsum" / "val.jsonl.gz"


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_meetings(path: Path) -> list[dict[str, Any]]:
    """One meeting per line of a .jsonl or .jsonl.gz file."""
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [json.loads(line) for line in handle if line.strip()]


def cut(document: str, chars: int) -> str:
    """The first `chars` characters of `document`, ended at the last line end inside them."""
    if len(document) <= chars:
        return document
    head = document[:chars]
    return head[: head.rfind("\n")] if "\n" in head else head


async def run_one(graph: Any, meeting: dict[str, Any], chars: int) -> dict[str, Any]:
    document = cut(meeting_document(meeting)[0], chars)
    started = time.perf_counter()
    out = await graph.ainvoke({"task": document, "question": first_question(meeting), "mode": "section"})
    slices = [b for b in out["branches"] if b["kind"] == "slice"]
    return {"status": out["status"], "mode": out["mode"], "slices": len(slices),
            "at_cap": sum(b.get("cause") == "length" for b in slices),
            "causes": dict(Counter(b.get("cause") or "ok" for b in slices)),
            "completion_tokens": [b["tokens"]["completion"] for b in slices],
            "seconds": round(time.perf_counter() - started, 1), "chars": len(document)}


async def measure(meetings: list[dict[str, Any]], chars: int, results: list[dict[str, Any]]) -> None:
    """Runs one meeting after another into `results` (which keeps the finished ones if interrupted)."""
    from parallax.graphs.solve import graph

    for i, meeting in enumerate(meetings):
        results.append(await run_one(graph, meeting, chars))
        r = results[-1]
        log(f"run {i + 1}/{len(meetings)}: {r['status']}, {r['at_cap']} of {r['slices']} slices at the cap, "
            f"{r['seconds']} s")


def report(data: Path, chars: int, results: list[dict[str, Any]], seconds: float) -> dict[str, Any]:
    from parallax.runtime import settings as settings_mod

    slices = sum(r["slices"] for r in results)
    per_run = [{k: r[k] for k in ("status", "slices", "at_cap", "seconds")} for r in results]
    at_cap = sum(r["at_cap"] for r in results)
    causes: Counter[str] = Counter()
    for r in results:
        causes.update(r["causes"])
    tokens = sorted(t for r in results for t in r["completion_tokens"])
    share = round(at_cap / slices, 4) if slices else None
    return {
        "benchmark": "section_cap",
        "data": str(data),
        "runs": len(results),
        "document_chars_max": chars,
        "max_tokens": settings_mod.load().max_tokens,
        "slice_branches": slices,
        "slice_branches_at_cap": at_cap,
        "share_at_cap": share,
        "goal": "share_at_cap <= 0.10",
        "goal_met": share is not None and share <= 0.10,
        "slice_causes": dict(causes),
        "slice_completion_tokens": {"median": tokens[len(tokens) // 2] if tokens else None,
                                    "max": tokens[-1] if tokens else None},
        "run_statuses": dict(Counter(r["status"] for r in results)),
        "runs_failed": sum(r["status"] == "failed" for r in results),
        "wall_seconds": round(seconds, 1),
        "per_run": per_run,
        "note": "wall time on a shared 2-core machine (other sessions running): noisy",
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.section_cap",
        description="Share of section-mode slice branches that stop at the token cap (real solve graph, embedded "
        "model), over QMSum dev meetings. Prints JSON.")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help=f"QMSum .jsonl or .jsonl.gz, one meeting per line (default {DEFAULT_DATA})")
    parser.add_argument("--limit", type=int, default=20, help="runs: the first N meetings (default 20)")
    parser.add_argument("--chars", type=int, default=12000,
                        help="each document is cut to its first N characters, at a line end (default 12000: "
                        "two or three slices at the default PARALLAX_SLICE_CHARS)")
    parser.add_argument("--json", action="store_true", help="accepted for the CLI contract; the output is always JSON")
    args = parser.parse_args(argv)
    if args.limit < 1 or args.chars < 1:
        parser.error("--limit and --chars must be >= 1")
    if not args.data.is_file():
        parser.error(f"data file not found: {args.data}")
    return args


def main(argv: list[str] | None = None) -> dict[str, Any]:
    args = parse_args(argv)
    meetings = read_meetings(args.data)[: args.limit]
    started, results = time.perf_counter(), list[dict[str, Any]]()
    try:
        asyncio.run(measure(meetings, args.chars, results))
    except KeyboardInterrupt:  # Ctrl-C (SIGINT): report the runs that finished, and say so
        log(f"interrupted after {len(results)} of {len(meetings)} runs")
    result = {**report(args.data, args.chars, results, time.perf_counter() - started),
              "interrupted": len(results) < len(meetings)}
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
