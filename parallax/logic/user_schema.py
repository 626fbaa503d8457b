"""The user's output schema: checked once, made self-contained, turned into what branches are asked.

See docs/internals/runs.md#output-schemas.
"""

from __future__ import annotations

import copy
import functools
import json
from collections.abc import Iterator
from decimal import Decimal, InvalidOperation
from typing import Any, Literal, cast

from jsonschema import Draft202012Validator, FormatChecker, validators
from jsonschema.exceptions import SchemaError, ValidationError, best_match
from pydantic import BaseModel, ConfigDict, model_validator

from parallax.logic.vote import normalize_answer
from parallax.runtime import linear_regex
from parallax.state.records import JsonSchema

Shape = Literal["object", "array", "scalar"]
SCALARS = {"string", "number", "integer", "boolean", "null"}
MAX_DEPTH = 6
"""Deepest nesting of objects and lists a branch is asked to fill in."""
QUOTE_HELP = "words copied exactly from this part of the document that support the value"


class SchemaProblem(ValueError):
    """The schema cannot be used; the message says which field and what to change (one line)."""


def checked_schema(schema: object) -> JsonSchema:
    """`schema` with its local `$ref`s inlined, or SchemaProblem when it is no valid JSON Schema
    or one that branches cannot be asked for."""
    if not isinstance(schema, dict):
        raise SchemaProblem(
            f"output_schema must be a JSON Schema object, got {type(schema).__name__}"
        )
    check_patterns(schema)
    try:
        Draft202012Validator.check_schema(schema, format_checker=_SCHEMA_FORMATS)
    except SchemaError as exc:
        where = "/".join(str(p) for p in exc.absolute_path) or "the top level"
        raise SchemaProblem(
            f"output_schema is not a valid JSON Schema at {where}: {exc.message}"
        ) from None
    inlined = _inline(schema, schema, ())
    if shape(inlined) != "object":
        raise SchemaProblem(
            "output_schema must describe an object with named fields, e.g. "
            '{"type": "object", "properties": {"revenue": {"type": "number"}}}'
        )
    _check_askable(inlined, "", 0)
    return cast(dict[str, Any], inlined)


def check_patterns(schema: object) -> None:
    """SchemaProblem for the first `pattern` in `schema` that this server does not run (one RE2
    refuses, or longer than linear_regex.MAX_PATTERN_CHARS) and for any `patternProperties`, naming
    where it is and why; None when every pattern runs in linear time. A schema that is not even an
    object is left to `checked_schema`.
    """
    for where, keyword, value in _schema_keywords(schema, "output_schema"):
        if keyword == "patternProperties":
            raise SchemaProblem(
                f"{where} uses patternProperties, which this server does not run: replies are asked"
                " for and checked field by field, so name the fields under properties"
            )
        if keyword == "pattern" and isinstance(value, str):
            reason = linear_regex.refusal(linear_regex.from_ecmascript(value))
            if reason:
                raise SchemaProblem(
                    f"{where}: pattern {value[:80]!r} {reason}, which this server does not run (it"
                    " runs patterns on RE2, in time linear in the reply): rewrite the pattern"
                    " without it"
                )


_SUBSCHEMA_MAPS = ("properties", "patternProperties", "$defs", "definitions", "dependentSchemas")
_SUBSCHEMA_LISTS = ("allOf", "anyOf", "oneOf", "prefixItems", "items")
_SUBSCHEMAS = (
    "not",
    "if",
    "then",
    "else",
    "contains",
    "items",
    "additionalItems",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
)


def _schema_keywords(node: object, where: str) -> Iterator[tuple[str, str, Any]]:
    """(where, keyword, value) of every keyword of `node` and of its subschemas (not of `enum`,
    `const`, `default` or `examples`, whose values are data), `where` naming the subschema."""
    if not isinstance(node, dict):
        return
    for keyword, value in node.items():
        yield where, keyword, value
    for keyword in _SUBSCHEMA_MAPS:
        if isinstance(node.get(keyword), dict):
            for name, sub in node[keyword].items():
                yield from _schema_keywords(sub, f"{where}/{keyword}/{name}")
    for keyword in _SUBSCHEMA_LISTS:
        if isinstance(node.get(keyword), list):
            for i, sub in enumerate(node[keyword]):
                yield from _schema_keywords(sub, f"{where}/{keyword}/{i}")
    for keyword in _SUBSCHEMAS:
        yield from _schema_keywords(node.get(keyword), f"{where}/{keyword}")


def _linear_pattern(pattern: str) -> linear_regex.Pattern:
    return linear_regex.compile(linear_regex.from_ecmascript(pattern))


_SCHEMA_FORMATS = FormatChecker()
"""The formats the meta-schema checks, "regex" (what `pattern` must be) read as RE2 reads it: an
ECMAScript named group `(?<year>...)`, which Python's `re` rejects, is a pattern this server runs.
"""


@_SCHEMA_FORMATS.checks("regex", raises=linear_regex.PatternRefused)
def _is_linear_regex(instance: object) -> bool:
    if isinstance(instance, str):
        _linear_pattern(instance)
    return True


