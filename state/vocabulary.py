"""Modes, branch kinds and plan task kinds, each defined once, with the mappings between them.

Every other list of them (CLI choices, served model names, input checks, prompt names) is derived
from here; parallax/logic/branch_kinds.py registers what each business kind does, keyed by the
same names, and tests/unit/test_vocabulary.py fails when the two drift apart.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, get_args

Route = Literal["direct", "section", "vote", "speculate"]
"""How a run is carried out: the mode it ran in, once `auto` has chosen."""
Mode = Literal["auto", Route]
"""What a caller may ask of the solve graph: a route, or `auto` to have one chosen."""
BusinessKind = Literal["direct", "slice", "vote"]
"""Kinds of branch that do the task itself (the rest check, judge or learn from them)."""
BranchKind = Literal[
    BusinessKind,
    "judge",
    "red_team",
    "safety",
    "reflect",
    "curate",
    "plan",
    "tool",
    "edit",
    "combine",
    "contradiction",
    "candidate",
    "compare",
    "condense",
]
TaskKind = Literal["solve", "section", "vote", "tool", "edit"]
"""Kinds of task in a plan."""

ROUTES: tuple[Route, ...] = get_args(Route)
MODES: tuple[Mode, ...] = get_args(Mode)
PLAN = "plan"
"""The mode that runs the plan graph instead of the solve graph."""
RUN_MODES: tuple[str, ...] = (*MODES, PLAN)
"""Every mode a run may be asked for, as the CLI offers them."""
TASK_KINDS: tuple[TaskKind, ...] = get_args(TaskKind)


@dataclass(frozen=True)
class Business:
    """A business branch kind: the route that fans out to it and the templates it is built from."""

    route: Route
    prompt: str
    """The template (prompts/templates.py) of a run without an output schema."""
    typed_prompt: str
    """The template of a run with an output schema."""
    per_slice: bool = False
    """One branch per slice of the input (nodes/route.py cuts them); its record keeps the index."""


BUSINESS_KINDS: dict[BusinessKind, Business] = {
    "direct": Business("direct", "answer", "typed"),
    "vote": Business("vote", "answer", "typed"),
    "slice": Business("section", "slice", "typed_slice", per_slice=True),
}
"""Each business kind, in the order messages name their routes."""
BUSINESS: tuple[BusinessKind, ...] = tuple(BUSINESS_KINDS)
ROUTE_KIND: dict[str, BusinessKind] = {
    business.route: kind for kind, business in BUSINESS_KINDS.items()
}
"""The business kind each route fans out to (`speculate` makes candidates: nodes/candidate.py)."""
BUSINESS_ROUTES: tuple[Route, ...] = tuple(business.route for business in BUSINESS_KINDS.values())
"""The routes of business branches: the modes an output schema works with."""
NAMED_ROUTES: tuple[Route, ...] = (
    *BUSINESS_ROUTES,
    *(route for route in ROUTES if route not in ROUTE_KIND),
)
"""Every route, in the order the served faces name them (business routes first)."""

TASKS: dict[TaskKind, str] = {
    "solve": "answer it",
    "section": "read a long document in slices",
    "vote": "several independent short answers",
    "tool": "run a tool",
    "edit": "change files in the repository",
}
"""What each plan task kind does, as the planner's reply schema says."""
TASK_ROUTE: dict[TaskKind, Route] = {"solve": "direct", "section": "section", "vote": "vote"}
"""The route each plan task kind runs the solve graph in (`tool` and `edit` tasks run none)."""


def per_slice(route: str | None) -> bool:
    """Whether `route` fans out to one branch per slice of its input (which it must cut first)."""
    kind = ROUTE_KIND.get(route) if route is not None else None
    return kind is not None and BUSINESS_KINDS[kind].per_slice


def listed(names: tuple[str, ...] | list[str], last: str = "or") -> str:
    """Names as a sentence lists them: "a, b or c"."""
    return f"{', '.join(names[:-1])} {last} {names[-1]}" if len(names) > 1 else "".join(names)
