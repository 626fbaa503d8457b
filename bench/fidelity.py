"""Does parallel learning keep the lessons? Curate+merge versus one summarising call per batch.

Why: the failure this project exists to avoid (DESIGN.md) is an aggregator call that
squeezes a batch of reflections into a few generic items. This benchmark feeds the same
reflections, split into batches of B, through (a) Parallax's path: each reflection curated
ON ITS OWN into operations, then `merge_operations` per batch against the playbook so far,
and (b) the naive baseline: one model call per batch that summarises the batch into
playbook items. For each B it reports `items`, `lessons_total`, `lessons_retained`
(lessons that are the lesson of at least one active item), `duplicate_items` (items whose
lesson another item already has) and `seconds`. An item's lesson is the most common lesson
among the reflections in its provenance; baseline items have no provenance, so theirs is
the lesson whose reflections their text is most similar to (mean embedding similarity).

Curators: `rule` (default, deterministic, no model: the reflection's "Lesson:" sentence
becomes one `add`, `about` = its subject, i.e. the first named formula/metric from a small
vocabulary or XBRL tag it mentions, skipping names introduced by "unlike"/"not"; with
`--about all`, every name mentioned, to see how a sloppier curator hurts the merge) and
`model` (the product's per-reflection curator, parallax/logic/curate.py with prompts/learn.py,
through the configured or embedded model). The curate step does not depend on B, so it
runs once and its time is reported as `curate_seconds`; `seconds` per B is the merge.

    python -m bench.fidelity --reflections bench/data/reflections_dev.jsonl --batches 1,10,100
    --json
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import sys
import time
import zlib
from collections import Counter
from pathlib import Path

import numpy as np
from langchain_core.messages import HumanMessage, SystemMessage
from pydantic import BaseModel, Field

from parallax.logic.merge_operations import merge_operations, normalise
from parallax.state.playbook import Operation, PlaybookItem, apply_operations

# canonical name -> spellings; the rule curator's stand-in for a model naming what a lesson is about
VOCAB = {
    "gross margin": ["gross margin", "gross profit margin"],
    "operating margin": ["operating margin", "operating profit margin"],
    "net profit margin": ["net profit margin", "net margin"],
    "ebitda margin": ["ebitda margin"],
    "return on equity": ["return on equity", "roe"],
    "return on assets": ["return on assets", "roa"],
    "return on investment": ["return on investment", "roi"],
    "current ratio": ["current ratio"],
    "quick ratio": ["quick ratio", "acid-test ratio"],
    "working capital": ["working capital"],
    "debt-to-equity ratio": ["debt-to-equity", "debt to equity", "d/e ratio"],
    "interest coverage ratio": ["interest coverage", "times interest earned"],
    "dscr": ["dscr", "debt service coverage"],
    "sharpe ratio": ["sharpe"],
    "sortino ratio": ["sortino"],
    "treynor ratio": ["treynor"],
    "jensen's alpha": ["jensen's alpha"],
    "capm": ["capm", "capital asset pricing model"],
    "npv": ["npv", "net present value"],
    "present value": ["present value", "pv"],
    "future value": ["future value", "fv"],
    "compound interest": ["compound interest"],
    "simple interest": ["simple interest"],
    "effective annual rate": ["effective annual rate", "ear"],
    "apr": ["apr", "annual percentage rate"],
    "cagr": ["cagr", "compound annual growth rate"],
    "dividend yield": ["dividend yield"],
    "dividend payout ratio": ["payout ratio"],
    "eps": ["eps", "earnings per share"],
    "p/e ratio": ["p/e", "price-to-earnings", "price to earnings"],
    "p/b ratio": ["p/b", "price-to-book", "price to book"],
    "market capitalization": ["market cap", "market capitalization"],
    "enterprise value": ["enterprise value", "ev"],
    "ev/ebitda": ["ev/ebitda", "ev to ebitda"],
    "dividend discount model": ["dividend discount model", "ddm", "gordon growth model"],
    "cost of equity": ["cost of equity"],
    "wacc": ["wacc", "weighted average cost of capital"],
    "dso": ["dso", "days sales outstanding"],
    "receivables turnover": ["receivables turnover", "ar turnover", "accounts receivable turnover"],
    "inventory turnover": ["inventory turnover"],
    "free cash flow": ["free cash flow", "fcf"],
    "operating cash flow": ["operating cash flow", "ocf"],
    "purchasing power parity": ["purchasing power parity", "ppp"],
    "interest rate parity": ["interest rate parity", "irp"],
    "put-call parity": ["put-call parity"],
    "black-scholes": ["black-scholes"],
    "modigliani-miller": ["modigliani-miller", "mm theorem"],
    "gdp": ["gdp", "gross domestic product"],
    "balance of trade": ["balance of trade", "trade balance"],
    "unemployment rate": ["unemployment rate"],
}
_SPELLINGS = sorted(((s, c) for c, ss in VOCAB.items() for s in ss), key=lambda sc: -len(sc[0]))
_NAME = re.compile("|".join(rf"(?<![\w/-]){re.escape(s)}(?![\w/-])" for s, _ in _SPELLINGS), re.I)
_TAG = re.compile(r"\b[A-Z][a-z]+(?:[A-Z][a-z0-9]*){2,}\b")  # an XBRL tag (CamelCase)
_CANON = {s: c for s, c in _SPELLINGS}
_CONTRAST = re.compile(r"(?:unlike|not|instead of|rather than)\s+(?:the\s+)?$", re.I)


def lesson_sentence(text: str) -> str:
    return text.split("Lesson:", 1)[1].strip() if "Lesson:" in text else text.strip()


def names(sentence: str) -> list[tuple[int, str]]:
    return sorted(
        [(m.start(), _CANON[m.group(0).lower()]) for m in _NAME.finditer(sentence)]
        + [(m.start(), m.group(0).lower()) for m in _TAG.finditer(sentence)]
    )


def subject(sentence: str) -> list[str]:
    """The first named thing the sentence is about (not one it contrasts with), as `about`."""
    for start, name in names(sentence):
        if not _CONTRAST.search(sentence[max(0, start - 20) : start]):
            return [name]
    return []


def rule_curate(row: dict, about_mode: str = "subject") -> list[Operation]:
    """One add per reflection; `about_mode="all"` names every term mentioned (a sloppier
    curator)."""
    sentence = lesson_sentence(row["text"])
    about = (
        subject(sentence) if about_mode == "subject" else sorted({n for _, n in names(sentence)})
    )
    section = "xbrl" if _TAG.search(sentence) else "formulas" if about else "general"
    return [
        Operation(op="add", section=section, text=sentence, about=about, provenance=[row["id"]])
    ]


async def model_curate(
    rows: list[dict], chat_model=None, concurrency: int = 4
) -> list[list[Operation]]:
    """The product's curator, one call per reflection (diagnosis = text before "Lesson:")."""
    from parallax.logic.curate import curate
    from parallax.runtime.run_context import resolved
    from parallax.state.context import Context
    from parallax.state.payloads import Reflection

    ctx, gate = resolved(Context(chat_model=chat_model)), asyncio.Semaphore(concurrency)

    async def one(row: dict) -> list[Operation]:
        diagnosis = row["text"].split("Lesson:", 1)[0].strip()
        async with gate:
            _, ops = await curate(
                Reflection(diagnosis=diagnosis, lessons=[lesson_sentence(row["text"])]),
                [row["id"]],
                ctx,
            )
        return ops

    return list(await asyncio.gather(*(one(r) for r in rows)))


