"""`parallax feedback TRACE_ID --score S`: a person's verdict on a run, stored with its trace.

S is a number from 0 to 1, or `up` / `down`. The entry (score, comment, who) is redacted and
kept with the trace under the tenant; it counts in `parallax stats`, in the exports, and
in a gray release still running that served the run. An unknown trace or a bad score:
one line, exit 2, nothing written. The `feedback` graph does the same under the graph API.
"""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from parallax.cli.common import AsJson, By, Tenant, emit, fail, no_store_yet, who, with_store


def feedback(
    trace_id: Annotated[str, typer.Argument(help="The trace id `parallax run` printed.")],
    score: Annotated[str, typer.Option("--score", help="0..1 (1 = right), or up / down.")],
    comment: Annotated[str, typer.Option("--comment", help="Why (stored redacted).")] = "",
    tenant: Tenant = "default",
    by: By = None,
    as_json: AsJson = False,
) -> None:
    """Score a run (0..1 or up/down), with an optional comment; stored with its trace."""
    from parallax.logic.feedback import BadFeedback, give_feedback, parse_score
    from parallax.logic.run_record import latest_score

    try:
        parse_score(score)
    except BadFeedback as exc:
        fail(str(exc))
    from parallax.runtime.storage.stores import has_cli_store

    if not has_cli_store():
        no_store_yet()
    trace = with_store(lambda store: give_feedback(store, tenant, trace_id, score, comment, by or who()), tenant,
                       write=True)
    if as_json:
        return emit({"trace_id": trace_id, "tenant": tenant, "score": latest_score(trace),
                     "feedback": trace["feedback"]})
    Console(highlight=False).print(f"trace {trace_id}: feedback {latest_score(trace)} "
                                   f"({len(trace['feedback'])} in all)")
