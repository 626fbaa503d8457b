"""How a task runs: the rules behind `auto`, and what a solve or plan input must hold.

`auto` reads the input's shape, not a model (docs/how-it-works.md); the input checks are the ones
every face runs (docs/internals/runs.md#one-check-for-every-face).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from parallax.logic.input_rules import InvalidInput as InvalidInput
from parallax.logic.input_rules import caller_input, check_typed
from parallax.logic.slicing import HEADING
from parallax.logic.user_schema import SchemaProblem, checked_schema
from parallax.state.context import Context, setting
from parallax.state.plan import PlanInput
from parallax.state.solve import INTERNAL, SolveInput
from parallax.state.vocabulary import BUSINESS_ROUTES, Route, listed

OPEN_ENDED = re.compile(
    r"^\s*(write|draft|compose|summari[sz]e|explain|describe|translate|rewrite|list|brainstorm|create)\b",
    re.I,
)
CHECKABLE = re.compile(
    r"\?|\d|^\s*(is|are|was|were|do|does|did|can|will|how many|how much|what|which|who|when)\b",
    re.I,
)
SPECULATIVE = re.compile(
    r"^\s*(?:(?:please\s+)?(?:write|implement|code|create|generate)\b[^.?!\n]{0,60}?\b(?:function|class|method|script|"
    r"program|query|regex|patch|unit tests?|sql)\b|(?:please\s+)?(?:draft|fix|patch|refactor)\b)",
    re.I,
)
"""Requests for a function, a patch or a draft: several candidates are worth more than one
(speculate)."""
SHORT_CHARS = 800
STEP_LINE = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022]|step \d{1,2}[:.)]?)\s+\w", re.I | re.M)
ASK = re.compile(
    r"(?:^|[.;:!?]\s+|,\s*|\b(?:then|and|finally|also|next)\s+)(?:then\s+|also\s+)?"
    r"(write|draft|compose|summari[sz]e|explain|describe|translate|rewrite|list|create|compute|calculate|"
    r"find|compare|check|estimate|outline|add|fix|update|rename|refactor|implement|test|analy[sz]e|extract|name|give|"
    r"identify|suggest|propose|review|design|build|read|answer)\b",
    re.I | re.M,
)
PLAN_MAX_REQUEST_CHARS = 4000
"""Longer requests are documents to read, not lists of steps (they go to `section`)."""
SCHEMA_MODES = f"the {listed(BUSINESS_ROUTES, 'and')} modes"
"""The modes an output schema works with, as a refusal names them."""

DEFAULT_VOTES = 5


def requested_votes(state: Mapping[str, Any]) -> object:
    """The vote branches this run asks for. A dict under `votes` is a tally an older checkpoint kept
    there (the tally's key is `vote_counts`), not a request."""
    votes = state.get("votes", DEFAULT_VOTES)
    return DEFAULT_VOTES if isinstance(votes, dict) else votes


def votes_of(state: Mapping[str, Any]) -> int:
    """`requested_votes` of an input that passed `validate` (InvalidInput for one that would
    not)."""
    votes = requested_votes(state)
    if not isinstance(votes, int) or isinstance(votes, bool):
        raise InvalidInput(f"votes must be a whole number, got {votes!r}", "votes")
    return votes


def choose_route(task: str, question: str, slice_chars: int, has_check: bool = False) -> Route:
    """The route of a run in mode auto. A check command means speculate: it can only judge
    candidates."""
    if has_check:
        return "speculate"
    if len(task) > slice_chars or (len(HEADING.findall(task)) >= 3 and len(task) > 2 * SHORT_CHARS):
        return "section"
    ask = question or task
    if len(task) + len(question) <= SHORT_CHARS and SPECULATIVE.match(ask):
        return "speculate"
    if (
        len(task) + len(question) <= SHORT_CHARS
        and CHECKABLE.search(ask)
        and not OPEN_ENDED.match(ask)
    ):
        return "vote"
    return "direct"


def wants_plan(request: str) -> bool:
    """Whether a request names several deliverables or steps (two list items, or two asks)."""
    if not request or len(request) > PLAN_MAX_REQUEST_CHARS:
        return False
    return len(STEP_LINE.findall(request)) >= 2 or len(ASK.findall(request)) >= 2


def validate(state: Mapping[str, Any], ctx: Context) -> None:
    """Raise InvalidInput (one line: what is wrong and how to fix it) for input that cannot run: the
    solve input's definition (state/solve.py: types and bounds), then what depends on the run's
    settings and on other fields.
    """
    if not isinstance(state, dict):
        raise InvalidInput("the input must be an object with at least a task")
    given = caller_input(SolveInput, state, INTERNAL)
    if isinstance(
        given.get("votes"), dict
    ):  # a tally stored as `votes` by an older version (requested_votes)
        del given["votes"]
    check_typed(SolveInput, given)
    task = state.get("task")
    if not isinstance(task, str) or not task.strip():
        raise InvalidInput("task is empty: give the text to work on (or a document)", "task")
    max_chars = setting(ctx.max_input_chars)
    if len(task) > max_chars:
        raise InvalidInput(
            f"task has {len(task)} characters, above the limit of {ctx.max_input_chars}"
            " (PARALLAX_MAX_INPUT_CHARS)",
            "task",
        )
    pages = sum(len(page) for page in state.get("pages") or [])
    if pages > max_chars:
        raise InvalidInput(
            f"pages have {pages} characters, above the limit of {ctx.max_input_chars} "
            "(PARALLAX_MAX_INPUT_CHARS)",
            "pages",
        )
    _validate_speculation(state)
    question = state.get("question") or ""
    if len(task) + len(question) > max_chars:
        raise InvalidInput(
            f"task and question have {len(task) + len(question)} characters, above the limit of "
            f"{ctx.max_input_chars} (PARALLAX_MAX_INPUT_CHARS)",
            "question",
        )
    votes = votes_of(state)
    min_votes = state.get("min_votes")
    if min_votes is not None and min_votes > votes:
        raise InvalidInput(
            f"min_votes must be between 1 and votes ({votes}), got {min_votes!r}", "min_votes"
        )
    if state.get("output_schema") is not None:
        try:
            checked_schema(state["output_schema"])
        except SchemaProblem as exc:
            raise InvalidInput(str(exc), "output_schema") from None


def _validate_speculation(state: Mapping[str, Any]) -> None:
    mode = state.get("mode", "auto")
    if mode not in ("speculate", "auto") and (state.get("check") or state.get("check_file")):
        raise InvalidInput(
            f"a check works with mode speculate (or auto, which then speculates), not {mode}",
            "check",
        )
    if mode == "speculate" and state.get("repo") and not state.get("check"):
        raise InvalidInput(
            "repo with mode speculate needs a check command to run in each candidate's worktree",
            "repo",
        )
    if (mode == "speculate" or state.get("check")) and state.get("output_schema") is not None:
        raise InvalidInput(
            f"an output schema works with {SCHEMA_MODES}, not speculate: "
            "choose one of them, or leave the schema out",
            "output_schema",
        )


def pages_of(state: Mapping[str, Any]) -> list[str]:
    """The pages the task was read from, when it was (`pages` that make up the task); else []."""
    pages = state.get("pages") or []
    return pages if pages and state.get("task", "") in ("", "\n\n".join(pages)) else []


def validate_plan_input(state: Mapping[str, Any], ctx: Context) -> None:
    """The plan input's definition (state/plan.py: the solve input's fields and the plan's own), the
    solve checks, and what only a plan run holds: no output schema, no document."""
    if not isinstance(state, dict):
        raise InvalidInput("the input must be an object with at least a task")
    check_typed(PlanInput, caller_input(PlanInput, state, INTERNAL))
    if state.get("output_schema") is not None:
        raise InvalidInput(
            f"an output schema works with {SCHEMA_MODES}, not plan: "
            "choose one of them, or leave the schema out",
            "output_schema",
        )
    if state.get("document") is not None:
        raise InvalidInput(
            "the plan graph reads no document: send its text as task and the request as question",
            "document",
        )
    validate({**state, "mode": "auto"}, ctx)
