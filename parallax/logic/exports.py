"""Fine-tuning data from stored traces: `parallax export sft|preferences`.

Formats (each line is checked against its pydantic model before it is written):
- `sft`: OpenAI chat fine-tuning, `{"messages": [system, user, assistant]}`;
- `trl`: TRL's conversational preference type, `{"prompt": [system, user], "chosen": [assistant],
  "rejected": [assistant]}`;
- `openai`: OpenAI preference (DPO) fine-tuning, `{"input": {"messages": [...], "tools": [],
  "parallel_tool_calls": true}, "preferred_output": [assistant], "non_preferred_output": [assistant]}`;
- `kto`: TRL's conversational unpaired preference type, `{"prompt": [...], "completion": [assistant],
  "label": bool}`.

Where examples come from. A trace keeps the messages its business branches were sent
(logic/run_record.py), and each branch record its reply; the assistant turn is that reply
as the JSON object the branch was asked for. A run is *right* when it matched its target,
or (without one) when its latest feedback is at least `min_score`.
- sft: right runs, the branch that gave the final answer (section runs have no such branch:
  their answer is assembled from many);
- preferences: vote runs whose right answer is known (the target, or the final answer of a
  run with feedback >= `min_score`): chosen = a vote that gave it, rejected = one that did not;
  all votes of a run share one prompt;
- kto: runs with a verdict (a target or feedback), the branch that gave the final answer,
  label = right (feedback >= 0.5 when there is feedback).
Speculate runs with a check are judged by the check instead, unless a person said otherwise:
each candidate's own prompt is kept (the approach it was given), and a candidate that passed
is right, one that failed is wrong. A check can pass a wrong answer, so a person's word is
stronger (`_judged`): a target (`--target`, `feedback --correct`) judges every candidate's
answer (one that gives it is right if it passed or its reply is that answer alone; one that
also wrote files that failed is not judged), and a latest score below 0.5 makes the winner
wrong. sft: the winner when right, else a candidate that gave the target; kto: every judged
candidate, label = right; preferences: chosen = that same candidate, rejected = a wrong one
(one with the very same prompt first, then an overruled winner: candidates' prompts differ
only by their approach sentence), under the chosen one's prompt. Cancelled, refused and
failed candidates were never checked and give nothing; a run without a check (a judge's
pick) gives nothing.
Every line is redacted again and de-duplicated by prompt (the first run with a prompt
wins); what is left out is counted by reason.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationError

from parallax.logic.run_record import latest_score
from parallax.logic.scoring import score
from parallax.logic.vote import normalize_answer
from parallax.runtime.redaction import redact_value

FORMATS = ("sft", "trl", "openai", "kto")


class Message(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True)
    role: Literal["system", "user", "assistant"]
    content: str = Field(min_length=1)


def _roles(messages: list[Message], allowed: set[str], what: str, exactly_one: bool = False) -> list[Message]:
    if not messages or any(m.role not in allowed for m in messages):
        raise ValueError(f"{what} must be {'one' if exactly_one else 'a list of'} {'/'.join(sorted(allowed))} message(s)")
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


MODELS: dict[str, type[BaseModel]] = {"sft": SftLine, "trl": TrlPreference, "openai": OpenAIPreference, "kto": KtoLine}


def validate_line(fmt: str, line: dict[str, Any]) -> None:
    """ValidationError when `line` is not a valid line of `fmt`."""
    MODELS[fmt].model_validate(line)


# --- picking examples --------------------------------------------------------------------

def _reply(branch: dict[str, Any]) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps(branch["output"], ensure_ascii=False)}


def _branch_answer(branch: dict[str, Any]) -> str:
    return str((branch.get("output") or {}).get("answer", ""))


def _gives_target(trace: dict[str, Any], answer: str, question: str) -> bool:
    """Whether `answer` is the run's target, scored by the run's scorer."""
    return bool(score({"answer": answer}, trace["target"], question, trace.get("scorer") or "auto")["correct"])


def is_right(trace: dict[str, Any], min_score: float) -> bool | None:
    """True/False when the run's verdict is known (target first, then feedback), None otherwise."""
    if trace.get("correct") is not None:
        return bool(trace["correct"])
    feedback = latest_score(trace)
    return None if feedback is None else feedback >= min_score


def answering_branch(trace: dict[str, Any]) -> dict[str, Any] | None:
    """The business branch whose reply is the run's final answer (none for section runs)."""
    final = normalize_answer(trace.get("answer") or "")
    branches: list[dict[str, Any]] = trace.get("branches", [])
    for b in branches:
        if b["kind"] in ("direct", "vote") and b.get("status") == "ok" and b.get("output") \
                and normalize_answer(_branch_answer(b)) == final:
            return b
    return None


def _prompt_of(trace: dict[str, Any], branch: dict[str, Any]) -> list[dict[str, Any]] | None:
    return (trace.get("prompts") or {}).get(branch.get("prompt_key") or "")


