"""A scripted model for chat conversations: it answers a task only when the facts it needs are in
its prompt.

Arithmetic in words: "What is 12 × 12?", "What is half of 144?", "What is 72 plus 8?", "What is 80
times 2?", "What is 160 minus 144?". A task that names its numbers is answered (the number, as
text); one that points back ("And half of that?") is answered UNKNOWN, so a chat that sends only the
last message gets visibly wrong replies. The chat's condense call (schema CondensedTask) is scripted
like a model that reads the earlier turns: "that", "it" and "the result" become the last answer,
"the first answer" the first one. The same rules serve the fault server (`conversation_reply(body)`,
for `langgraph dev`, `parallax serve` and the browser) and unit tests' ScriptedChatModel
(`reply_for(prompt, schema)`).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from typing import Any

UNKNOWN = "I cannot tell which number that means"
TWO_TURNS = [("What is 12 × 12?", "144"), ("And half of that?", "72")]
FIVE_TURNS = [
    ("What is 12 × 12?", "144"),
    ("And half of that?", "72"),
    ("Add 8 to it.", "80"),
    ("Double the result.", "160"),
    ("Subtract the first answer from that.", "16"),
]
"""(what the person writes, the right reply) for each turn: every follow-up needs an earlier answer.
"""

N = r"(-?\d+(?:\.\d+)?)"
SUMS = [
    (re.compile(rf"What is {N} (?:×|\*|x|times) {N}\?"), lambda a, b: a * b),
    (re.compile(rf"What is half of {N}\?"), lambda a: a / 2),
    (re.compile(rf"What is {N} plus {N}\?"), lambda a, b: a + b),
    (re.compile(rf"What is {N} minus {N}\?"), lambda a, b: a - b),
]
FOLLOW_UPS = [
    (re.compile(r"half of that", re.I), "What is half of {last}?"),
    (re.compile(r"^Add (\d+) to it", re.I), "What is {last} plus {0}?"),
    (re.compile(r"^Double the result", re.I), "What is {last} times 2?"),
    (re.compile(r"^Subtract the first answer from that", re.I), "What is {last} minus {first}?"),
]


def _number(value: Fraction) -> str:
    return str(value.numerator) if value.denominator == 1 else str(float(value))


def answer_of(task: str) -> str:
    """The answer to the first sum the task states in full; UNKNOWN when it states none."""
    for pattern, op in SUMS:
        if found := pattern.search(task):
            return _number(op(*(Fraction(g) for g in found.groups())))
    return UNKNOWN


def condensed(prompt: str) -> str:
    """The last message rewritten with the earlier turns' answers (as the condense prompt lays them
    out)."""
    answers = re.findall(r"^Answer: (.*)$", prompt, re.M)
    last_message = re.search(r"Last message: (.*)", prompt)
    message = last_message.group(1).strip() if last_message else ""
    for pattern, template in FOLLOW_UPS:
        if answers and (found := pattern.search(message)):
            return template.format(*found.groups(), last=answers[-1], first=answers[0])
    return message


def reply_for(prompt: str, schema: str) -> str:
    """The JSON reply to a call asking for `schema` (its pydantic name) with `prompt` (the messages'
    text)."""
    if schema == "CondensedTask":
        return json.dumps({"task": condensed(prompt)})
    if "Candidate answers" in prompt:
        return json.dumps({"choice": "none of them", "reason": "?"})
    return json.dumps({"reasoning": "worked it out", "answer": answer_of(prompt.split("Now:")[-1])})


def conversation_reply(body: dict) -> str:
    """For the fault server (`FaultConfig(reply=conversation_reply)`)."""
    from testkit.fault_server import default_reply
    from testkit.scripted_model import schema_name

    prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
    data = json.loads(default_reply(body))
    if "task" in data:
        return reply_for(prompt, "CondensedTask")
    if "answer" in data and "reasoning" in data:
        return reply_for(prompt, schema_name(body.get("response_format")) or "Answer")
    return json.dumps(data)


@contextmanager
def conversing(model: Any) -> Iterator[None]:
    """A running fault server (`model`) answers with `conversation_reply` inside the block, as
    before after it."""
    before = model.config
    model.config = before.model_copy(update={"reply": conversation_reply})
    try:
        yield
    finally:
        model.config = before
