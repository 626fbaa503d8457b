"""What an OpenAI chat completions request asks of Parallax: which graph, which input, or why not.

Pure functions of the body, so the face refuses before anything is created and builds the input a
langgraph-sdk caller would send. The mapping and the refusals: docs/openai.md.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from parallax.logic.routing import wants_plan
from parallax.logic.run_input import RunInputError, check_run_input, checked_context
from parallax.logic.user_schema import SchemaProblem, checked_schema
from parallax.state.chat import MAX_MESSAGES, MAX_PARTS
from parallax.state.vocabulary import NAMED_ROUTES, PLAN, listed

MODELS = {f"parallax-{mode}": mode for mode in ("auto", *NAMED_ROUTES, PLAN)}
"""Model name -> mode."""
SOLVE_MODELS = listed(["parallax-auto", *(f"-{route}" for route in NAMED_ROUTES)])
"""The solve graph's model names, as a refusal lists them."""
OPTIONS = (
    "votes",
    "min_votes",
    "candidates",
    "red_team",
    "playbook",
    "max_replans",
    "max_cost",
    "max_tokens",
    "context",
)
"""What the body's `parallax` object may hold."""
ROLES = {
    "system": "System",
    "developer": "System",
    "user": "User",
    "assistant": "Assistant",
    "tool": "Tool",
    "function": "Tool",
}
OPENAI_FIELDS = frozenset(
    (
        "messages",
        "model",
        "audio",
        "frequency_penalty",
        "function_call",
        "functions",
        "logit_bias",
        "logprobs",
        "max_completion_tokens",
        "max_tokens",
        "metadata",
        "modalities",
        "moderation",
        "n",
        "parallel_tool_calls",
        "prediction",
        "presence_penalty",
        "prompt_cache_key",
        "prompt_cache_options",
        "prompt_cache_retention",
        "reasoning_effort",
        "response_format",
        "safety_identifier",
        "seed",
        "service_tier",
        "stop",
        "store",
        "stream",
        "stream_options",
        "temperature",
        "tool_choice",
        "tools",
        "top_logprobs",
        "top_p",
        "user",
        "verbosity",
        "web_search_options",
    )
)
"""The request fields OpenAI documents for chat completions (the openai SDK's
`CompletionCreateParams`, 2.x; a unit test checks that the installed SDK sends none that is missing
here). Each is accepted, and used or refused by the rules above; any other field is refused by name,
as OpenAI itself answers "Unrecognized request argument supplied", except `parallax`, which is ours.
"""