class Collector:
    """Lines of one format, redacted, validated, de-duplicated by prompt; what was left out, by reason."""

    def __init__(self, fmt: str) -> None:
        self.fmt = fmt
        self.lines: list[dict[str, Any]] = []
        self.left_out: Counter[str] = Counter()
        self.seen: set[str] = set()

    def skip(self, reason: str) -> None:
        self.left_out[reason] += 1

    def add(self, prompt_key: str, line: dict[str, Any]) -> None:
        if prompt_key in self.seen:
            return self.skip("duplicate prompt")
        line = redact_value(line)
        try:
            validate_line(self.fmt, line)
        except ValidationError as exc:
            return self.skip(f"failed {self.fmt} validation: {exc.errors()[0]['msg']}")
        self.seen.add(prompt_key)
        self.lines.append(line)

    def report(self) -> dict[str, Any]:
        return {"format": self.fmt, "written": len(self.lines), "left_out": dict(self.left_out.most_common())}


def _final_branch_and_prompt(trace: dict[str, Any], out: Collector) -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
    if trace.get("mode") == "section":
        out.skip("section run (its answer comes from many prompts)")
        return None
    branch = answering_branch(trace)
    if branch is None:
        out.skip("no branch gave the final answer")
        return None
    prompt = _prompt_of(trace, branch)
    if prompt is None:
        out.skip("prompt not kept in the trace")
        return None
    return branch, prompt


def _checked(trace: dict[str, Any]) -> list[dict[str, Any]]:
    """A speculate run's candidates that made a reply and ran their check (the others give no example)."""
    return [b for b in trace.get("branches", []) if b["kind"] == "candidate" and b.get("status") == "ok"
            and b.get("output") and ((b.get("speculation") or {}).get("check") or {}).get("passed") is not None]


def _passed(candidate: dict[str, Any]) -> bool:
    return bool(candidate["speculation"]["check"]["passed"])


def _won(candidate: dict[str, Any]) -> bool:
    return bool(candidate["speculation"].get("result") == "won")


def _plain(candidate: dict[str, Any]) -> bool:
    """A reply that is its answer alone (it names no further files), so an answer can judge all of it."""
    return not (candidate.get("output") or {}).get("files")


Judged = list[tuple[dict[str, Any], bool | None, str]]
"""Each checked candidate, whether it is right (None: not known) and, when not known, why."""


def _judged(trace: dict[str, Any], out: Collector) -> Judged | None:
    """A speculate run's checked candidates, each judged by its check unless a person said otherwise; None (counted)
    without any. A person's word is the stronger signal (logic/trace_signal.py), since a check can pass a wrong answer:
    - with a target (`--target`, or `parallax feedback --correct`), a candidate whose answer does not match it is wrong
      whatever its check said; one that matches is right when its check passed or its reply is that answer alone, and
      not known when it also wrote files that failed the check (the answer is right, its files may not be);
    - without one, a latest score below 0.5 says the run's answer, the winner's, is wrong: the winner is wrong, the
      other candidates that passed the check the person overruled are not known, and those that failed stay wrong."""
    checked = _checked(trace)
    if not checked:
        out.skip("speculate run without a checked candidate")
        return None
    if trace.get("target") is not None:
        question = trace.get("task") or trace.get("task_preview") or ""
        judged: Judged = []
        for c in checked:
            if not _gives_target(trace, _branch_answer(c).strip(), question):
                judged.append((c, False, ""))
            elif _passed(c) or _plain(c):
                judged.append((c, True, ""))
            else:
                judged.append((c, None, "candidate gave the target but its files failed the check"))
        return judged
    feedback = latest_score(trace)
    if feedback is not None and feedback < 0.5:
        return [(c, None, "candidate passed a check a person overruled") if _passed(c) and not _won(c) else (c, False, "")
                for c in checked]
    return [(c, _passed(c), "") for c in checked]


def _chosen(trace: dict[str, Any], judged: Judged, out: Collector) -> dict[str, Any] | None:
    """The speculate run's positive example: the winner when it is right, else (with a target) a candidate that
    gave it; None (counted, with why) otherwise. A candidate that merely passed after the winner is not one."""
    winner = next(((c, right) for c, right, _ in judged if _won(c)), None)
    if winner is not None and winner[1]:
        return winner[0]
    if trace.get("target") is not None and (found := next((c for c, right, _ in judged if right), None)):
        return found
    if winner is not None and _passed(winner[0]):
        out.skip("a person said the winner is wrong (its check passed)")
    else:
        out.skip("no candidate gave the target" if trace.get("target") is not None else "no candidate passed its check")
    return None


def _speculate_sft(trace: dict[str, Any], out: Collector) -> None:
    if (judged := _judged(trace, out)) is None or (chosen := _chosen(trace, judged, out)) is None:
        return
    if (prompt := _prompt_of(trace, chosen)) is None:
        return out.skip("prompt not kept in the trace")
    out.add(chosen["prompt_key"], {"messages": [*prompt, _reply(chosen)]})


