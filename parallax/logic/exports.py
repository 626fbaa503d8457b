"""Fine-tuning data from stored traces: `parallax export sft|preferences`.

Which runs give examples, and in which format, is in docs/data-loop.md (export).
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

from pydantic import ValidationError

from parallax.logic.export_lines import validate_line
from parallax.logic.run_record import latest_score, prompt_key
from parallax.logic.scoring import score
from parallax.logic.vote import normalize_answer
from parallax.runtime.redaction import redact_value
from parallax.state.plan import EditStep
from parallax.state.records import Speculation
from parallax.state.trace_record import EditCandidate, Message, TraceBranch, TraceRecord, TraceTask

FORMATS = ("sft", "trl", "openai", "kto")


# --- picking examples --------------------------------------------------------------------


def _reply(branch: TraceBranch) -> dict[str, Any]:
    return {"role": "assistant", "content": json.dumps(branch["output"], ensure_ascii=False)}


def _branch_answer(branch: TraceBranch) -> str:
    return str((branch.get("output") or {}).get("answer", ""))


def _gives_target(trace: TraceRecord, answer: str, question: str) -> bool:
    """Whether `answer` is the run's target, scored by the run's scorer."""
    return bool(
        score({"answer": answer}, trace["target"], question, trace.get("scorer") or "auto")[
            "correct"
        ]
    )


def is_right(trace: TraceRecord, min_score: float) -> bool | None:
    """True/False when the run's verdict is known (target first, then feedback), None otherwise."""
    if trace.get("correct") is not None:
        return bool(trace["correct"])
    feedback = latest_score(trace)
    return None if feedback is None else feedback >= min_score


def answering_branch(trace: TraceRecord) -> TraceBranch | None:
    """The business branch whose reply is the run's final answer (none for section runs)."""
    final = normalize_answer(trace.get("answer") or "")
    branches: list[TraceBranch] = trace.get("branches", [])
    for b in branches:
        if (
            b["kind"] in ("direct", "vote")
            and b.get("status") == "ok"
            and b.get("output")
            and normalize_answer(_branch_answer(b)) == final
        ):
            return b
    return None


def _prompt_of(trace: TraceRecord, branch: TraceBranch) -> list[Message] | None:
    return (trace.get("prompts") or {}).get(branch.get("prompt_key") or "")


class Collector:
    """Lines of one format, redacted, validated, de-duplicated by prompt; what was left out, by
    reason."""

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
        return {
            "format": self.fmt,
            "written": len(self.lines),
            "left_out": dict(self.left_out.most_common()),
        }


def _final_branch_and_prompt(
    trace: TraceRecord, out: Collector
) -> tuple[TraceBranch, list[Message]] | None:
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


def _checked(trace: TraceRecord) -> list[TraceBranch]:
    """A speculate run's candidates that made a reply and ran their check (the others give no
    example)."""
    return [
        b
        for b in trace.get("branches", [])
        if b["kind"] == "candidate"
        and b.get("status") == "ok"
        and b.get("output")
        and ((b.get("speculation") or {}).get("check") or {}).get("passed") is not None
    ]


def _speculation(candidate: TraceBranch) -> Speculation:
    return candidate.get("speculation") or {}


def _passed(candidate: TraceBranch) -> bool:
    return bool((_speculation(candidate)["check"] or {})["passed"])


def _won(candidate: TraceBranch) -> bool:
    return bool(_speculation(candidate).get("result") == "won")


def _plain(candidate: TraceBranch) -> bool:
    """A reply that is its answer alone (it names no further files), so an answer can judge all of
    it."""
    return not (candidate.get("output") or {}).get("files")


Judged = list[tuple[TraceBranch, bool | None, str]]
"""Each checked candidate, whether it is right (None: not known) and, when not known, why."""
EditJudged = list[tuple[EditCandidate, bool | None, str]]
"""The same for a speculative edit task's candidates."""


def _judged(trace: TraceRecord, out: Collector) -> Judged | None:
    """A speculate run's checked candidates, each judged by its check unless a person said
    otherwise; None (counted) without any. A person's word is the stronger signal
    (logic/trace_signal.py), since a check can pass a wrong answer:
    - with a target (`--target`, or `parallax feedback --correct`), a candidate whose answer does
      not match it is wrong whatever its check said; one that matches is right when its check passed
      or its reply is that answer alone, and not known when it also wrote files that failed the
      check (the answer is right, its files may not be);
    - without one, a latest score below 0.5 says the run's answer, the winner's, is wrong: the
      winner is wrong, the other candidates that passed the check the person overruled are not
      known, and those that failed stay wrong.
    """
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
        return [
            (
                (c, None, "candidate passed a check a person overruled")
                if _passed(c) and not _won(c)
                else (c, False, "")
            )
            for c in checked
        ]
    return [(c, _passed(c), "") for c in checked]


