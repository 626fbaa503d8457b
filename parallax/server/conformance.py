"""The Agent Server API where Aegra does less: each field and route is done, or refused by name.

Admission asks it about every graph API request before anything else reads the body. See
docs/deploy.md#the-agent-server-feature-table.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote

from parallax.server.refusals import Refused, invalid

IF_NOT_EXISTS = ("reject", "create")

RUN = re.compile(r"^(?:/threads/[^/]+)?/runs(?P<kind>/stream|/wait)?/?$")
CRON = re.compile(r"^(?:/threads/[^/]+)?/runs/crons(?:/[^/]+)?/?$")
SUBGRAPHS = re.compile(r"^(?P<head>/assistants/[^/]+/subgraphs)/(?P<namespace>[^/]+)/?$")


def _inert(value: Any) -> bool:
    """A value that asks for nothing: absent, None, false, 0, empty."""
    return (
        value is None or value is False or value == 0 or value == [] or value == {} or value == ""
    )


@dataclass(frozen=True)
class Field:
    """A request field Aegra does not honour: where (methods, path), its name, and the one-line
    refusal."""

    methods: frozenset[str]
    path: re.Pattern[str]
    name: str
    message: str
    refuses: Callable[[Any], bool] = lambda value: not _inert(value)


FILTER_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
"""What LangGraph's store takes as a filter's operators (`{"field": {"$gt": 3}}`); any other raised
inside it."""


def _bad_filter(value: Any) -> bool:
    """A store search `filter` LangGraph's store cannot run: not an object, or an operator object
    naming another."""
    if value is None:
        return False
    if not isinstance(value, Mapping):
        return True
    return any(isinstance(v, Mapping) and not set(v) <= FILTER_OPERATORS for v in value.values())


def _where(methods: str, pattern: str) -> tuple[frozenset[str], re.Pattern[str]]:
    return frozenset(methods.split()), re.compile(pattern)


RUNS = _where("POST", RUN.pattern)
WAITS = _where("POST", r"^(?:/threads/[^/]+)?/runs/wait/?$")
RUNS_AND_CRONS = _where(
    "POST PATCH", r"^(?:/threads/[^/]+)?/runs(?:/stream|/wait|/crons(?:/[^/]+)?)?/?$"
)
THREAD_CREATE = _where("POST", r"^/threads/?$")
THREAD_UPDATE = _where("PATCH", r"^/threads/[^/]+/?$")
THREAD_SEARCH = _where("POST", r"^/threads/(?:search|count)/?$")
STORE_PUT = _where("PUT", r"^/store/items/?$")
STORE_SEARCH = _where("POST", r"^/store/items/search/?$")

FIELDS: tuple[Field, ...] = (
    Field(
        *RUNS_AND_CRONS,
        "after_seconds",
        "after_seconds is not supported: a run starts as soon as it is admitted; schedule it with a"
        " cron (POST /runs/crons) or send it when it should start",
    ),
    Field(
        *RUNS_AND_CRONS,
        "feedback_keys",
        "feedback_keys is not supported: there are no LangSmith feedback URLs here; leave it out"
        " and send feedback on a run's trace to the feedback graph (docs/data-loop.md)",
    ),
    Field(
        *RUNS_AND_CRONS,
        "langsmith_tracer",
        "langsmith_tracer is not supported: runs are traced to the deployment's OpenTelemetry"
        " exporter (docs/deploy.md); leave it out",
    ),
    Field(
        *RUNS_AND_CRONS,
        "if_not_exists",
        'if_not_exists must be "reject" (a run on a thread that does not exist is 404) or "create"',
        refuses=lambda value: value is not None and value not in IF_NOT_EXISTS,
    ),
    Field(
        *WAITS,
        "on_disconnect",
        'on_disconnect "cancel" is not supported on /wait: a waited-for run goes on when its client'
        " leaves; stream it (/runs/stream cancels on disconnect) or cancel it with POST"
        " /threads/{id}/runs/{run_id}/cancel",
        refuses=lambda value: value == "cancel",
    ),
    Field(
        *THREAD_CREATE,
        "supersteps",
        "supersteps is refused: a thread's state is written by its graph's nodes, not by a caller;"
        " create the thread empty and start a run with input",
    ),
    Field(
        *THREAD_CREATE,
        "initial_state",
        "initial_state is refused: a thread's state is written by its graph's nodes, not by a"
        " caller; create the thread empty and start a run with input",
    ),
    Field(
        *THREAD_SEARCH,
        "ids",
        "ids is not supported in a thread search or count: get each thread with GET /threads/{id},"
        " or filter by metadata",
    ),
    Field(
        *THREAD_SEARCH,
        "values",
        "values is not supported in a thread search or count: filter by metadata or status",
    ),
    Field(
        *THREAD_SEARCH,
        "extract",
        "extract is not supported in a thread search: read a thread's values with GET"
        " /threads/{id}/state",
    ),
    Field(
        *STORE_PUT,
        "index",
        "index is not supported: the store has no embedding index, so no field is indexed; leave it"
        " out (or send false)",
        refuses=lambda value: value is not None and value is not False,
    ),
    Field(
        *STORE_SEARCH,
        "filter",
        "filter must be an object of {field: value} or {field: {operator: value}} with the"
        " operators $eq, $ne, $gt, $gte, $lt, $lte (LangGraph's store)",
        refuses=_bad_filter,
    ),
    Field(
        *STORE_SEARCH,
        "query",
        "query (semantic search) is not supported: the store has no embedding index; filter items"
        " with filter and namespace_prefix",
    ),
)
"""Every field of the Agent Server API that Aegra 0.11 reads not, or does otherwise, and that
Parallax refuses."""

MISSING_ROUTES: tuple[tuple[frozenset[str], re.Pattern[str], str], ...] = (
    (
        *_where("POST", r"^/runs/batch/?$"),
        (
            "POST /runs/batch is not supported: create each run with POST /runs (each is admitted"
            " on its own)"
        ),
    ),
    (
        *_where("GET", r"^/threads/[^/]+/stream/?$"),
        (
            "GET /threads/{thread_id}/stream (a thread's runs as they come) is not supported: join"
            " one run with GET /threads/{thread_id}/runs/{run_id}/stream, or follow the thread with"
            " POST /threads/{thread_id}/stream/events"
        ),
    ),
    (
        *_where("GET", r"^/threads/[^/]+/storage/?$"),
        (
            "GET /threads/{thread_id}/storage is not supported: read the thread with GET"
            " /threads/{thread_id}/state"
        ),
    ),
    (
        *_where("GET", r"^/runs/crons/[^/]+/?$"),
        "GET /runs/crons/{cron_id} is not supported: find the cron with POST /runs/crons/search",
    ),
)
"""Routes of langgraph-api 0.16 that Aegra 0.11 lacks and Parallax does not serve: (methods, path,
refusal)."""


def check_route(method: str, path: str) -> None:
    """A route the Agent Server has and this server does not: 422 naming it and what to call
    instead."""
    for methods, pattern, message in MISSING_ROUTES:
        if method in methods and pattern.match(path):
            raise Refused(422, message, "route")


def rewritten(path: str, query: bytes) -> tuple[str, bytes] | None:
    """(path, query string) of the route Aegra serves for `path`, when it serves it under another;
    else None."""
    found = SUBGRAPHS.match(path)
    if found is None:
        return None
    namespace = f"namespace={quote(found['namespace'], safe='')}".encode()
    return found["head"], (query + b"&" + namespace) if query else namespace


def check_fields(method: str, path: str, payload: Any) -> None:
    """Each field of `FIELDS` that `payload` carries with a value that would change what happens:
    422 naming it."""
    if not isinstance(payload, Mapping):
        return
    for rule in FIELDS:
        if (
            rule.name in payload
            and method in rule.methods
            and rule.path.match(path)
            and rule.refuses(payload[rule.name])
        ):
            raise invalid(rule.message, rule.name)


def creates_thread(payload: Mapping[str, Any]) -> bool:
    """Whether a run on a thread that does not exist creates it (`if_not_exists: "create"`; "reject"
    is the default, as in LangGraph)."""
    return payload.get("if_not_exists") == "create"


async def check_thread_exists(payload: Mapping[str, Any], thread_id: str) -> None:
    """A run on a thread that does not exist: 404 unless it asks to create it (`if_not_exists:
    "create"`). Another tenant's thread is admission's 404 (server/admission.py), the same answer.
    """
    if creates_thread(payload):
        return
    from parallax.server.run_checks import thread_facts

    if (await thread_facts(thread_id)).owner is None:
        raise Refused(
            404,
            f"Thread '{thread_id}' not found: create it first (POST /threads), or send "
            'if_not_exists: "create" to create it with the run',
            "thread_id",
        )