def _speculate_kto(trace: dict[str, Any], out: Collector) -> None:
    if (judged := _judged(trace, out)) is None:
        return
    ids = {c["id"] for c, _, _ in judged}
    for c in trace.get("branches", []):
        if c["kind"] == "candidate" and c["id"] not in ids:
            out.skip("candidate not checked (cancelled, refused or failed)")
    for c, right, why in judged:
        if right is None:
            out.skip(why)
        elif (prompt := _prompt_of(trace, c)) is None:
            out.skip("prompt not kept in the trace")
        else:
            out.add(c["prompt_key"], {"prompt": prompt, "completion": [_reply(c)], "label": right})


def _speculate_pair(trace: dict[str, Any], out: Collector) -> tuple[dict[str, Any], dict[str, Any]] | None:
    if (judged := _judged(trace, out)) is None or (chosen := _chosen(trace, judged, out)) is None:
        return None
    wrong = [c for c, right, _ in judged if right is False]
    if not wrong:
        out.skip("no pair: no candidate was wrong")
        return None
    # one with the very same prompt first, then the winner a person overruled: the pair says what the check missed
    return chosen, min(wrong, key=lambda c: (c.get("prompt_key") != chosen.get("prompt_key"), not _won(c)))


def sft(traces: list[dict[str, Any]], min_score: float = 1.0) -> Collector:
    out = Collector("sft")
    for trace in traces:
        if trace.get("mode") == "speculate":
            _speculate_sft(trace, out)
            continue
        if not is_right(trace, min_score):
            out.skip("not known to be right" if is_right(trace, min_score) is None else "wrong")
            continue
        if found := _final_branch_and_prompt(trace, out):
            branch, prompt = found
            out.add(branch["prompt_key"], {"messages": [*prompt, _reply(branch)]})
    return out


def kto(traces: list[dict[str, Any]], min_score: float = 1.0) -> Collector:
    out = Collector("kto")
    for trace in traces:
        if trace.get("mode") == "speculate":
            _speculate_kto(trace, out)
            continue
        feedback = latest_score(trace)
        label = (feedback >= 0.5) if feedback is not None else trace.get("correct")
        if label is None:
            out.skip("no verdict (no target, no feedback)")
            continue
        if found := _final_branch_and_prompt(trace, out):
            branch, prompt = found
            out.add(branch["prompt_key"], {"prompt": prompt, "completion": [_reply(branch)], "label": bool(label)})
    return out


def _right_votes(trace: dict[str, Any], votes: list[dict[str, Any]], min_score: float) -> list[bool] | None:
    """Whether each vote gave the right answer, or None when the right answer is not known."""
    if trace.get("target") is not None:
        question = next((m["content"] for m in _prompt_of(trace, votes[0]) or [] if m["role"] == "user"), "")
        return [_gives_target(trace, _branch_answer(b), question) for b in votes]
    feedback = latest_score(trace)
    if feedback is not None and feedback >= min_score:
        final = normalize_answer(trace.get("answer") or "")
        return [normalize_answer(_branch_answer(b)) == final for b in votes]
    return None


def _vote_pair(trace: dict[str, Any], out: Collector, min_score: float) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """A vote that gave the right answer and one, sent the same prompt, that did not; None (counted) otherwise."""
    if trace.get("mode") != "vote":
        out.skip("not a vote or speculate run")
        return None
    votes = [b for b in trace.get("branches", []) if b["kind"] == "vote" and b.get("status") == "ok" and b.get("output")]
    right = _right_votes(trace, votes, min_score) if votes else None
    if right is None:
        out.skip("right answer not known")
        return None
    chosen = next((b for b, ok in zip(votes, right, strict=True) if ok), None)
    rejected = next((b for b, ok in zip(votes, right, strict=True) if not ok and chosen
                     and b.get("prompt_key") == chosen.get("prompt_key")), None)
    if chosen is None or rejected is None:
        out.skip("no pair: every vote was " + ("wrong" if chosen is None else "right"))
        return None
    return chosen, rejected


def preferences(traces: list[dict[str, Any]], fmt: str, min_score: float = 1.0) -> Collector:
    out = Collector(fmt)
    for trace in traces:
        pair = _speculate_pair(trace, out) if trace.get("mode") == "speculate" else _vote_pair(trace, out, min_score)
        if pair is None:
            continue
        chosen, rejected = pair
        prompt = _prompt_of(trace, chosen)
        if prompt is None:
            out.skip("prompt not kept in the trace")
            continue
        line: dict[str, Any]
        if fmt == "trl":
            line = {"prompt": prompt, "chosen": [_reply(chosen)], "rejected": [_reply(rejected)]}
        else:
            line = {"input": {"messages": prompt, "tools": [], "parallel_tool_calls": True},
                    "preferred_output": [_reply(chosen)], "non_preferred_output": [_reply(rejected)]}
        out.add(chosen["prompt_key"], line)
    return out


def export(traces: list[dict[str, Any]], fmt: str, min_score: float = 1.0) -> Collector:
    """Examples of format `fmt` (sft | trl | openai | kto) from `traces`."""
    if fmt == "sft":
        return sft(traces, min_score)
    if fmt == "kto":
        return kto(traces, min_score)
    if fmt in ("trl", "openai"):
        return preferences(traces, fmt, min_score)
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")

