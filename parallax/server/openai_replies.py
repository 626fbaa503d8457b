"""A Parallax run in OpenAI's chat completion shapes: reply, stream chunks, usage (docs/openai.md).

Built in one place from a run's state, and tested offline against the openai SDK's own types.
"""

from __future__ import annotations

import json
from typing import Any, cast

from parallax.logic.spend import spend_of
from parallax.state.records import Spend

REPORTED = ("status", "confidence", "vote_counts", "reason", "mode", "trace_id")


def usage(state: dict[str, Any]) -> dict[str, Any]:
    """Tokens of every branch of the run, summed, and what they cost (`parallax_cost_usd`, None:
    unknown)."""
    totals: dict[str, Any] = {"prompt_tokens": 0, "completion_tokens": 0, "total_tokens": 0}
    for branch in state.get("branches") or []:
        tokens = branch.get("tokens") or {} if isinstance(branch, dict) else {}
        for ours, theirs in (
            ("prompt", "prompt_tokens"),
            ("completion", "completion_tokens"),
            ("total", "total_tokens"),
        ):
            value = tokens.get(ours)
            totals[theirs] += value if isinstance(value, int) else 0
    totals["parallax_cost_usd"] = _spend(state)["cost_usd"]
    return totals


def _spend(state: dict[str, Any]) -> Spend:
    """The run's spend as the run settled it, or summed here (a run streamed before its end has no
    `spend` yet)."""
    settled = state.get("spend")
    if isinstance(settled, dict):
        return cast(Spend, settled)
    return spend_of(b for b in state.get("branches") or [] if isinstance(b, dict))


def report(state: dict[str, Any], thread_id: str, run_id: str) -> dict[str, Any]:
    """The reply's `parallax` field."""
    spend = _spend(state)
    return {
        **{key: state.get(key) for key in REPORTED},
        "thread_id": thread_id,
        "run_id": run_id,
        "cost_usd": spend["cost_usd"],
        "spend": spend,
        "note": state.get("note") or "",
    }


def answer(state: dict[str, Any], typed: bool) -> tuple[str | None, str | None]:
    """(content, refusal) of the reply."""
    text = state.get("answer") or ""
    if typed:
        data = state.get("data")
        text = json.dumps(data, ensure_ascii=False) if isinstance(data, dict) else ""
    if text:
        return text, None
    why = state.get("reason") or "the run settled on no answer"
    return None, f"Parallax run {state.get('status') or 'failed'}: {why}"


def completion(
    state: dict[str, Any], *, model: str, run_id: str, thread_id: str, created: int, typed: bool
) -> dict[str, Any]:
    content, refusal = answer(state, typed)
    return {
        "id": f"chatcmpl-{run_id}",
        "object": "chat.completion",
        "created": created,
        "model": model,
        "choices": [
            {
                "index": 0,
                "message": {"role": "assistant", "content": content, "refusal": refusal},
                "logprobs": None,
                "finish_reason": "stop",
            }
        ],
        "usage": usage(state),
        "parallax": report(state, thread_id, run_id),
    }


class ChunkWriter:
    """The chunks of one streamed reply, as `data: ...` lines of a server-sent event stream."""

    def __init__(
        self, *, model: str, run_id: str, thread_id: str, created: int, include_usage: bool
    ) -> None:
        self.model, self.run_id, self.thread_id, self.created = model, run_id, thread_id, created
        self.include_usage = include_usage

    def _chunk(self, choices: list[dict[str, Any]], **extra: Any) -> str:
        body = {
            "id": f"chatcmpl-{self.run_id}",
            "object": "chat.completion.chunk",
            "created": self.created,
            "model": self.model,
            "choices": choices,
            **extra,
        }
        if self.include_usage and "usage" not in body:
            body["usage"] = None
        return f"data: {json.dumps(body, ensure_ascii=False)}\n\n"

    def delta(self, finish_reason: str | None = None, **delta: Any) -> str:
        return self._chunk(
            [{"index": 0, "delta": delta, "logprobs": None, "finish_reason": finish_reason}]
        )

    def start(self) -> str:
        """The first chunk: the assistant's role, and which thread and run this is (to read it back
        later)."""
        return self._chunk(
            [
                {
                    "index": 0,
                    "delta": {"role": "assistant", "content": ""},
                    "logprobs": None,
                    "finish_reason": None,
                }
            ],
            parallax={"thread_id": self.thread_id, "run_id": self.run_id},
        )

    def finish(self, state: dict[str, Any], typed: bool) -> list[str]:
        content, refusal = answer(state, typed)
        out = [self.delta(content=content)] if content else [self.delta(refusal=refusal)]
        out.append(
            self._chunk(
                [{"index": 0, "delta": {}, "logprobs": None, "finish_reason": "stop"}],
                parallax=report(state, self.thread_id, self.run_id),
            )
        )
        if self.include_usage:
            out.append(self._chunk([], usage=usage(state)))
        return out

    @staticmethod
    def error(message: str, kind: str = "server_error", code: str | None = None) -> str:
        """An error inside a stream that has already started (the openai SDK raises APIError on
        it)."""
        error = {"message": message, "type": kind, "param": None, "code": code}
        return f"data: {json.dumps({'error': error})}\n\n"

    @staticmethod
    def done() -> str:
        return "data: [DONE]\n\n"


def progress(update: Any) -> list[str]:
    """Lines of thinking for one graph update: a line per finished branch or plan task, and the plan
    itself."""
    lines: list[str] = []
    if not isinstance(update, dict):
        return lines
    for node, values in update.items():
        if not isinstance(values, dict):
            continue
        if node == "make_plan" and isinstance(values.get("plan"), dict):
            tasks = values["plan"].get("tasks") or []
            lines.append(
                f"plan: {len(tasks)} task(s): "
                + "; ".join(f"{t.get('id')}. {t.get('goal')}" for t in tasks)
            )
        for task in values.get("tasks") or []:
            if isinstance(task, dict) and task.get("status") not in (None, "PENDING", "RUNNING"):
                lines.append(
                    f"task {task.get('id')} ({task.get('kind')}): {task.get('status')}"
                    + (f" - {task['reason']}" if task.get("reason") else "")
                )
        if node in ("work", "safety", "judge", "red_team"):
            for branch in values.get("branches") or []:
                if isinstance(branch, dict):
                    lines.append(branch_line(branch))
        if node == "merge" and values.get("status"):
            lines.append(
                f"merged: {values['status']}"
                + (f" - {values['reason']}" if values.get("reason") else "")
            )
    return lines


def branch_line(branch: dict[str, Any]) -> str:
    said = branch.get("vote")
    if said is None and isinstance(branch.get("output"), dict):
        said = branch["output"].get("answer")
    line = f"{branch.get('kind')} branch {branch.get('id')}: {branch.get('status')}"
    if isinstance(said, str) and said:
        line += f" -> {said[:120]}"
    if isinstance(branch.get("latency_ms"), int | float):
        line += f" ({branch['latency_ms'] / 1000:.1f} s)"
    return line