def _chosen(trace: TraceRecord, judged: Judged, out: Collector) -> TraceBranch | None:
    """The speculate run's positive example: the winner when it is right, else (with a target) a
    candidate that gave it; None (counted, with why) otherwise. A candidate that merely passed after
    the winner is not one.
    """
    winner = next(((c, right) for c, right, _ in judged if _won(c)), None)
    if winner is not None and winner[1]:
        return winner[0]
    if trace.get("target") is not None and (
        found := next((c for c, right, _ in judged if right), None)
    ):
        return found
    if winner is not None and _passed(winner[0]):
        out.skip("a person said the winner is wrong (its check passed)")
    else:
        out.skip(
            "no candidate gave the target"
            if trace.get("target") is not None
            else "no candidate passed its check"
        )
    return None


def _speculate_sft(trace: TraceRecord, out: Collector) -> None:
    if (judged := _judged(trace, out)) is None or (chosen := _chosen(trace, judged, out)) is None:
        return
    if (prompt := _prompt_of(trace, chosen)) is None:
        return out.skip("prompt not kept in the trace")
    out.add(chosen["prompt_key"], {"messages": [*prompt, _reply(chosen)]})


def _speculate_kto(trace: TraceRecord, out: Collector) -> None:
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


def _speculate_pair(trace: TraceRecord, out: Collector) -> tuple[TraceBranch, TraceBranch] | None:
    if (judged := _judged(trace, out)) is None or (chosen := _chosen(trace, judged, out)) is None:
        return None
    wrong = [c for c, right, _ in judged if right is False]
    if not wrong:
        out.skip("no pair: no candidate was wrong")
        return None
    # one with the very same prompt first, then the winner a person overruled: the pair says what
    # the check missed
    return chosen, min(
        wrong, key=lambda c: (c.get("prompt_key") != chosen.get("prompt_key"), not _won(c))
    )


# --- plan runs' speculative edit tasks: each candidate an agent's tool-calling conversation
# ----------------

EDIT_TOOLS = {
    "list": ("List the files under a folder.", ("path",)),
    "read": ("Read a file.", ("path",)),
    "write": ("Replace a whole file with new content.", ("path", "content")),
    "test": ("Run the task's test command.", ()),
    "done": ("Stop, saying what was changed.", ("note",)),
}
"""The edit agent's tools (its EditStep actions) and the arguments each one uses."""


def edit_tools() -> list[dict[str, Any]]:
    fields = EditStep.model_fields
    return [
        {
            "type": "function",
            "function": {
                "name": name,
                "description": what,
                "parameters": {
                    "type": "object",
                    "properties": {
                        a: {"type": "string", "description": fields[a].description or a}
                        for a in args
                    },
                    "required": list(args),
                },
            },
        }
        for name, (what, args) in EDIT_TOOLS.items()
    ]


def speculative_edits(trace: TraceRecord) -> list[TraceTask]:
    """A plan run's speculative edit tasks that ran their candidates (a task reused from an earlier
    round ran none)."""
    return [
        t
        for t in trace.get("tasks") or []
        if (t.get("edit") or {}).get("candidates") and "reused_from_round" not in t
    ]


def conversation_keys(trace: TraceRecord) -> list[str]:
    """Where a plan run's edit candidates' conversations are kept
    (runtime/storage/edit_conversations.py); the caller puts them in the trace's
    `edit_conversations` (key -> conversation) before exporting it.
    """
    return [
        key
        for t in speculative_edits(trace)
        for c in t["edit"]["candidates"]
        if (key := c.get("conversation"))
    ]