class Summary(BaseModel):
    items: list[str] = Field(default_factory=list, description="playbook items, one lesson each")


def summary_messages(texts: list[str]) -> list:
    listed = "\n".join(f"- {t}" for t in texts)
    return [
        SystemMessage(
            "You maintain a playbook of lessons for a financial question-answering solver."
            " Summarise the reflections below into playbook items: concrete, reusable lessons, one"
            ' per item, without repeats. Reply with only a JSON object {"items": ["...", ...]}.'
        ),
        HumanMessage(f"Reflections from {len(texts)} solve runs:\n{listed}"),
    ]


async def baseline_run(
    rows: list[dict], size: int, max_tokens: int, log, chat_model=None
) -> tuple[list[str], int, float]:
    """One summarising model call per batch; the playbook is the union of what the calls return."""
    from parallax.runtime import settings
    from parallax.runtime.structured_call import BranchError, ask

    items: list[PlaybookItem] = []
    failures, started = 0, time.perf_counter()
    for n, start in enumerate(range(0, len(rows), size)):
        batch = rows[start : start + size]
        try:
            result = await ask(
                summary_messages([r["text"] for r in batch]),
                Summary,
                model=settings.load().chat_model_name,
                temperature=0.0,
                timeout_s=300,
                max_attempts=2,
                max_reasks=1,
                max_tokens=max_tokens,
                chat_model=chat_model,
            )
            texts = [t for t in result.value.items if isinstance(t, str) and t.strip()]
        except BranchError as exc:
            failures, texts = failures + 1, []
            log(f"  baseline batch {n}: {exc}")
        ops = [
            Operation(op="add", text=" ".join(t.split()), provenance=[f"batch{n}"]) for t in texts
        ]
        items = apply_operations(items, ops, n + 1)
    return [i.text for i in items if i.status == "active"], failures, time.perf_counter() - started


