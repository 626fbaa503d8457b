"""`parallax export sft|preferences`: fine-tuning data from the stored traces.

Formats and sources: parallax/logic/exports.py and docs/data-loop.md; files are written atomically.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.console import Console

from parallax.cli.common import (
    AsJson,
    Tenant,
    check_output_dir,
    emit,
    fail,
    with_store,
    write_atomically,
)

if TYPE_CHECKING:
    from langgraph.store.base import BaseStore

    from parallax.state.trace_record import TraceRecord

export_app = typer.Typer(
    help=(
        "Fine-tuning data from stored runs: sft (OpenAI chat), preferences (TRL, OpenAI DPO, KTO)."
    ),
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)

Out = Annotated[Path, typer.Option("--out", "-o", help="JSONL file to write.")]
MinScore = Annotated[
    float,
    typer.Option(
        "--min-score", help="Feedback at least this counts a run without a target as right (0..1)."
    ),
]
Since = Annotated[
    str | None, typer.Option(help="Only runs from this far back (7d, 12h) or since a date.")
]


def _export(
    fmt: str, out: Path, min_score: float, tenant: str, since: str | None, as_json: bool
) -> None:
    from parallax.logic.exports import conversation_keys, export
    from parallax.logic.run_stats import parse_since, select
    from parallax.runtime.storage.edit_conversations import EditConversations
    from parallax.runtime.storage.stores import traces_in

    if not 0 <= min_score <= 1:
        fail(f"--min-score must be from 0 to 1, got {min_score}")
    if out.suffix.lower() not in (".jsonl", ".json"):
        fail(f"--out must be a .jsonl file, got {out.name}")
    check_output_dir(out)

    async def work(store: BaseStore) -> list[TraceRecord]:
        traces = select(await traces_in(store, tenant).traces(), parse_since(since))
        for (
            trace
        ) in traces:  # a plan run's edit candidates' conversations are kept beside its trace
            if keys := conversation_keys(trace):
                kept = EditConversations(store, tenant, trace["trace_id"])
                trace["edit_conversations"] = {
                    key: found for key in keys if (found := await kept.load(key))
                }
        return traces

    traces = with_store(work, tenant)
    result = export(traces, fmt, min_score)
    write_atomically(
        out,
        "".join(json.dumps(line, ensure_ascii=False) + "\n" for line in result.lines).encode(
            "utf-8"
        ),
    )
    report = {**result.report(), "runs": len(traces), "out": str(out)}
    if as_json:
        return emit(report)
    left = ", ".join(f"{n} {why}" for why, n in report["left_out"].items()) or "none"
    Console(stderr=True, highlight=False).print(
        f"wrote {report['written']} {fmt} examples to {out} from {len(traces)} runs; "
        f"left out: {left}"
    )


@export_app.command("sft")
def sft(
    out: Out,
    min_score: MinScore = 1.0,
    tenant: Tenant = "default",
    since: Since = None,
    as_json: AsJson = False,
) -> None:
    """OpenAI chat fine-tuning lines ({"messages": [system, user, assistant]}) from runs that were
    right (in speculate runs, the candidate that passed its check, unless a person's target or
    thumbs-down says otherwise; in plan runs' speculative edit tasks, the winner's tool-calling
    conversation)."""
    _export("sft", out, min_score, tenant, since, as_json)


@export_app.command("preferences")
def preferences(
    out: Out,
    fmt: Annotated[str, typer.Option("--format", help="trl | openai | kto")] = "trl",
    min_score: MinScore = 1.0,
    tenant: Tenant = "default",
    since: Since = None,
    as_json: AsJson = False,
) -> None:
    """Preference pairs from vote runs with a known right answer and checked speculate runs (trl,
    openai; plan runs' speculative edit tasks in trl only), or unpaired verdicts (kto)."""
    if fmt not in ("trl", "openai", "kto"):
        fail(f"unknown format {fmt!r}: use trl, openai or kto")
    _export(fmt, out, min_score, tenant, since, as_json)