def _edit_judged(trace: TraceRecord, task: TraceTask, out: Collector) -> EditJudged | None:
    """A speculative edit task's candidates that ran their tests, each judged by them unless a
    person said the plan run is wrong: that overrules every test that passed in it, but not which
    task's patch is to blame, so a candidate whose tests passed is then not known (one whose tests
    failed stays wrong). A target cannot judge a patch.
    """
    checked = [c for c in task["edit"]["candidates"] if _tests_passed(c) is not None]
    if not checked:
        out.skip("edit task without a checked candidate")
        return None
    if (
        is_right(trace, 0.5) is False
    ):  # a person said the plan run is wrong: a target missed, or a score below 0.5
        overruled = "a person said the plan run is wrong (its tests passed)"
        return [(c, None, overruled) if _tests_passed(c) else (c, False, "") for c in checked]
    return [(c, bool(_tests_passed(c)), "") for c in checked]


def _tests_passed(candidate: EditCandidate) -> bool | None:
    """Whether an edit candidate's tests passed; None when it did not run them."""
    return (candidate.get("check") or {}).get("passed")


def _edit_winner(judged: EditJudged, out: Collector) -> EditCandidate | None:
    winner = next((c for c, right, _ in judged if c.get("result") == "won" and right), None)
    if winner is None:
        out.skip(
            "a person said the plan run is wrong (its tests passed)"
            if any(r is None for _, r, _ in judged)
            else "no candidate passed its tests"
        )
    return winner


def _conversation(
    trace: TraceRecord, candidate: EditCandidate, openai: bool, out: Collector
) -> tuple[list[Message], list[dict[str, Any]]] | None:
    """(prompt, the agent's turns) of an edit candidate: each reply a tool call (OpenAI's or TRL's
    shape) answered by its tool's result, ending at the agent's last reply; None (counted) when its
    conversation is not at hand.
    """
    kept = (trace.get("edit_conversations") or {}).get(candidate.get("conversation") or "")
    if not kept:
        out.skip("edit conversation not kept")
        return None
    turns: list[dict[str, Any]] = []
    for n, step in enumerate(kept["steps"], 1):
        name = step["call"]["action"]
        args = {a: step["call"].get(a, "") for a in EDIT_TOOLS[name][1]}
        call = (
            {
                "id": f"call_{n}",
                "type": "function",
                "function": {"name": name, "arguments": json.dumps(args, ensure_ascii=False)},
            }
            if openai
            else {"type": "function", "function": {"name": name, "arguments": args}}
        )
        turns.append({"role": "assistant", "tool_calls": [call]})
        if "result" in step:
            turns.append(
                {
                    "role": "tool",
                    "content": step["result"],
                    **({"tool_call_id": f"call_{n}"} if openai else {"name": name}),
                }
            )
    return kept["messages"], turns[:-1] if turns and turns[-1]["role"] == "tool" else turns


def _edit_sft(trace: TraceRecord, out: Collector) -> None:
    for task in speculative_edits(trace):
        if (
            (judged := _edit_judged(trace, task, out))
            and (winner := _edit_winner(judged, out))
            and (found := _conversation(trace, winner, True, out))
        ):
            prompt, turns = found
            out.add(prompt_key(prompt), {"messages": [*prompt, *turns], "tools": edit_tools()})


def _edit_kto(trace: TraceRecord, out: Collector) -> None:
    for task in speculative_edits(trace):
        for c in task["edit"]["candidates"]:
            if _tests_passed(c) is None:
                out.skip("candidate not checked (cancelled, refused or failed)")
        for c, right, why in _edit_judged(trace, task, out) or []:
            if right is None:
                out.skip(why)
            elif found := _conversation(trace, c, False, out):
                prompt, turns = found
                out.add(
                    prompt_key(prompt),
                    {"prompt": prompt, "completion": turns, "label": right, "tools": edit_tools()},
                )


def _edit_pairs(trace: TraceRecord, out: Collector) -> None:
    """TRL pairs: chosen = the winner, rejected = a candidate whose tests failed (one given the same
    approach, so the same prompt, first), under the winner's prompt, as for speculate runs."""
    for task in speculative_edits(trace):
        if not (judged := _edit_judged(trace, task, out)) or not (
            winner := _edit_winner(judged, out)
        ):
            continue
        wrong = [c for c, right, _ in judged if right is False]
        if not wrong:
            out.skip("no pair: no candidate was wrong")
        elif (chosen := _conversation(trace, winner, False, out)) and (
            rejected := _conversation(
                trace,
                min(wrong, key=lambda c: c.get("approach") != winner.get("approach")),
                False,
                out,
            )
        ):
            out.add(
                prompt_key(chosen[0]),
                {
                    "prompt": chosen[0],
                    "chosen": chosen[1],
                    "rejected": rejected[1],
                    "tools": edit_tools(),
                },
            )