def figures(item_lessons: list[str | None], lessons_total: int, seconds: float) -> dict:
    known = [lesson for lesson in item_lessons if lesson is not None]
    return {
        "items": len(item_lessons),
        "lessons_total": lessons_total,
        "lessons_retained": len(set(known)),
        "duplicate_items": len(known) - len(set(known)),
        "seconds": round(seconds, 3),
    }


def lesson_of(provenance: list[str], label: dict[str, str]) -> str | None:
    votes = Counter(label[p] for p in provenance if p in label)
    return min(votes, key=lambda lesson: (-votes[lesson], lesson)) if votes else None


def main(argv: list[str] | None = None, chat_model=None) -> dict:
    """`chat_model`: a factory for the model curator and the baseline (tests); default the
    configured endpoint."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--reflections", required=True, type=Path)
    parser.add_argument("--batches", default="1,10,100")
    parser.add_argument("--dump", type=Path)
    parser.add_argument("--json", action="store_true")
    parser.add_argument("--curator", choices=["rule", "model"], default="rule")
    parser.add_argument(
        "--about",
        choices=["subject", "all"],
        default="subject",
        help="rule curator: name the lesson's subject, or every term it mentions",
    )
    parser.add_argument("--baseline", choices=["model", "none"], default="model")
    parser.add_argument("--baseline-max-tokens", type=int, default=384)
    parser.add_argument(
        "--threshold", type=float, default=None, help="merge threshold (default: the merge's)"
    )
    parser.add_argument(
        "--embedder",
        choices=["minilm", "bow"],
        default="minilm",
        help="bow: offline bag-of-words, for tests",
    )
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(message, file=sys.stderr, flush=True)

    rows = [json.loads(line) for line in args.reflections.read_text().splitlines() if line.strip()]
    label = {r["id"]: r["lesson"] for r in rows}
    lessons_total = len(set(label.values()))
    sizes = [int(b) for b in args.batches.split(",") if b.strip()]
    if args.embedder == "bow":
        embed = bag_of_words
    else:
        from parallax.runtime.embeddings import embed
    started = time.perf_counter()
    op_lists = (
        [rule_curate(r, args.about) for r in rows]
        if args.curator == "rule"
        else asyncio.run(model_curate(rows, chat_model))
    )
    curate_seconds = time.perf_counter() - started
    embed(
        sorted({normalise(op.text) for ops in op_lists for op in ops})
    )  # load the model and warm the cache

    out = {
        "reflections": len(rows),
        "lessons_total": lessons_total,
        "curator": args.curator,
        "about": args.about if args.curator == "rule" else "model",
        "curate_seconds": round(curate_seconds, 3),
        "adds": sum(len(ops) for ops in op_lists),
        "batches": {},
    }
    for size in sizes:
        items: list[PlaybookItem] = []
        totals: Counter = Counter()
        started = time.perf_counter()
        for version, start in enumerate(range(0, len(op_lists), size), 1):
            result = merge_operations(
                op_lists[start : start + size], items, embed=embed, threshold=args.threshold
            )
            items = apply_operations(items, result.operations, version)
            totals.update(result.report)
        seconds = time.perf_counter() - started
        active = sorted((i for i in items if i.status == "active"), key=lambda i: i.id)
        out["batches"][str(size)] = {
            **figures([lesson_of(i.provenance, label) for i in active], lessons_total, seconds),
            "merges": -(-len(rows) // size),
            "superseded": totals["superseded"],
        }
        log(f"merge B={size}: {out['batches'][str(size)]}")
        if args.dump:
            args.dump.mkdir(parents=True, exist_ok=True)
            (args.dump / f"batch_{size}.json").write_text(
                json.dumps(
                    [{"id": i.id, "text": i.text, "provenance": i.provenance} for i in active],
                    indent=1,
                )
            )

    if args.baseline == "model":
        lesson_names = sorted(set(label.values()))
        vectors = embed([r["text"] for r in rows])
        centroids = np.stack(
            [vectors[[r["lesson"] == name for r in rows]].mean(axis=0) for name in lesson_names]
        )
        out["baseline"] = {}

        async def run_all() -> None:
            for size in sizes:
                texts, failures, seconds = await baseline_run(
                    rows, size, args.baseline_max_tokens, log, chat_model
                )
                nearest = (
                    [lesson_names[int(np.argmax(centroids @ v))] for v in embed(texts)]
                    if texts
                    else []
                )
                out["baseline"][str(size)] = {
                    **figures(nearest, lessons_total, seconds),
                    "failed_calls": failures,
                }
                log(f"baseline B={size}: {out['baseline'][str(size)]}")
                if args.dump:
                    (args.dump / f"baseline_batch_{size}.json").write_text(
                        json.dumps(texts, indent=1)
                    )

        asyncio.run(run_all())
    else:
        out["baseline"] = None

    first, last = out["batches"][str(sizes[0])], out["batches"][str(sizes[-1])]
    out["goals"] = {
        "retained_ratio": round(last["lessons_retained"] / max(1, first["lessons_retained"]), 4),
        "retained_ok": last["lessons_retained"] >= 0.98 * first["lessons_retained"],
        "duplicates_ok": all(
            b["duplicate_items"] <= 0.10 * max(1, b["items"]) for b in out["batches"].values()
        ),
    }
    if args.json:
        print(json.dumps(out, indent=1))
    else:
        for size, b in out["batches"].items():
            print(f"B={size:>4}  merge: {b}")
            if out["baseline"]:
                print(f"        baseline: {out['baseline'][size]}")
        print(out["goals"])
    return out


def bag_of_words(texts: list[str]) -> np.ndarray:
    """Hashing bag-of-words embedder: offline and instant, only for tests and smoke runs."""
    m = np.zeros((len(texts), 512))
    for i, t in enumerate(texts):
        for w in re.findall(r"[a-z0-9]+", t.lower()):
            m[i, zlib.crc32(w.encode()) % 512] += 1
    return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-9)


if __name__ == "__main__":
    main()
