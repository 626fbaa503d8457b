"""The types and bounds the graphs' input definitions share: what a caller may send.

See docs/internals/runs.md#input-definitions; docs/limits.md has the table of every bound.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Annotated, Any

from pydantic import AfterValidator, ConfigDict, Field, WithJsonSchema

CALLER = ConfigDict(extra="forbid", strict=True)
"""The pydantic configuration of every graph's input definition (decorate it with
`with_config(CALLER)`)."""

RULE = "x-rule"
"""A JSON Schema key of ours: a field's rule in words, where its pattern would say it to no one (a
refusal says it)."""
NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
"""A tenant's or playbook's name: one small alphabet, so no name can spell another namespace
("../acme", "a/b")."""
NAME_RULE = "1-64 letters, digits, '-' or '_'"
"""NAME_PATTERN in words, for the sentence that refuses a name."""
Name = Annotated[str, Field(pattern=NAME_PATTERN, json_schema_extra={RULE: NAME_RULE})]

MAX_VOTES = 1000
"""The most vote branches one run may ask for."""
Votes = Annotated[int, Field(ge=1, le=MAX_VOTES)]
INPUT_CHARS = 10_000_000
"""The most characters of input a run may ever take: the upper bound of PARALLAX_MAX_INPUT_CHARS,
and of each text a caller sends whose own limit is that setting (a page, a chat message, a training
task)."""
InputText = Annotated[str, Field(max_length=INPUT_CHARS)]
PATH_CHARS = 4096
"""The longest path or command (Linux's PATH_MAX)."""
PathText = Annotated[str, Field(max_length=PATH_CHARS)]


def inside_folder(path: str) -> str:
    """`path` as it is, or ValueError: absolute, climbing out (`..`) or into `.git` (empty: the
    default file)."""
    if path and (
        path.startswith(("/", "\\"))
        or ".." in path.replace("\\", "/").split("/")
        or ".git" in path.split("/")
    ):
        raise ValueError(f"{path!r} must be a path inside the candidate's folder, like solution.py")
    return path


CheckFile = Annotated[PathText, AfterValidator(inside_folder)]
"""Where a candidate's answer is saved for its check: a path inside the candidate's folder."""
NOTE_CHARS = 2000
"""The longest comment, reason or corrected answer a caller attaches to a run."""
Note = Annotated[str, Field(max_length=NOTE_CHARS)]
ANSWER_CHARS = 100_000
"""The longest right answer a caller gives a run or a training task (`target`): a summary may be
long."""
Answer = Annotated[str, Field(max_length=ANSWER_CHARS)]
Who = Annotated[str, Field(max_length=200)]
"""Who did something, for a history (`by`)."""
Id = Annotated[str, Field(min_length=1, max_length=256)]
"""An id a caller names: a trace id (or its first characters), a training task's id."""
Since = Annotated[str, Field(max_length=64)]
"""7d, 12h, 30m, 2w or an ISO date (logic/run_stats.py `parse_since` reads it)."""
MAX_VERSION = 1_000_000_000
Version = Annotated[int, Field(ge=1, le=MAX_VERSION)]
"""A stored version of a playbook or prompt (versions count from 1)."""
MAX_RUNS = 1_000_000
Runs = Annotated[int, Field(ge=1, le=MAX_RUNS)]
"""A count of runs in a canary's decision rule."""
Share = Annotated[float, Field(gt=0, le=100)]
"""A percent of threads a release serves (100: every thread)."""
CanaryShare = Annotated[float, Field(gt=0, lt=100)]
"""A percent of threads a canary serves (the rest stay on production)."""
Fraction = Annotated[float, Field(ge=0, le=1)]
"""A share between 0 and 1 (a drop in accuracy a learn run accepts)."""
ErrorRate = Annotated[float, Field(gt=0, lt=0.5)]
"""The stated error rate of a canary's decision rule, each way (logic/release_decision.py)."""
Margin = Annotated[float, Field(ge=0, lt=1)]
"""How much worse a canary's success rate may be and still be promoted (logic/release_decision.py).
"""
MAX_LEASE_S = 7 * 86_400.0
LeaseSeconds = Annotated[float, Field(gt=0, le=MAX_LEASE_S)]
"""How long a claim on stored runs lasts if its holder dies (at most a week)."""
MAX_COST_USD = 100_000.0
CostBudget = Annotated[float, Field(gt=0, le=MAX_COST_USD)]
"""A run's budget in US dollars."""
MAX_TOKEN_BUDGET = 10_000_000_000
TokenBudget = Annotated[int, Field(ge=1, le=MAX_TOKEN_BUDGET)]
"""A run's budget in tokens, all its model calls together."""

JSON_DEPTH = 32
"""The deepest nesting of objects and lists in a JSON value a caller sends as one field (a schema, a
plan)."""
JSON_NODES = 5000
"""The most values (objects, lists, texts, numbers) in such a field."""
JSON_CHARS = 200_000
"""The most characters of text (keys and strings) in such a field."""


class Unbounded(ValueError):
    """A JSON value beyond JSON_DEPTH, JSON_NODES or JSON_CHARS; the message says which."""


def _walk(value: Any) -> Iterator[tuple[Any, int]]:
    """Every value inside `value` with its depth, without recursion (a value of any depth cannot
    overflow it)."""
    stack = [(value, 1)]
    while stack:
        node, depth = stack.pop()
        yield node, depth
        if isinstance(node, dict):
            stack.extend((v, depth + 1) for v in node.values())
            yield from ((k, depth) for k in node)
        elif isinstance(node, list | tuple):
            stack.extend((v, depth + 1) for v in node)


def bounded_json(value: Any) -> Any:
    """`value` as it is, or Unbounded: deeper than JSON_DEPTH, more than JSON_NODES values or
    JSON_CHARS of text."""
    nodes = chars = 0
    for node, depth in _walk(value):
        nodes += 1
        chars += len(node) if isinstance(node, str) else 0
        if depth > JSON_DEPTH:
            raise Unbounded(f"must be at most {JSON_DEPTH} levels deep")
        if nodes > JSON_NODES:
            raise Unbounded(f"must hold at most {JSON_NODES} values")
        if chars > JSON_CHARS:
            raise Unbounded(f"must hold at most {JSON_CHARS} characters of text")
    return value


JsonObject = Annotated[dict[str, Any], AfterValidator(bounded_json)]
"""A JSON object a caller sends as one field, bounded in depth, values and text (an output schema, a
plan)."""

DOCUMENT_BASE64_CHARS = 40_000_000
"""The longest base64 text of a document sent over the wire (30 MB of file); what the file holds is
bounded by runtime/documents.py as it is read."""
DOCUMENT_NAME_CHARS = 255


def bounded_document(value: Any) -> Any:
    """A run's `document` as it is, or ValueError: a path (text or path-like) of at most PATH_CHARS,
    bytes, or {"name"?, "base64"} with a name of at most DOCUMENT_NAME_CHARS and at most
    DOCUMENT_BASE64_CHARS of base64.
    """
    if isinstance(value, os.PathLike | bytes | bytearray):
        return value
    if isinstance(value, str):
        if len(value) > PATH_CHARS:
            raise ValueError(f"must be a path of at most {PATH_CHARS} characters")
        return value
    if (
        isinstance(value, dict)
        and isinstance(value.get("base64"), str)
        and set(value) <= {"name", "base64"}
    ):
        if (
            not isinstance(value.get("name", ""), str)
            or len(value.get("name", "")) > DOCUMENT_NAME_CHARS
        ):
            raise ValueError(f"name must be text of at most {DOCUMENT_NAME_CHARS} characters")
        if len(value["base64"]) > DOCUMENT_BASE64_CHARS:
            raise ValueError(
                f"must be at most {DOCUMENT_BASE64_CHARS} characters of base64 "
                f"({DOCUMENT_BASE64_CHARS * 3 // 4 // 1_000_000} MB of file)"
            )
        return value
    raise ValueError(
        'must be {"name": ..., "base64": ...} (or, where the caller owns the disk, a path)'
    )


Document = Annotated[
    Any,
    AfterValidator(bounded_document),
    WithJsonSchema(
        {
            "anyOf": [
                {
                    "type": "object",
                    "properties": {
                        "name": {"type": "string", "maxLength": DOCUMENT_NAME_CHARS},
                        "base64": {"type": "string", "maxLength": DOCUMENT_BASE64_CHARS},
                    },
                    "required": ["base64"],
                    "additionalProperties": False,
                },
                {"type": "string", "maxLength": PATH_CHARS},
            ]
        }
    ),
]
"""A document to work on: {"name", "base64"}, or a path where the caller owns the disk (bytes in
process)."""