def sft(traces: list[TraceRecord], min_score: float = 1.0) -> Collector:
    out = Collector("sft")
    for trace in traces:
        if trace.get("mode") == "speculate":
            _speculate_sft(trace, out)
            continue
        if speculative_edits(trace):
            _edit_sft(trace, out)
            continue
        if not is_right(trace, min_score):
            out.skip("not known to be right" if is_right(trace, min_score) is None else "wrong")
            continue
        if found := _final_branch_and_prompt(trace, out):
            branch, prompt = found
            out.add(branch["prompt_key"], {"messages": [*prompt, _reply(branch)]})
    return out


def kto(traces: list[TraceRecord], min_score: float = 1.0) -> Collector:
    out = Collector("kto")
    for trace in traces:
        if trace.get("mode") == "speculate":
            _speculate_kto(trace, out)
            continue
        if speculative_edits(trace):
            _edit_kto(trace, out)
            continue
        feedback = latest_score(trace)
        label = (feedback >= 0.5) if feedback is not None else trace.get("correct")
        if label is None:
            out.skip("no verdict (no target, no feedback)")
            continue
        if found := _final_branch_and_prompt(trace, out):
            branch, prompt = found
            out.add(
                branch["prompt_key"],
                {"prompt": prompt, "completion": [_reply(branch)], "label": bool(label)},
            )
    return out


def _right_votes(
    trace: TraceRecord, votes: list[TraceBranch], min_score: float
) -> list[bool] | None:
    """Whether each vote gave the right answer, or None when the right answer is not known."""
    if trace.get("target") is not None:
        question = next(
            (m["content"] for m in _prompt_of(trace, votes[0]) or [] if m["role"] == "user"), ""
        )
        return [_gives_target(trace, _branch_answer(b), question) for b in votes]
    feedback = latest_score(trace)
    if feedback is not None and feedback >= min_score:
        final = normalize_answer(trace.get("answer") or "")
        return [normalize_answer(_branch_answer(b)) == final for b in votes]
    return None


def _vote_pair(
    trace: TraceRecord, out: Collector, min_score: float
) -> tuple[TraceBranch, TraceBranch] | None:
    """A vote that gave the right answer and one, sent the same prompt, that did not; None (counted)
    otherwise."""
    if trace.get("mode") != "vote":
        out.skip("not a vote or speculate run")
        return None
    votes = [
        b
        for b in trace.get("branches", [])
        if b["kind"] == "vote" and b.get("status") == "ok" and b.get("output")
    ]
    right = _right_votes(trace, votes, min_score) if votes else None
    if right is None:
        out.skip("right answer not known")
        return None
    chosen = next((b for b, ok in zip(votes, right, strict=True) if ok), None)
    rejected = next(
        (
            b
            for b, ok in zip(votes, right, strict=True)
            if not ok and chosen and b.get("prompt_key") == chosen.get("prompt_key")
        ),
        None,
    )
    if chosen is None or rejected is None:
        out.skip("no pair: every vote was " + ("wrong" if chosen is None else "right"))
        return None
    return chosen, rejected


def preferences(traces: list[TraceRecord], fmt: str, min_score: float = 1.0) -> Collector:
    out = Collector(fmt)
    for trace in traces:
        if speculative_edits(trace):
            if fmt == "openai":
                out.skip(
                    "tool-calling conversations (an OpenAI preference output is one assistant"
                    " message)"
                )
            else:
                _edit_pairs(trace, out)
            continue
        pair = (
            _speculate_pair(trace, out)
            if trace.get("mode") == "speculate"
            else _vote_pair(trace, out, min_score)
        )
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
            line = {
                "input": {"messages": prompt, "tools": [], "parallel_tool_calls": True},
                "preferred_output": [_reply(chosen)],
                "non_preferred_output": [_reply(rejected)],
            }
        out.add(chosen["prompt_key"], line)
    return out


def export(traces: list[TraceRecord], fmt: str, min_score: float = 1.0) -> Collector:
    """Examples of format `fmt` (sft | trl | openai | kto) from `traces`."""
    if fmt == "sft":
        return sft(traces, min_score)
    if fmt == "kto":
        return kto(traces, min_score)
    if fmt in ("trl", "openai"):
        return preferences(traces, fmt, min_score)
    raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
