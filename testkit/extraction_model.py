"""Replies of a scripted model that answers any `response_format` schema Parallax sends (tests,
benchmarks).

Plugged into the fault server (`FaultConfig(reply=...)`), it makes a real OpenAI-compatible
endpoint that behaves like a careful extraction model: a slice request (its schema has
`relevant`) gets, for each field, the values whose evidence occurs in that part of the
document, each with the evidence as its quote; a direct or vote request (its schema has
`reasoning`) gets the object a script gives for that call. Never used by the product path.
"""

from __future__ import annotations

import itertools
import json
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from testkit.fault_server import FaultServer

PART = re.compile(r"\nPart \d+(?: of \d+)?:\n(?P<part>.*)\Z", re.S)


def schema_of(body: dict) -> dict:
    fmt = body.get("response_format") or {}
    return fmt.get("schema") or (fmt.get("json_schema") or {}).get("schema") or {}


def user_text(body: dict) -> str:
    return next(
        (m["content"] for m in reversed(body.get("messages", [])) if m.get("role") == "user"), ""
    )


@dataclass
class Fact:
    """One value of the object and the words of the document that give it."""

    path: str
    value: Any
    quote: str
    is_list: bool = False


@dataclass
class ExtractionModel:
    """`facts`: what a slice can find; `answers(i)`: the object of the i-th direct/vote call;
    `wrong(part)`: extra (path, value, quote) a slice reports wrongly (a made-up or misplaced quote)
    for fields it found nothing for (a model filling a gap), never in place of what it found."""

    facts: list[Fact] = field(default_factory=list)
    answers: Callable[[int], dict] = lambda i: {}
    wrong: Callable[[str], list[Fact]] = lambda part: []
    invented: int = 0
    """Wrong facts actually reported (a `wrong` fact for a field the part gave is not reported)."""
    _counter: Any = field(default_factory=itertools.count)
    _lock: Any = field(default_factory=threading.Lock)

    def __call__(self, body: dict) -> str:
        properties = schema_of(body).get("properties", {})
        if "relevant" in properties:
            match = PART.search(user_text(body))
            return json.dumps(self.slice_reply(match.group("part") if match else ""))
        with self._lock:
            index = next(self._counter)
        return json.dumps({"reasoning": "read it off", "data": self.answers(index)})

    def slice_reply(self, part: str) -> dict:
        flat = " ".join(part.split())
        data: dict[str, Any] = {}
        seen = [f for f in self.facts if " ".join(f.quote.split()) in flat]
        given = {f.path for f in seen}
        invented = [f for f in self.wrong(part) if f.is_list or f.path not in given]
        with self._lock:
            self.invented += len(invented)
        for fact in seen + invented:
            reported = {"quote": fact.quote, "value": fact.value}
            target = data
            *parents, last = fact.path.split(".")
            for name in parents:
                target = target.setdefault(name, {})
            if fact.is_list:
                target.setdefault(last, []).append(reported)
            else:
                target[last] = reported
        return {"relevant": bool(data), "data": data}


@contextmanager
def scripted_votes(
    model: FaultServer, answers: Callable[[int], dict[str, Any]]
) -> Iterator[Callable[[], int]]:
    """A running fault server (a test module's, shared by its tests) answers the i-th typed vote
    with `answers(i)`, its log emptied first; yields a function that counts the chat requests it has
    had since. Its reply before is back afterwards."""
    before = model.config.reply
    model.config = model.config.model_copy(update={"reply": ExtractionModel(answers=answers)})
    model.reset()
    try:
        yield lambda: sum(e["path"].endswith("/chat/completions") for e in model.log())
    finally:
        model.config = model.config.model_copy(update={"reply": before})
