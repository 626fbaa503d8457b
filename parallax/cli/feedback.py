"""`parallax feedback TRACE_ID --score S | --correct ANSWER`: a person's verdict on a run.

See docs/data-loop.md.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from parallax.cli.common import AsJson, By, Tenant, emit, fail, no_store_yet, who, with_store


def feedback(
    trace_id: Annotated[str, typer.Argument(help="The trace id `parallax run` printed.")],
    score: Annotated[
        str | None, typer.Option("--score", help="0..1 (1 = right), or up / down.")
    ] = None,
    correct: Annotated[
        str | None,
        typer.Option(
            "--correct",
            help="The right answer: stored as the run's target (scored against its answer).",
        ),
    ] = None,
    comment: Annotated[str, typer.Option("--comment", help="Why (stored redacted).")] = "",
    tenant: Tenant = "default",
    by: By = None,
    as_json: AsJson = False,
) -> None:
    """Score a run (0..1 or up/down) or give its right answer (--correct); stored with its trace."""
    from parallax.logic.feedback import BadFeedback, correct_answer, give_feedback, parse_score
    from parallax.logic.run_record import latest_score

    if (score is None) == (correct is None):
        fail("give --score (0..1, up or down) or --correct ANSWER, one of the two")
    try:
        if score is not None:
            parse_score(score)
        elif not (correct or "").strip():
            raise BadFeedback("--correct needs the right answer, not an empty text")
    except BadFeedback as exc:
        fail(str(exc))
    from parallax.runtime.storage.stores import has_cli_store

    if not has_cli_store():
        no_store_yet()
    if correct is not None:
        if comment:
            fail("--comment goes with --score: a correction's comment is the answer itself")
        trace = with_store(
            lambda store: correct_answer(store, tenant, trace_id, correct, by or who()),
            tenant,
            write=True,
        )
    else:
        given = score
        trace = with_store(
            lambda store: give_feedback(store, tenant, trace_id, given or "", comment, by or who()),
            tenant,
            write=True,
        )
    if as_json:
        return emit(
            {
                "trace_id": trace_id,
                "tenant": tenant,
                "score": latest_score(trace),
                "feedback": trace["feedback"],
                **(
                    {"target": trace.get("target"), "correct": trace.get("correct")}
                    if correct is not None
                    else {}
                ),
            }
        )
    if correct is not None:
        Console(highlight=False).print(
            f"trace {trace_id}: target set; the run's answer was "
            f"{'right' if trace.get('correct') else 'wrong'} ({len(trace['feedback'])} "
            "feedback in all)"
        )
        return
    Console(highlight=False).print(
        f"trace {trace_id}: feedback {latest_score(trace)} ({len(trace['feedback'])} in all)"
    )
