"""The sentence that refuses an input, said from the input's own definition.

See docs/internals/runs.md#the-sentence-that-refuses.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping
from typing import Any

from pydantic import TypeAdapter, ValidationError

from parallax.state.inputs import RULE

SHOWN_CHARS = 40
"""The longest value a refusal repeats; a longer one is told by its size."""


class InvalidInput(ValueError):
    """Input that cannot run; the message (one line) says what to change, `field` where (None: the
    input as a whole). `field` is a key of the input (`votes`, `tasks[3].input`) or
    `context.<name>`."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


@functools.cache
def adapter(definition: Any) -> TypeAdapter[Any]:
    """The pydantic validator of a definition (a TypedDict or a model), built once."""
    return TypeAdapter(definition)


@functools.cache
def _schema(definition: Any) -> dict[str, Any]:
    schema: dict[str, Any] = adapter(definition).json_schema()
    return schema


def fields_of(definition: Any) -> frozenset[str]:
    """The keys a TypedDict definition names."""
    return frozenset(definition.__required_keys__ | definition.__optional_keys__)


def caller_input(
    definition: Any, state: Mapping[str, Any], leave_out: frozenset[str] = frozenset()
) -> dict[str, Any]:
    """What of a graph's state at its entry is its input as a caller could send it: the definition's
    keys, without those only Parallax's own graphs set (`leave_out`) and without unset (None) ones.
    The graph's first node checks this against the definition, so a caller of the compiled graph in
    process skips no check."""
    return {
        k: v
        for k, v in state.items()
        if k in fields_of(definition) and k not in leave_out and v is not None
    }


def check_typed(definition: Any, value: Mapping[str, Any], prefix: str = "") -> None:
    """InvalidInput (one line, naming the field, after `prefix.`) for the first value of `value` its
    definition refuses: a type, a bound, a missing field, a key no field names."""
    try:
        adapter(definition).validate_python(dict(value))
    except ValidationError as exc:
        raise problem(exc, _schema(definition), prefix) from None


def problem(exc: ValidationError, schema: dict[str, Any], prefix: str = "") -> InvalidInput:
    """The first error of `exc` as one sentence, said from `schema` (the JSON Schema of what was
    validated)."""
    error = exc.errors(include_url=False)[0]
    node, parent, name = _locate(schema, error["loc"], prefix)
    kind = error["type"]
    if kind == "extra_forbidden":
        allowed = ", ".join(sorted(_properties(parent, schema)))
        return InvalidInput(f"unknown field {name}: use {allowed}", name)
    if kind == "missing":
        return InvalidInput(f"{name} is missing: give {describe(node, schema)}", name)
    if kind in (
        "value_error",
        "assertion_error",
    ):  # a validator of the definition, in its own words
        reason = str((error.get("ctx") or {}).get("error") or error["msg"])
        return InvalidInput(f"{name}{'' if reason.startswith('[') else ' '}{reason}", name)
    return InvalidInput(
        f"{name} must be {describe(node, schema)}, got {shown(error.get('input'))}", name
    )


def _resolve(node: Any, root: dict[str, Any]) -> dict[str, Any]:
    while isinstance(node, dict) and isinstance(node.get("$ref"), str):
        node = root.get("$defs", {}).get(node["$ref"].rsplit("/", 1)[-1], {})
    return node if isinstance(node, dict) else {}


def _members(node: dict[str, Any], root: dict[str, Any]) -> list[dict[str, Any]]:
    node = _resolve(node, root)
    options = node.get("anyOf") or node.get("oneOf")
    return [_resolve(m, root) for m in options] if isinstance(options, list) else [node]


def _properties(node: dict[str, Any], root: dict[str, Any]) -> dict[str, Any]:
    for member in _members(node, root):
        if isinstance(member.get("properties"), dict):
            return dict(member["properties"])
    return {}


