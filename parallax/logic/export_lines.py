"""The lines `parallax export` writes, as pydantic models each line is validated against.

The formats are in docs/data-loop.md (export).
"""

from __future__ import annotations

import json
from typing import Annotated, Any, Literal, cast

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


def _roles(
    messages: list[Message], allowed: set[str], what: str, exactly_one: bool = False
) -> list[Message]:
    if not messages or any(m.role not in allowed for m in messages):
        raise ValueError(
            f"{what} must be {'one' if exactly_one else 'a list of'} {'/'.join(sorted(allowed))}"
            " message(s)"
        )
    if exactly_one and len(messages) != 1:
        raise ValueError(f"{what} must hold exactly one message")
    return messages


def _ends_with_the_answer(messages: list[Message]) -> list[Message]:
    if len(messages) < 2 or messages[-1].role != "assistant" or messages[-2].role != "user":
        raise ValueError("messages must end with a user message and the assistant's reply")
    return messages


def _check_prompt(messages: list[Message]) -> list[Message]:
    """A conversational prompt: system and user messages, ending with a user one."""
    _roles(messages, {"system", "user"}, "prompt")
    if messages[-1].role != "user":
        raise ValueError("prompt must end with a user message")
    return messages


def _one_reply(messages: list[Message]) -> list[Message]:
    return _roles(messages, {"assistant"}, "a completion", exactly_one=True)


Conversation = Annotated[list[Message], AfterValidator(_ends_with_the_answer)]
Prompt = Annotated[list[Message], AfterValidator(_check_prompt)]
Reply = Annotated[list[Message], AfterValidator(_one_reply)]
STRICT = ConfigDict(extra="forbid", strict=True)


class SftLine(BaseModel):
    model_config = STRICT
    messages: Conversation


class TrlPreference(BaseModel):
    model_config = STRICT
    prompt: Prompt
    chosen: Reply
    rejected: Reply


class KtoLine(BaseModel):
    model_config = STRICT
    prompt: Prompt
    completion: Reply
    label: bool


class OpenAIInput(BaseModel):
    model_config = STRICT
    messages: Prompt
    tools: list[Any] = Field(default_factory=list)
    parallel_tool_calls: bool = True


class OpenAIPreference(BaseModel):
    model_config = STRICT
    input: OpenAIInput
    preferred_output: Reply
    non_preferred_output: Reply


MODELS: dict[str, type[BaseModel]] = {
    "sft": SftLine,
    "trl": TrlPreference,
    "openai": OpenAIPreference,
    "kto": KtoLine,
}


# --- tool-calling lines: an edit agent's conversation
# ------------------------------------------------


class Function(BaseModel):
    model_config = STRICT
    name: str = Field(min_length=1)
    description: str
    parameters: dict[str, Any]


class Tool(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    function: Function


def _json_object(text: str) -> str:
    if not isinstance(json.loads(text), dict):
        raise ValueError("arguments must be a JSON object")
    return text


class OpenAICall(BaseModel):
    model_config = STRICT
    name: str = Field(min_length=1)
    arguments: Annotated[str, AfterValidator(_json_object)]


class OpenAIToolCall(BaseModel):
    model_config = STRICT
    id: str = Field(min_length=1)
    type: Literal["function"]
    function: OpenAICall

    @property
    def handle(self) -> str:
        return self.id


class OpenAICalls(BaseModel):
    model_config = STRICT
    role: Literal["assistant"]
    tool_calls: list[OpenAIToolCall] = Field(min_length=1)


class OpenAIToolResult(BaseModel):
    model_config = STRICT
    role: Literal["tool"]
    tool_call_id: str = Field(min_length=1)
    content: str

    @property
    def handle(self) -> str:
        return self.tool_call_id


class TrlCall(BaseModel):
    model_config = STRICT
    name: str = Field(min_length=1)
    arguments: dict[str, Any]


class TrlToolCall(BaseModel):
    model_config = STRICT
    type: Literal["function"]
    function: TrlCall

    @property
    def handle(self) -> str:
        return self.function.name


class TrlCalls(BaseModel):
    model_config = STRICT
    role: Literal["assistant"]
    tool_calls: list[TrlToolCall] = Field(min_length=1)


class TrlToolResult(BaseModel):
    model_config = STRICT
    role: Literal["tool"]
    name: str = Field(min_length=1)
    content: str

    @property
    def handle(self) -> str:
        return self.name


def _agent_turns(turns: list[Any]) -> list[Any]:
    """What an agent said and was told: assistant turns, each tool call answered by a tool message
    right after it (in the order called), ending with the assistant's last reply."""
    pending: list[str] = []
    for turn in turns:
        if turn.role == "tool":
            if not pending or turn.handle != pending.pop(0):
                raise ValueError("a tool message must answer the call made just before it")
        elif turn.role == "assistant" and not pending:
            pending = [call.handle for call in getattr(turn, "tool_calls", [])]
        else:
            raise ValueError(
                "after the prompt come the assistant's turns and their tools' results, each call"
                " answered"
            )
    if not turns or turns[-1].role != "assistant":
        raise ValueError("the turns must end with the assistant's reply")
    return turns


def _called(turns: list[Any]) -> set[str]:
    return {call.function.name for turn in turns for call in getattr(turn, "tool_calls", [])}


def _declared(tools: list[Tool], *turns: list[Any]) -> None:
    unknown = set().union(*map(_called, turns)) - {tool.function.name for tool in tools}
    if unknown:
        raise ValueError(f"calls tools the line does not list: {', '.join(sorted(unknown))}")


Tools = Annotated[list[Tool], Field(min_length=1)]
TrlTurns = Annotated[list[Message | TrlCalls | TrlToolResult], AfterValidator(_agent_turns)]


class SftToolLine(BaseModel):
    model_config = STRICT
    messages: list[Message | OpenAICalls | OpenAIToolResult]
    tools: Tools

    @model_validator(mode="after")
    def _conversation(self) -> SftToolLine:
        start = next(
            (i for i, m in enumerate(self.messages) if m.role not in ("system", "user")),
            len(self.messages),
        )
        _check_prompt(cast(list[Message], self.messages[:start]))
        _declared(self.tools, _agent_turns(self.messages[start:]))
        return self


class TrlToolPreference(BaseModel):
    model_config = STRICT
    prompt: Prompt
    chosen: TrlTurns
    rejected: TrlTurns
    tools: Tools

    @model_validator(mode="after")
    def _tools(self) -> TrlToolPreference:
        _declared(self.tools, self.chosen, self.rejected)
        return self


class KtoToolLine(BaseModel):
    model_config = STRICT
    prompt: Prompt
    completion: TrlTurns
    label: bool
    tools: Tools

    @model_validator(mode="after")
    def _tools(self) -> KtoToolLine:
        _declared(self.tools, self.completion)
        return self


TOOL_MODELS: dict[str, type[BaseModel]] = {
    "sft": SftToolLine,
    "trl": TrlToolPreference,
    "kto": KtoToolLine,
}


def validate_line(fmt: str, line: dict[str, Any]) -> None:
    """ValidationError when `line` is not a valid line of `fmt` (a line with `tools` is a
    tool-calling one)."""
    (TOOL_MODELS.get(fmt, MODELS[fmt]) if "tools" in line else MODELS[fmt]).model_validate(line)
