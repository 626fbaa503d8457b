"""How a task runs: the rules behind `auto`, and the checks every graph input passes.

`auto` uses the shape of the input, not a model call: a request with several deliverables
or steps (a numbered or bulleted list of asks, or asks joined by "then", "and", "finally")
is planned (the `plan` graph); long or multi-part input is sectioned; a short request for a piece
of work with no single right wording (write a function, fix a bug, draft a letter) is speculated on
(several candidates, a verifier picks one), a short question whose answer can be checked by
agreement is voted on, and anything else (open-ended writing, explanations) is answered once.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

from parallax.logic.slicing import HEADING
from parallax.logic.speculation import MAX_CANDIDATES
from parallax.logic.user_schema import SchemaProblem, checked_schema
from parallax.runtime.storage.namespaces import NAME_RE
from parallax.state.context import Context, filled
from parallax.state.solve import Route

OPEN_ENDED = re.compile(
    r"^\s*(write|draft|compose|summari[sz]e|explain|describe|translate|rewrite|list|brainstorm|create)\b", re.I
)
CHECKABLE = re.compile(r"\?|\d|^\s*(is|are|was|were|do|does|did|can|will|how many|how much|what|which|who|when)\b", re.I)
SPECULATIVE = re.compile(
    r"^\s*(?:(?:please\s+)?(?:write|implement|code|create|generate)\b[^.?!\n]{0,60}?\b(?:function|class|method|script|"
    r"program|query|regex|patch|unit tests?|sql)\b|(?:please\s+)?(?:draft|fix|patch|refactor)\b)", re.I)
"""Requests for a function, a patch or a draft: several candidates are worth more than one (speculate)."""
SHORT_CHARS = 800
MAX_VOTES = 1000
MAX_REPLANS = 5
STEP_LINE = re.compile(r"^\s*(?:\d{1,2}[.)]|[-*\u2022]|step \d{1,2}[:.)]?)\s+\w", re.I | re.M)
ASK = re.compile(
    r"(?:^|[.;:!?]\s+|,\s*|\b(?:then|and|finally|also|next)\s+)(?:then\s+|also\s+)?"
    r"(write|draft|compose|summari[sz]e|explain|describe|translate|rewrite|list|create|compute|calculate|"
    r"find|compare|check|estimate|outline|add|fix|update|rename|refactor|implement|test|analy[sz]e|extract|name|give|"
    r"identify|suggest|propose|review|design|build|read|answer)\b",
    re.I | re.M)
PLAN_MAX_REQUEST_CHARS = 4000
"""Longer requests are documents to read, not lists of steps (they go to `section`)."""


DEFAULT_VOTES = 5


def requested_votes(state: Mapping[str, Any]) -> object:
    """The vote branches this run asks for. Before the tally was named `vote_counts`, `votes` was also
    the key of a run's tally: on a thread checkpointed then, a dict there is that result, not a request."""
    votes = state.get("votes", DEFAULT_VOTES)
    return DEFAULT_VOTES if isinstance(votes, dict) else votes


def votes_of(state: Mapping[str, Any]) -> int:
    """`requested_votes` of an input that passed `validate` (InvalidInput for one that would not)."""
    votes = requested_votes(state)
    if not isinstance(votes, int) or isinstance(votes, bool):
        raise InvalidInput(f"votes must be a whole number of at least 1, got {votes!r}")
    return votes


class InvalidInput(ValueError):
    """The graph input cannot be run; the message says what to change."""


def choose_route(task: str, question: str, slice_chars: int, has_check: bool = False) -> Route:
    """The route of a run in mode auto. A check command means speculate: it can only judge candidates."""
    if has_check:
        return "speculate"
    if len(task) > slice_chars or (len(HEADING.findall(task)) >= 3 and len(task) > 2 * SHORT_CHARS):
        return "section"
    ask = question or task
    if len(task) + len(question) <= SHORT_CHARS and SPECULATIVE.match(ask):
        return "speculate"
    if len(task) + len(question) <= SHORT_CHARS and CHECKABLE.search(ask) and not OPEN_ENDED.match(ask):
        return "vote"
    return "direct"


