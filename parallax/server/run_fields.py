"""A served run request's other fields: config, command, checkpoint, metadata.

Each field bounded, each refusal a 422 naming it; nothing here reads the database. What is refused
and why: docs/limits.md#requests-on-the-served-api and docs/deploy.md#admission.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Mapping, MutableMapping
from typing import Any

from parallax.logic.review_request import BadDecision, decision_of
from parallax.logic.run_input import GRAPHS, RunContext
from parallax.server.refusals import invalid

CONFIG_KEYS = ("configurable", "metadata", "tags", "recursion_limit", "run_name")
MAX_RECURSION_LIMIT = 10_000
"""The most supersteps a run may ask for (the CLI's learn asks as many)."""
MAX_TAGS, MAX_TAG_CHARS, MAX_RUN_NAME_CHARS = 16, 128, 128
MAX_METADATA_KEYS, MAX_METADATA_KEY_CHARS, MAX_METADATA_BYTES = 32, 64, 8192
"""A metadata object: at most 32 keys (Aegra's own cap on run metadata), keys of at most 64
characters, 8 KiB as JSON."""
MAX_RESUME_BYTES = 20_000
"""The largest answer to an interrupt, as JSON (an edited answer in review is a few lines)."""
MAX_NODE_NAMES, MAX_NODE_NAME_CHARS = 32, 64
SERVER_KEYS = ("langgraph_auth_user", "user_id", "user_display_name", "run_id")
"""config.configurable keys the server sets from the API key and the run."""
LANGGRAPH_KEYS = ("checkpoint_ns", "checkpoint_map", "task_id", "langgraph_")
STRATEGIES = ("reject", "enqueue", "interrupt", "rollback")
ON_DISCONNECT = ("cancel", "continue")
OURS = "parallax_"


def json_size(value: Any) -> int:
    return len(json.dumps(value, default=str, ensure_ascii=False).encode())


def check_metadata(metadata: Any, field: str, *, thread: bool = False) -> None:
    """A metadata object in bounds, with no key that is Parallax's (nor, on a thread, `owner`)."""
    if metadata is None:
        return
    if not isinstance(metadata, Mapping):
        raise invalid(f"{field} must be an object, got {type(metadata).__name__}", field)
    if len(metadata) > MAX_METADATA_KEYS:
        raise invalid(f"{field} has {len(metadata)} keys, at most {MAX_METADATA_KEYS}", field)
    for key in metadata:
        if not isinstance(key, str) or not 1 <= len(key) <= MAX_METADATA_KEY_CHARS:
            raise invalid(
                f"{field} keys must be 1 to {MAX_METADATA_KEY_CHARS} characters, got"
                f" {str(key)[:80]!r}",
                field,
            )
        if key.startswith(OURS):
            raise invalid(f"{field}.{key} is Parallax's own key: leave it out", f"{field}.{key}")
        if thread and key == "owner":
            raise invalid(f"{field}.owner is set from your API key: leave it out", f"{field}.owner")
    if json_size(metadata) > MAX_METADATA_BYTES:
        raise invalid(
            f"{field} is over {MAX_METADATA_BYTES} bytes as JSON: keep metadata to short labels",
            field,
        )


def _configurable_refusal(key: str) -> str:
    if key in SERVER_KEYS:
        return "is set by the server from your API key and the run"
    if key.startswith(OURS):
        return "is Parallax's own"
    if key.startswith("__") or key.startswith(LANGGRAPH_KEYS):
        return "is LangGraph's own"
    return (
        f"is not a run setting (use {', '.join(sorted(RunContext.model_fields))}, or put them in"
        " context)"
    )


def check_config(config: Any, thread_id: str | None) -> str | None:
    """A run's `config` in bounds; the checkpoint it forks from (config.configurable.checkpoint_id),
    if any."""
    if config is None:
        return None
    if not isinstance(config, Mapping):
        raise invalid(f"config must be an object, got {type(config).__name__}", "config")
    for key in config:
        if key not in CONFIG_KEYS:
            raise invalid(
                f"config.{key} is not accepted on the served API: config may carry"
                f" {', '.join(CONFIG_KEYS)} (run settings go in context)",
                f"config.{key}",
            )
    _check_run_options(config)
    check_metadata(config.get("metadata"), "config.metadata")
    configurable = config.get("configurable")
    if configurable is None:
        return None
    return _check_configurable(configurable, thread_id)


def _check_run_options(config: Mapping[str, Any]) -> None:
    """config's recursion_limit, tags and run_name in bounds."""
    limit = config.get("recursion_limit")
    if limit is not None and (
        not isinstance(limit, int)
        or isinstance(limit, bool)
        or not 1 <= limit <= MAX_RECURSION_LIMIT
    ):
        raise invalid(
            f"config.recursion_limit must be a whole number from 1 to {MAX_RECURSION_LIMIT}, got"
            f" {limit!r}",
            "config.recursion_limit",
        )
    tags = config.get("tags")
    if tags is not None and (
        not isinstance(tags, list)
        or len(tags) > MAX_TAGS
        or not all(isinstance(t, str) and len(t) <= MAX_TAG_CHARS for t in tags)
    ):
        raise invalid(
            f"config.tags must be at most {MAX_TAGS} strings of at most {MAX_TAG_CHARS} characters",
            "config.tags",
        )
    name = config.get("run_name")
    if name is not None and (not isinstance(name, str) or len(name) > MAX_RUN_NAME_CHARS):
        raise invalid(
            f"config.run_name must be a string of at most {MAX_RUN_NAME_CHARS} characters",
            "config.run_name",
        )


def _check_configurable(configurable: Any, thread_id: str | None) -> str | None:
    """config.configurable holding only the route's thread, a checkpoint id and run settings; the
    checkpoint id."""
    if not isinstance(configurable, Mapping):
        raise invalid("config.configurable must be an object", "config.configurable")
    for key, value in configurable.items():
        if key == "thread_id":
            if thread_id is None or str(value) != thread_id:
                raise invalid(
                    "config.configurable.thread_id must be the thread of the route, or left out",
                    "config.configurable.thread_id",
                )
        elif key != "checkpoint_id" and key not in RunContext.model_fields:
            raise invalid(
                f"config.configurable.{key} {_configurable_refusal(key)}: leave it out",
                f"config.configurable.{key}",
            )
    checkpoint = configurable.get("checkpoint_id")
    return (
        None
        if checkpoint is None
        else check_checkpoint_id(checkpoint, "config.configurable.checkpoint_id")
    )


def configurable_settings(config: Any) -> dict[str, Any]:
    """The run settings in config.configurable (Aegra takes them as the context when no context is
    sent)."""
    configurable = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(configurable, Mapping):
        return {}
    return {k: v for k, v in configurable.items() if k in RunContext.model_fields}


def check_checkpoint_id(value: Any, field: str) -> str:
    if not isinstance(value, str) or len(value) > 64:
        raise invalid(f"{field} must be a checkpoint id (a UUID string)", field)
    try:
        uuid.UUID(value)
    except ValueError:
        raise invalid(
            f"{field} must be a checkpoint id (a UUID string), got {value!r}", field
        ) from None
    return value


def check_checkpoint(payload: Mapping[str, Any], thread_id: str | None) -> str | None:
    """The checkpoint a run starts from (`checkpoint` / `checkpoint_id`), checked for shape; None:
    the latest."""
    checkpoint, short = payload.get("checkpoint"), payload.get("checkpoint_id")
    found = None if short is None else check_checkpoint_id(str(short), "checkpoint_id")
    if checkpoint is not None:
        if not isinstance(checkpoint, Mapping):
            raise invalid('checkpoint must be an object: {"checkpoint_id": ...}', "checkpoint")
        for key, value in checkpoint.items():
            if key == "checkpoint_id":
                found = check_checkpoint_id(value, "checkpoint.checkpoint_id")
            elif key == "checkpoint_ns":
                if value not in ("", None):
                    raise invalid(
                        'checkpoint.checkpoint_ns must be the thread\'s root (""): a run starts'
                        " from one of its thread's own checkpoints",
                        "checkpoint.checkpoint_ns",
                    )
            elif key == "thread_id":
                if thread_id is None or str(value) != thread_id:
                    raise invalid(
                        "checkpoint.thread_id must be the thread of the route",
                        "checkpoint.thread_id",
                    )
            else:
                raise invalid(
                    f"checkpoint.{key} is not accepted: a checkpoint is named by checkpoint_id"
                    " only",
                    f"checkpoint.{key}",
                )
    if found is not None and thread_id is None:
        raise invalid(
            "a stateless run has no checkpoint to start from: run on the thread", "checkpoint_id"
        )
    return found


def check_command(command: Any) -> tuple[bool, Any]:
    """(whether the command resumes, its resume value) of a run's `command`; goto and update refused
    by name."""
    if command is None:
        return False, None
    if not isinstance(command, Mapping):
        raise invalid('command must be an object: {"resume": <your answer>}', "command")
    if "goto" in command:
        raise invalid(
            "command.goto is refused: a run starts at its graph's entry node, and only the graph"
            " decides which node runs next and with what; send input, or answer an interrupt with"
            " command.resume",
            "command.goto",
        )
    if "update" in command:
        raise invalid(
            "command.update is refused: a graph's state is written by its own nodes, not by a"
            " caller; send input, or answer an interrupt with command.resume",
            "command.update",
        )
    unknown = sorted(set(command) - {"resume"})
    if unknown:
        raise invalid(
            f"command.{unknown[0]} is not accepted: a command carries only resume",
            f"command.{unknown[0]}",
        )
    if "resume" not in command:
        raise invalid("command must carry resume: the answer to the thread's interrupt", "command")
    return True, command["resume"]


def _review(answer: Any) -> None:
    try:
        decision_of(answer)
    except BadDecision as exc:
        raise invalid(
            f"the answer does not fit the review the chat asked for: {exc}", "command.resume"
        ) from None


def _yes_or_no(answer: Any) -> None:
    if not isinstance(answer, str | bool | int) or len(str(answer)) > 16:
        raise invalid(
            'the playbook update asks yes or no: resume with "yes" or "no"', "command.resume"
        )


RESUMES: dict[str, Callable[[Any], None]] = {"chat": _review, "learn": _yes_or_no}
"""Per Parallax graph that interrupts, what its interrupt accepts as an answer
(nodes/review_answer.py: a review decision; nodes/gate.py: yes or no). The others never interrupt,
so no answer is taken."""
INTERRUPT_ID = re.compile(r"[0-9a-f]{32}")


def answers_of(resume: Any) -> list[Any]:
    """The answers in a resume value: one, or each of a map {interrupt id: answer} (the v2
    protocol's form)."""
    if (
        isinstance(resume, Mapping)
        and resume
        and all(isinstance(k, str) and INTERRUPT_ID.fullmatch(k) for k in resume)
    ):
        return list(resume.values())
    return [resume]


def check_resume(graph: str | None, resume: Any) -> None:
    """The answer to an interrupt of `graph` is one its interrupt asked for (bounded, in the shape
    it reads)."""
    if json_size(resume) > MAX_RESUME_BYTES:
        raise invalid(
            f"command.resume is over {MAX_RESUME_BYTES} bytes as JSON: an answer is a decision, not"
            " a document",
            "command.resume",
        )
    if graph not in GRAPHS:
        return  # an operator's own graph (aegra.json): its interrupt says what it takes
    check = RESUMES.get(graph)
    if check is None:
        raise invalid(
            f"the {graph} graph never asks for an answer: there is nothing to resume",
            "command.resume",
        )
    for answer in answers_of(resume):
        check(answer)


def check_nodes(value: Any, field: str) -> None:
    """interrupt_before / interrupt_after: "*" or a short list of node names."""
    if value is None or value == "*":
        return
    if (
        not isinstance(value, list)
        or len(value) > MAX_NODE_NAMES
        or not all(isinstance(n, str) and 0 < len(n) <= MAX_NODE_NAME_CHARS for n in value)
    ):
        raise invalid(f'{field} must be "*" or at most {MAX_NODE_NAMES} node names', field)


def check_strategy(strategy: Any, field: str = "multitask_strategy") -> None:
    if strategy is not None and strategy not in STRATEGIES:
        raise invalid(f"{field} must be one of {', '.join(STRATEGIES)}, not {strategy!r}", field)


def check_run_fields(
    payload: Mapping[str, Any], thread_id: str | None
) -> tuple[str | None, bool, Any]:
    """Every field of a run request but input and context, in bounds: (the checkpoint it starts
    from, whether it resumes, the resume value). Refused (422) names the first field at fault."""
    resumes, resume = check_command(payload.get("command"))
    if resumes and thread_id is None:
        raise invalid(
            "a stateless run has no interrupt to resume: resume on the thread", "command.resume"
        )
    forked = check_config(payload.get("config"), thread_id)
    checkpoint = check_checkpoint(payload, thread_id) or forked
    if checkpoint is not None and thread_id is None:
        raise invalid(
            "a stateless run has no checkpoint to start from: run on the thread",
            "config.configurable.checkpoint_id",
        )
    check_metadata(payload.get("metadata"), "metadata")
    for field in ("interrupt_before", "interrupt_after"):
        check_nodes(payload.get(field), field)
    check_strategy(payload.get("multitask_strategy"))
    on_disconnect = payload.get("on_disconnect")
    if on_disconnect is not None and on_disconnect not in ON_DISCONNECT:
        raise invalid(
            f"on_disconnect must be cancel or continue, not {on_disconnect!r}", "on_disconnect"
        )
    return checkpoint, resumes, resume


def check_run_start(payload: MutableMapping[str, Any]) -> None:
    """What a run on the run routes starts from, Aegra's rule told in the one refusal shape:
    `input`, or `command.resume`, or a checkpoint to resume from; input and command not both. An
    empty input beside a command is dropped, as Aegra drops it (a frontend sends `input: {}` with
    its resume)."""
    has_command = payload.get("command") is not None
    if has_command and payload.get("input") == {}:
        payload["input"] = None
    if has_command and payload.get("input") is not None:
        raise invalid(
            "input and command are exclusive: send input to start a run, or command.resume alone to"
            " answer an interrupt",
            "command",
        )
    if (
        payload.get("input") is None
        and not has_command
        and payload.get("checkpoint") is None
        and payload.get("checkpoint_id") is None
    ):
        raise invalid(
            "a run needs input (or command.resume to answer an interrupt, or a checkpoint to resume"
            " from)",
            "input",
        )


COPY = "__copy__"
"""The `as_node` of Studio's "fork from here": a new checkpoint copied from one of the thread's,
with no values."""


def check_state_update(payload: Mapping[str, Any], thread_id: str) -> None:
    """POST /threads/{id}/state: reads pass; a write may only fork (`as_node: "__copy__"`, no
    values).

    `values` would be a checkpoint written as if a node had returned them, read by every later node
    (docs/deploy.md#admission)."""
    if payload.get("values") is not None:
        raise invalid(
            "values is refused: a thread's state is written by its graph's nodes, not by a caller;"
            " start a run with input, or answer an interrupt with command.resume",
            "values",
        )
    as_node = payload.get("as_node")
    if as_node not in (None, COPY):
        raise invalid(
            f"as_node is refused ({str(as_node)[:64]!r}): no caller writes as a node; only "
            f"as_node {COPY!r} (a fork of one of the thread's checkpoints, no values) is accepted",
            "as_node",
        )
    writes = as_node is not None
    if writes and payload.get("checkpoint_ns") not in (None, ""):
        raise invalid('checkpoint_ns must be the thread\'s root ("") for a fork', "checkpoint_ns")
    checkpoint = payload.get("checkpoint")
    if (
        checkpoint is not None
        and not writes
        and isinstance(checkpoint, Mapping)
        and set(checkpoint) <= {"checkpoint_id", "checkpoint_ns", "thread_id"}
    ):
        checkpoint = {
            k: v for k, v in checkpoint.items() if k != "checkpoint_ns"
        }  # a subgraph's state may be read
    check_checkpoint(
        {"checkpoint": checkpoint, "checkpoint_id": payload.get("checkpoint_id")}, thread_id
    )
