"""What a learn, loop, stats, feedback, release or chat input must hold beyond its definition.

See docs/internals/runs.md#one-check-for-every-face.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from parallax.logic.chat_reply import text_of
from parallax.logic.feedback import BadFeedback, parse_score
from parallax.logic.input_rules import InvalidInput, caller_input, check_typed
from parallax.logic.release_decision import check_rule, check_share
from parallax.logic.routing import validate
from parallax.logic.run_stats import BadFilter, parse_since
from parallax.logic.trace_learning import LEASE_S
from parallax.state.chat import ChatInput, bounded_messages
from parallax.state.context import Context
from parallax.state.data_loop import FeedbackInput, ReleaseInput, StatsInput
from parallax.state.learn import MAX_TASK_RUNS, LearnInput
from parallax.state.loop import LoopInput

RULE_DEFAULTS: dict[str, Any] = {
    "error_rate": 0.05,
    "margin": 0.05,
    "min_runs": 50,
    "max_runs": 1600,
}
"""A canary's decision rule when the input leaves it out (logic/release_decision.py)."""
LOOP_DEFAULTS: dict[str, Any] = {"limit": 200, "share": 10.0, **RULE_DEFAULTS, "lease_s": LEASE_S}
"""A loop round's settings when the input leaves them out."""
LEARN_DEFAULTS: dict[str, Any] = {
    "epochs": 1,
    "batch": 8,
    "val_size": 50,
    "lease_s": LEASE_S,
    "limit": None,
}
"""A learn run's settings when the input leaves them out."""
RULE_FIELDS = {
    "error rate": "error_rate",
    "margin": "margin",
    "min runs": "min_runs",
    "canary share": "share",
}
"""The field a refusal of logic/release_decision.py is about, by the words it starts with."""


def _since(state: Mapping[str, Any]) -> None:
    try:
        parse_since(state.get("since"))
    except BadFilter as exc:
        raise InvalidInput(str(exc), "since") from None


def _rule(given: Mapping[str, Any], share: str, whole: bool) -> None:
    """The canary's share (`whole`: 100, every thread, allowed too) and decision rule, or
    InvalidInput naming the field."""
    try:
        if given.get(share) is not None and not (whole and given[share] >= 100):
            check_share(float(given[share]))
        check_rule(
            float(given["error_rate"]),
            float(given["margin"]),
            int(given["min_runs"]),
            int(given["max_runs"]),
        )
    except ValueError as exc:
        words = str(exc)
        field = next((name for start, name in RULE_FIELDS.items() if start in words), "min_runs")
        raise InvalidInput(words, share if field == "share" else field) from None


def validate_learn_input(state: Mapping[str, Any]) -> dict[str, Any]:
    """A learn run's settings (the input's, else LEARN_DEFAULTS), or InvalidInput for a learn input
    that cannot run (nodes/schedule.py `start` and every face run it)."""
    given = caller_input(LearnInput, state)
    check_typed(LearnInput, given)
    from_traces, tasks = bool(state.get("from_traces")), state.get("tasks") or []
    if from_traces and tasks:
        raise InvalidInput("give `tasks` or `from_traces`, not both", "tasks")
    if not tasks and not from_traces:
        raise InvalidInput(
            "no training tasks: give at least one {input, target} task, or from_traces", "tasks"
        )
    epochs = state.get("epochs") or 1
    if from_traces and epochs != 1:
        raise InvalidInput("from_traces learns from each run once: leave epochs out", "epochs")
    runs = len(tasks[: state.get("limit") or len(tasks)]) * epochs
    if runs > MAX_TASK_RUNS:
        raise InvalidInput(
            f"epochs times tasks must be at most {MAX_TASK_RUNS}, got {epochs} x {runs // epochs} ="
            f" {runs}: use fewer epochs (or tasks)",
            "epochs",
        )
    _since(state)
    return {**LEARN_DEFAULTS, **{k: given[k] for k in LEARN_DEFAULTS if k in given}}


def validate_loop_input(state: Mapping[str, Any]) -> dict[str, Any]:
    """A loop round's settings (the input's, else LOOP_DEFAULTS), or InvalidInput
    (nodes/open_round.py, every face)."""
    given = caller_input(LoopInput, state)
    check_typed(LoopInput, given)
    _since(state)
    settings = {**LOOP_DEFAULTS, **{k: given[k] for k in LOOP_DEFAULTS if k in given}}
    _rule(settings, "share", whole=False)  # a round's candidate always starts as a canary
    return settings


def validate_stats_input(state: Mapping[str, Any]) -> None:
    """InvalidInput for a stats input that cannot run (nodes/report_stats.py, every face)."""
    check_typed(StatsInput, caller_input(StatsInput, state))
    _since(state)


def validate_feedback_input(state: Mapping[str, Any]) -> None:
    """InvalidInput for feedback that cannot be stored (nodes/store_feedback.py, every face);
    whether the trace exists is the store's to say."""
    check_typed(FeedbackInput, caller_input(FeedbackInput, state))
    if ("score" in state) == ("correct" in state):
        raise InvalidInput(
            "give `score` (0..1, up or down) or `correct` (the right answer), one of the two",
            "score",
        )
    try:
        if "score" in state:
            parse_score(state["score"])
        elif not str(state["correct"]).strip():
            raise BadFeedback("correct is empty: give the right answer, or a score")
    except BadFeedback as exc:
        raise InvalidInput(str(exc), "score" if "score" in state else "correct") from None


def validate_release_input(state: Mapping[str, Any]) -> None:
    """InvalidInput for a release step that cannot be taken (nodes/move_labels.py, every face)."""
    given = caller_input(ReleaseInput, state)
    check_typed(ReleaseInput, given)
    if given.get("action") == "release":
        if "version" not in given:
            raise InvalidInput("release needs a version: the version to serve", "version")
        _rule({**RULE_DEFAULTS, **given}, "canary", whole=True)


def validate_chat_input(
    state: Mapping[str, Any], ctx: Context, *, with_messages: bool = True
) -> None:
    """InvalidInput for a chat turn that cannot run (nodes/condense_turn.py without the thread's
    messages, every face with the new ones): the run options as a solve run of the last human
    message would take them."""
    given = caller_input(
        ChatInput, state, frozenset() if with_messages else frozenset({"messages"})
    )
    check_typed(ChatInput, given)
    if not with_messages:
        return
    humans = [m for m in bounded_messages(given.get("messages") or []) if m.type == "human"]
    task = text_of(humans[-1]) if humans else ""
    if not task:
        raise InvalidInput("send a human message with some text: it is the task", "messages")
    run_options = {k: v for k, v in given.items() if k != "messages"}
    validate({**run_options, "task": task}, ctx)