def wants_plan(request: str) -> bool:
    """Whether a request names several deliverables or steps (two list items, or two asks)."""
    if not request or len(request) > PLAN_MAX_REQUEST_CHARS:
        return False
    return len(STEP_LINE.findall(request)) >= 2 or len(ASK.findall(request)) >= 2


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def validate(state: Mapping[str, Any], ctx: Context) -> None:
    """Raise InvalidInput (one line: what is wrong and how to fix it) for input that cannot run."""
    if not isinstance(state, dict):
        raise InvalidInput("the input must be an object with at least a task")
    pages = state.get("pages")
    if pages is not None and not (isinstance(pages, list) and all(isinstance(p, str) for p in pages)):
        raise InvalidInput("pages must be a list of texts, one per page, page 1 first")
    task = state.get("task")
    if not isinstance(task, str) or not task.strip():
        raise InvalidInput("task is empty: give the text to work on (or a document)")
    max_chars = filled(ctx.max_input_chars)
    if len(task) > max_chars:
        raise InvalidInput(
            f"task has {len(task)} characters, above the limit of {ctx.max_input_chars} (PARALLAX_MAX_INPUT_CHARS)"
        )
    if state.get("mode", "auto") not in ("auto", "direct", "section", "vote", "speculate"):
        raise InvalidInput(f"unknown mode {state.get('mode')!r}: use auto, direct, section, vote or speculate")
    _validate_speculation(state)
    question = state.get("question", "")
    if not isinstance(question, str):
        raise InvalidInput(f"question must be text, got {type(question).__name__}")
    if len(task) + len(question) > max_chars:
        raise InvalidInput(f"task and question have {len(task) + len(question)} characters, above the limit of "
                           f"{ctx.max_input_chars} (PARALLAX_MAX_INPUT_CHARS)")
    votes = requested_votes(state)
    if not isinstance(votes, int) or isinstance(votes, bool) or votes < 1:
        raise InvalidInput(f"votes must be a whole number of at least 1, got {votes!r}")
    if votes > MAX_VOTES:
        raise InvalidInput(f"votes must be at most {MAX_VOTES}, got {votes}")
    for field in ("tenant", "playbook"):
        if field in state and not (isinstance(state[field], str) and NAME_RE.match(state[field])):
            raise InvalidInput(f"bad {field} {state[field]!r}: use 1-64 letters, digits, '-' or '_'")
    if not isinstance(state.get("parent_trace", ""), str):
        raise InvalidInput("parent_trace must be the text id of the trace this run is part of")
    validate_budget(state)
    min_votes = state.get("min_votes")
    if min_votes is not None and not (_whole(min_votes) and 1 <= min_votes <= votes):
        raise InvalidInput(f"min_votes must be between 1 and votes ({votes}), got {min_votes!r}")
    if state.get("output_schema") is not None:
        try:
            checked_schema(state["output_schema"])
        except SchemaProblem as exc:
            raise InvalidInput(str(exc)) from None


def validate_budget(state: Mapping[str, Any]) -> None:
    """max_cost: USD above 0; max_tokens: a whole number of at least 1 (logic/budget.py)."""
    cost = state.get("max_cost")
    if cost is not None and (isinstance(cost, bool) or not isinstance(cost, (int, float)) or not 0 < cost < float("inf")):
        raise InvalidInput(f"max_cost must be a number of US dollars above 0 (like 0.05), got {cost!r}")
    tokens = state.get("max_tokens")
    if tokens is not None and not (_whole(tokens) and tokens >= 1):
        raise InvalidInput(f"max_tokens (the run's token budget) must be a whole number of at least 1, got {tokens!r}")


def _validate_speculation(state: Mapping[str, Any]) -> None:
    candidates = state.get("candidates", 3)
    if not _whole(candidates) or not 1 <= candidates <= MAX_CANDIDATES:
        raise InvalidInput(f"candidates must be a whole number from 1 to {MAX_CANDIDATES}, got {candidates!r}")
    for field in ("check", "check_file", "repo"):
        if field in state and not isinstance(state[field], str):
            raise InvalidInput(f"{field} must be text, got {type(state[field]).__name__}")
    check_file = state.get("check_file") or ""
    if check_file and (check_file.startswith(("/", "\\")) or ".." in check_file.replace("\\", "/").split("/")
                       or ".git" in check_file.split("/")):
        raise InvalidInput(f"check_file {check_file!r} must be a path inside the candidate's folder, like solution.py")
    mode = state.get("mode", "auto")
    if mode not in ("speculate", "auto") and (state.get("check") or state.get("check_file")):
        raise InvalidInput(f"a check works with mode speculate (or auto, which then speculates), not {mode}")
    if mode == "speculate" and state.get("repo") and not state.get("check"):
        raise InvalidInput("repo with mode speculate needs a check command to run in each candidate's worktree")
    if (mode == "speculate" or state.get("check")) and state.get("output_schema") is not None:
        raise InvalidInput("an output schema works with the direct, vote and section modes, not speculate: "
                           "choose one of them, or leave the schema out")


def pages_of(state: Mapping[str, Any]) -> list[str]:
    """The pages the task was read from, when it was (`pages` that make up the task); else []."""
    pages = state.get("pages") or []
    return pages if pages and state.get("task", "") in ("", "\n\n".join(pages)) else []


def validate_plan_input(state: Mapping[str, Any], ctx: Context) -> None:
    """The solve checks, plus what only a plan run takes (mode plan, max_replans, repo, plan)."""
    if not isinstance(state, dict):
        raise InvalidInput("the input must be an object with at least a task")
    if state.get("mode", "auto") not in ("auto", "plan"):
        raise InvalidInput(f"unknown mode {state.get('mode')!r} for the plan graph: use plan or auto")
    if state.get("output_schema") is not None:
        raise InvalidInput("an output schema works with the direct, vote and section modes, not plan: "
                           "choose one of them, or leave the schema out")
    validate({**state, "mode": "auto"}, ctx)
    replans = state.get("max_replans", 1)
    if not _whole(replans) or not 0 <= replans <= MAX_REPLANS:
        raise InvalidInput(f"max_replans must be a whole number from 0 to {MAX_REPLANS}, got {replans!r}")
    for field in ("repo", "test_command"):
        if field in state and not isinstance(state[field], str):
            raise InvalidInput(f"{field} must be text, got {type(state[field]).__name__}")
    if "plan" in state and not isinstance(state["plan"], dict):
        raise InvalidInput("plan must be an object with a list of tasks")