class Refusal(Exception):
    """A request Parallax will not run: OpenAI's error fields and the HTTP status."""

    def __init__(
        self,
        message: str,
        *,
        status: int = 400,
        param: str | None = None,
        code: str | None = None,
        kind: str = "invalid_request_error",
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.message, self.status, self.param, self.code, self.kind = (
            message,
            status,
            param,
            code,
            kind,
        )
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        return {
            "error": {
                "message": self.message,
                "type": self.kind,
                "param": self.param,
                "code": self.code,
            }
        }


@dataclass
class RunRequest:
    """One chat completion request as a run of the graph API."""

    model: str
    graph: str
    """"solve" or "plan"."""
    input: dict[str, Any]
    context: dict[str, Any] = field(default_factory=dict)
    stream: bool = False
    include_usage: bool = False
    typed: bool = False
    """With a JSON schema: the answer is the object's JSON text."""


def _text(message: dict[str, Any], where: str) -> str:
    content = message.get("content")
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        if len(content) > MAX_PARTS:
            raise Refusal(
                f"{where}.content must be a list of at most {MAX_PARTS} parts, got {len(content)}",
                param=f"{where}.content",
            )
        parts = []
        for n, part in enumerate(content):
            if (
                not isinstance(part, dict)
                or part.get("type") not in ("text", "input_text")
                or not isinstance(part.get("text"), str)
            ):
                kind = part.get("type") if isinstance(part, dict) else type(part).__name__
                raise Refusal(
                    f"{where}.content[{n}] is {kind!r}: Parallax runs text only",
                    param=f"{where}.content",
                    code="unsupported_content",
                )
            parts.append(part["text"])
        return "\n".join(parts)
    raise Refusal(f"{where}.content must be text or a list of text parts", param=f"{where}.content")


def conversation(messages: Any) -> tuple[str, str]:
    """(task, question) of the run: the turns before the last user message and that message
    (task alone when there are no earlier turns)."""
    if not isinstance(messages, list) or not messages:
        raise Refusal(
            "messages must be a non-empty list of {role, content} objects", param="messages"
        )
    if (
        len(messages) > MAX_MESSAGES
    ):  # the chat graph's bound (state/chat.py); their text together is the run's input
        raise Refusal(
            f"messages must be a list of at most {MAX_MESSAGES} messages, got {len(messages)}",
            param="messages",
        )
    turns = []
    for n, message in enumerate(messages):
        where = f"messages[{n}]"
        if not isinstance(message, dict) or message.get("role") not in ROLES:
            role = message.get("role") if isinstance(message, dict) else None
            raise Refusal(
                f"{where} has role {role!r}: use one of {', '.join(ROLES)}", param=f"{where}.role"
            )
        turns.append((message["role"], _text(message, where)))
    last = max((n for n, (role, _) in enumerate(turns) if role == "user"), default=None)
    if last is None:
        raise Refusal(
            "messages have no user message: the last user message is the task", param="messages"
        )
    if last != len(turns) - 1:
        raise Refusal(
            f"messages[{last + 1}] comes after the last user message: Parallax answers the user's "
            "last message, so it must be the last one",
            param="messages",
        )
    if not turns[last][1].strip():
        raise Refusal(
            "the last user message is empty: it is the task", param=f"messages[{last}].content"
        )
    earlier = "\n\n".join(f"{ROLES[role]}: {text}" for role, text in turns[:last] if text.strip())
    return (earlier, turns[last][1]) if earlier else (turns[last][1], "")


def output_schema(response_format: Any) -> dict[str, Any] | None:
    """The run's output schema from `response_format` (None for plain text)."""
    if response_format is None:
        return None
    kind = response_format.get("type") if isinstance(response_format, dict) else None
    if kind == "text":
        return None
    if kind == "json_object":
        raise Refusal(
            'response_format json_object has no schema to vote on: send {"type": "json_schema", '
            '"json_schema": {"name": ..., "schema": {...}}} (or leave it out for text)',
            param="response_format",
            code="unsupported_value",
        )
    if kind != "json_schema":
        raise Refusal(
            f"response_format type {kind!r} is not supported: use text or json_schema",
            param="response_format",
            code="unsupported_value",
        )
    spec = response_format.get("json_schema")
    schema = spec.get("schema") if isinstance(spec, dict) else None
    if not isinstance(schema, dict):
        raise Refusal(
            "response_format.json_schema.schema must be a JSON Schema object",
            param="response_format",
        )
    try:
        checked_schema(schema)
    except SchemaProblem as exc:
        raise Refusal(str(exc), param="response_format", code="invalid_json_schema") from None
    return schema


def refuse_what_cannot_run(body: dict[str, Any]) -> None:
    """OpenAI fields Parallax cannot honour."""
    if body.get("n") not in (None, 1):
        raise Refusal(
            f"n must be 1, got {body['n']!r}: a run merges its branches into one answer (ask"
            " parallax-vote with parallax.votes to have several answers voted on)",
            param="n",
            code="unsupported_value",
        )
    for name in ("tools", "functions"):
        if body.get(name):
            raise Refusal(
                f"{name} are not supported: Parallax answers with text or a JSON schema's object,"
                " it does not call your tools",
                param=name,
                code="unsupported_parameter",
            )
    choice = body.get("tool_choice", body.get("function_call"))
    if choice not in (None, "none"):
        raise Refusal(
            "tool_choice must be none: Parallax does not call tools",
            param="tool_choice",
            code="unsupported_value",
        )
    if body.get("stream_options") is not None and not body.get("stream"):
        raise Refusal("stream_options is only allowed when stream is true", param="stream_options")


def options(body: dict[str, Any]) -> dict[str, Any]:
    extra = body.get("parallax") or {}
    if not isinstance(extra, dict):
        raise Refusal(
            "parallax must be an object of options: " + ", ".join(OPTIONS), param="parallax"
        )
    unknown = sorted(set(extra) - set(OPTIONS))
    if unknown:
        raise Refusal(
            f"unknown parallax option(s) {', '.join(unknown)}: use {', '.join(OPTIONS)}",
            param=f"parallax.{unknown[0]}",
            code="unknown_parameter",
        )
    return dict(extra)


def run_context(extra: dict[str, Any]) -> dict[str, Any]:
    """The context sent with the run, each setting checked (logic/run_input.py: names, types,
    bounds, and the server's own settings, which a caller may not exceed)."""
    ctx = extra.pop("context", None) or {}
    try:
        checked_context(ctx, "parallax.context", served=True)
    except RunInputError as exc:
        raise Refusal(str(exc), param=exc.field, code="invalid_value") from None
    return dict(ctx)


def param_of(field: str | None) -> str:
    """The OpenAI `param` of an input field at fault: Parallax's options are under `parallax`, the
    task is the messages."""
    if field is None or field in ("task", "question", "document", "pages"):
        return "messages"
    if field == "output_schema":
        return "response_format"
    return field if field.startswith("parallax") else f"parallax.{field}"


def refuse_unknown_fields(body: dict[str, Any]) -> None:
    unknown = sorted(set(body) - OPENAI_FIELDS - {"parallax"})
    if unknown:
        raise Refusal(
            f"Unrecognized request argument supplied: {', '.join(unknown)} (Parallax's own options"
            f" go under `parallax`: {', '.join(OPTIONS)})",
            param=unknown[0],
            code="unknown_parameter",
        )


def parse(body: Any) -> RunRequest:
    """The run a chat completions body asks for, or Refusal."""
    if not isinstance(body, dict):
        raise Refusal("the request body must be a JSON object")
    model = body.get("model")
    if model is None:
        raise Refusal(
            f"you must provide a model parameter: one of {', '.join(MODELS)}",
            param="model",
            code="missing_required_parameter",
        )
    if not isinstance(model, str):
        raise Refusal(
            f"model must be a string: one of {', '.join(MODELS)}",
            param="model",
            code="invalid_type",
        )
    refuse_unknown_fields(body)
    if model not in MODELS:
        raise Refusal(
            f"The model `{model}` does not exist: use one of {', '.join(MODELS)}",
            status=404,
            param="model",
            code="model_not_found",
        )
    refuse_what_cannot_run(body)
    mode = MODELS[model]
    task, question = conversation(body.get("messages"))
    schema = output_schema(body.get("response_format"))
    if schema is not None and mode == "plan":
        raise Refusal(
            f"parallax-plan has no output schema: use {SOLVE_MODELS} with "
            "response_format, or leave response_format out",
            param="response_format",
            code="unsupported_value",
        )
    extra = options(body)
    context = run_context(extra)
    graph = (
        "plan"
        if mode == "plan" or (mode == "auto" and schema is None and wants_plan(question or task))
        else "solve"
    )
    payload: dict[str, Any] = {
        "task": task,
        **({"question": question} if question else {}),
        **extra,
        "mode": "plan" if graph == "plan" else mode,
    }
    if schema is not None:
        payload["output_schema"] = schema
    if graph == "solve":
        payload.pop("max_replans", None)
    else:
        payload.pop("red_team", None)
        payload.pop("candidates", None)
    try:
        check_run_input(graph, payload, context, served=True)
    except RunInputError as exc:
        raise Refusal(str(exc), param=param_of(exc.field), code="invalid_value") from None
    stream = bool(body.get("stream"))
    include_usage = (
        bool((body.get("stream_options") or {}).get("include_usage")) if stream else False
    )
    return RunRequest(
        model=model,
        graph=graph,
        input=payload,
        context=context,
        stream=stream,
        include_usage=include_usage,
        typed=schema is not None,
    )