def _pattern_on_re2(
    validator: Any, pattern: Any, instance: Any, schema: Any
) -> Iterator[ValidationError]:
    """The `pattern` keyword with RE2 in place of `re` (a pattern RE2 refuses matches nothing)."""
    if not validator.is_type(instance, "string"):
        return
    try:
        found = _linear_pattern(pattern).search(instance)
    except linear_regex.PatternRefused as exc:
        yield ValidationError(f"pattern {pattern!r} is not run: it {exc}")
        return
    if found is None:
        yield ValidationError(f"{instance[:80]!r} does not match {pattern!r}")


ReplyValidator = validators.extend(Draft202012Validator, {"pattern": _pattern_on_re2})  # type: ignore[no-untyped-call]
"""Draft 2020-12 as jsonschema validates it, but with every `pattern` run by RE2."""


def _inline(node: Any, root: JsonSchema, seen: tuple[str, ...]) -> Any:
    """`node` with `{"$ref": "#/$defs/X"}` replaced by X (sibling keys such as a description
    kept)."""
    if isinstance(node, list):
        return [_inline(item, root, seen) for item in node]
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    ref = node.get("$ref")
    if isinstance(ref, str):
        if not ref.startswith("#/"):
            raise SchemaProblem(
                f"output_schema refers to {ref!r}: only local references (#/$defs/...) can be used;"
                " inline the referenced schema"
            )
        if ref in seen:
            raise SchemaProblem(
                f"output_schema is recursive through {ref!r}: branches cannot be asked for a value "
                "of unbounded depth; give the nesting a fixed depth"
            )
        target: Any = root
        for part in ref[2:].split("/"):
            part = part.replace("~1", "/").replace("~0", "~")
            if not isinstance(target, dict) or part not in target:
                raise SchemaProblem(f"output_schema refers to {ref!r}, which it does not define")
            target = target[part]
        out.update(_inline(target, root, (*seen, ref)))
    for key, value in node.items():
        if key in ("$ref", "$defs", "definitions", "$schema", "$id"):
            continue
        out[key] = _inline(value, root, seen)
    return out


def _unwrap(node: JsonSchema) -> JsonSchema:
    """A field that may be null (pydantic's `X | None` is `anyOf: [X, {"type": "null"}]`) as X."""
    options = node.get("anyOf") or node.get("oneOf")
    if isinstance(options, list):
        real = [o for o in options if not (isinstance(o, dict) and o.get("type") == "null")]
        if len(real) == 1 and isinstance(real[0], dict) and shape(real[0]) != "scalar":
            merged = {k: v for k, v in node.items() if k not in ("anyOf", "oneOf")}
            return {**merged, **real[0]}
    return node


def shape(node: JsonSchema) -> Shape | None:
    """Whether a (sub)schema describes an object, a list or a single value; None when it says
    nothing."""
    node = _unwrap(node) if ("anyOf" in node or "oneOf" in node) else node
    kind = node.get("type")
    kinds = set(kind) if isinstance(kind, list) else {kind} if kind else set()
    if "object" in kinds or ("properties" in node and not kinds):
        return "object"
    if "array" in kinds or ("items" in node and not kinds):
        return "array"
    if kinds and kinds <= SCALARS:
        return "scalar"
    if "enum" in node or "const" in node:
        return "scalar"
    options = node.get("anyOf") or node.get("oneOf")
    if (
        isinstance(options, list)
        and options
        and all(isinstance(o, dict) and shape(o) == "scalar" for o in options)
    ):
        return "scalar"
    return None


def _check_askable(node: JsonSchema, path: str, depth: int) -> None:
    where = f"field {path!r}" if path else "output_schema"
    if depth > MAX_DEPTH:
        raise SchemaProblem(f"{where} is nested deeper than {MAX_DEPTH} levels: flatten it")
    kind = shape(node)
    node = _unwrap(node)
    if kind is None:
        raise SchemaProblem(
            f"{where} has no type a branch can be asked for: give it a type "
            "(string, number, integer, boolean, object or array) or an enum"
        )
    if kind == "object":
        properties = node.get("properties")
        if not isinstance(properties, dict) or not properties:
            raise SchemaProblem(
                f"{where} is an object without named properties (a free-form map): "
                "name its fields under properties"
            )
        for name, sub in properties.items():
            if not isinstance(sub, dict):
                raise SchemaProblem(f"field {join(path, name)!r} must be a schema object")
            _check_askable(sub, join(path, name), depth + 1)
    elif kind == "array":
        items = node.get("items")
        if not isinstance(items, dict):
            raise SchemaProblem(
                f"{where} is a list without one schema for its items: give items a schema"
            )
        if shape(items) == "array":
            raise SchemaProblem(
                f"{where} is a list of lists: make its items objects with named fields"
            )
        _check_askable(items, f"{path}[]", depth + 1)


def join(path: str, name: str) -> str:
    return f"{path}.{name}" if path else name


def properties(node: JsonSchema) -> dict[str, JsonSchema]:
    return cast(dict[str, JsonSchema], _unwrap(node).get("properties") or {})