def _locate(
    root: dict[str, Any], loc: tuple[int | str, ...], prefix: str
) -> tuple[dict[str, Any], dict[str, Any], str]:
    """(the schema of the value at `loc`, the schema of the object holding it, its name:
    `tasks[3].input`). Parts of `loc` that name a member of a union (pydantic's tags: `str`,
    `function-after[...]`) are not part of the name.
    """
    node, parent, name = root, root, prefix
    for part in loc:
        if isinstance(part, int):
            items: Any = next(
                (m["items"] for m in _members(node, root) if isinstance(m.get("items"), dict)), {}
            )
            parent, node, name = node, _resolve(items, root), f"{name}[{part}]"
            continue
        properties = _properties(node, root)
        extra = next(
            (
                m["additionalProperties"]
                for m in _members(node, root)
                if isinstance(m.get("additionalProperties"), dict)
            ),
            None,
        )
        if part in properties or extra is not None:
            inner = properties[part] if part in properties else extra
            parent, node, name = node, _resolve(inner, root), f"{name}.{part}" if name else part
        elif len(_members(node, root)) > 1 or not properties and node:
            continue  # a union member's tag
        else:
            parent, node, name = node, {}, f"{name}.{part}" if name else part
    return node, parent, name


def _number(value: Any) -> str:
    return str(int(value)) if isinstance(value, float) and value.is_integer() else str(value)


def _range(node: dict[str, Any]) -> str:
    low, high = node.get("minimum"), node.get("maximum")
    above, below = node.get("exclusiveMinimum"), node.get("exclusiveMaximum")
    if low is not None and high is not None:
        return f" from {_number(low)} to {_number(high)}"
    parts = [
        f"of at least {_number(low)}" if low is not None else "",
        f"above {_number(above)}" if above is not None else "",
        f"at most {_number(high)}" if high is not None else "",
        f"below {_number(below)}" if below is not None else "",
    ]
    said = " and ".join(p for p in parts if p)
    return f" {said}" if said else ""


def _size(node: dict[str, Any], unit: str, least: str, most: str) -> str:
    low, high = node.get(least), node.get(most)
    if low and high is not None:
        return f" of {low} to {high} {unit}"
    if high is not None:
        return f" of at most {high} {unit}"
    return f" of at least {low} {unit}" if low else ""


def describe(node: dict[str, Any], root: dict[str, Any]) -> str:
    """What a value of this schema is, in words: "a whole number from 1 to 1000", "text of at most
    64 characters"."""
    members = [m for m in _members(node, root) if m.get("type") != "null"]
    if len(members) != 1:
        said = list(dict.fromkeys(describe(m, root) for m in members))
        return " or ".join(said) if said else "a value"
    node = members[0]
    if "enum" in node:
        return "one of " + ", ".join(str(v) for v in node["enum"])
    if "const" in node:
        return json.dumps(node["const"])
    if isinstance(node.get(RULE), str):
        return str(node[RULE])
    kind = node.get("type")
    if kind == "integer":
        return "a whole number" + _range(node)
    if kind == "number":
        return "a number" + _range(node)
    if kind == "boolean":
        return "true or false"
    if kind == "string":
        if node.get("pattern"):
            return f"text matching {node['pattern']}"
        return "text" + _size(node, "characters", "minLength", "maxLength")
    if kind == "array":
        return "a list" + _size(node, "items", "minItems", "maxItems")
    if kind == "object":
        return "an object"
    return "a value"


def shown(value: Any) -> str:
    """A value as a refusal repeats it: short ones as JSON would write them, long ones by their
    size."""
    if isinstance(value, str):
        return repr(value) if len(value) <= SHOWN_CHARS else f"{len(value)} characters"
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if isinstance(value, int | float):
        text = _number(value)
        return text if len(text) <= SHOWN_CHARS else f"a number of {len(text)} digits"
    if isinstance(value, list | tuple):
        return f"a list of {len(value)} item{'' if len(value) == 1 else 's'}"
    if isinstance(value, dict):
        return "an object"
    if isinstance(value, bytes | bytearray):
        return f"{len(value)} bytes"
    return type(value).__name__