def required(node: JsonSchema) -> set[str]:
    return set(_unwrap(node).get("required") or ())


def items(node: JsonSchema) -> JsonSchema:
    return cast(JsonSchema, _unwrap(node)["items"])


# What branches are asked for ---------------------------------------------------------------


def answer_schema(schema: JsonSchema) -> JsonSchema:
    """A `direct` or `vote` branch's reply: its working, then the object."""
    return {
        "type": "object",
        "properties": {
            "reasoning": {"type": "string", "description": "one or two sentences of working"},
            "data": schema,
        },
        "required": ["reasoning", "data"],
    }


def slice_schema(schema: JsonSchema) -> JsonSchema:
    """A `slice` branch's reply: whether its part helps, and what it supports, each value with its
    quote."""
    return {
        "type": "object",
        "properties": {
            "relevant": {
                "type": "boolean",
                "description": "does this part of the document give any of the values",
            },
            "data": quoted(schema),
        },
        "required": ["relevant", "data"],
    }


def quoted(node: JsonSchema) -> JsonSchema:
    """The schema of what a slice reports: the same fields, none required, each scalar as {quote,
    value}."""
    kind = shape(node)
    if kind == "object":
        return {"type": "object", "properties": {k: quoted(v) for k, v in properties(node).items()}}
    if kind == "array":
        return {"type": "array", "items": quoted(items(node))}
    return {
        "type": "object",
        "properties": {"quote": {"type": "string", "description": QUOTE_HELP}, "value": node},
        "required": ["quote", "value"],
    }


@functools.lru_cache(maxsize=64)
def _reply_model(schema_json: str, name: str) -> type[BaseModel]:
    schema = json.loads(schema_json)
    validator = ReplyValidator(schema)

    class Reply(BaseModel):
        """A reply checked against a JSON Schema given at run time (what `ask` validates and re-asks
        on)."""

        model_config = ConfigDict(extra="allow")

        @model_validator(mode="before")
        @classmethod
        def _matches_schema(cls, value: Any) -> Any:
            error = best_match(validator.iter_errors(value))
            if error is not None:
                where = ".".join(str(p) for p in error.absolute_path) or "object"
                raise ValueError(f"{where}: {error.message[:200]}")
            return value

        @classmethod
        def model_json_schema(cls, *args: Any, **kwargs: Any) -> dict[str, Any]:
            return copy.deepcopy(schema)

    Reply.__name__ = Reply.__qualname__ = name
    return Reply


def reply_model(schema: JsonSchema, name: str) -> type[BaseModel]:
    """A pydantic model that validates a reply against `schema` and reports `schema` as its JSON
    Schema (so runtime/structured_call.py sends it as the `response_format` and re-asks on a
    mismatch)."""
    return _reply_model(json.dumps(schema, sort_keys=True), name)


def validation_errors(schema: JsonSchema, value: Any) -> list[str]:
    """Each way `value` fails `schema`, as `path: message` (empty when it conforms)."""
    errors = sorted(ReplyValidator(schema).iter_errors(value), key=lambda e: list(e.absolute_path))
    return [
        f"{'.'.join(str(p) for p in e.absolute_path) or 'object'}: {e.message[:160]}"
        for e in errors
    ]


# Values --------------------------------------------------------------------------------------


def normal(value: Any) -> str:
    """A value's canonical form for counting and de-duplication: numbers, case, whitespace and
    number words folded as in a vote (logic/vote.py); lists and objects compared item by item."""
    return json.dumps(_normal(value), sort_keys=True, ensure_ascii=False)


def _normal(value: Any) -> Any:
    if value is None:
        return None
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int | float):
        try:
            return normalize_answer(format(Decimal(repr(value)), "f"))
        except InvalidOperation:
            return repr(value)
    if isinstance(value, str):
        return normalize_answer(value)
    if isinstance(value, list):
        return sorted((_normal(v) for v in value), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(value, dict):
        return {k: _normal(v) for k, v in value.items() if v is not None}
    return str(value)


def leaves(schema: JsonSchema, value: Any, path: str = "") -> Iterator[tuple[str, Any]]:
    """(path, value) of every single value in `value`, lists indexed: `segments[0].name`."""
    kind = shape(schema)
    if kind == "object" and isinstance(value, dict):
        for name, sub in properties(schema).items():
            if name in value and value[name] is not None:
                yield from leaves(sub, value[name], join(path, name))
    elif kind == "array" and isinstance(value, list):
        for i, item in enumerate(value):
            yield from leaves(items(schema), item, f"{path}[{i}]")
    else:
        yield path, value


def get_at(data: dict[str, Any], path: str) -> Any:
    current: Any = data
    for part in path.split("."):
        if not isinstance(current, dict) or part not in current:
            return None
        current = current[part]
    return current


def set_at(data: dict[str, Any], path: str, value: Any) -> None:
    parts = path.split(".")
    current = data
    for part in parts[:-1]:
        current = current.setdefault(part, {})
    current[parts[-1]] = value
