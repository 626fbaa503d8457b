"""A scripted model for the chat tests: sure answers, and a split vote when the task says "unsure".

For the fault server (`FaultConfig(reply=review_reply)`): every structured reply is the schema
instance the server would give, with the answer chosen here. A task containing "unsure" gets
votes split 2:2:1 by temperature (vote branches ask at 0.3 … 1.0), so no answer has a majority,
and the judge picks none of the candidates: the run ends `needs_review`, deterministically.
Any other task is answered "4"; a chat follow-up is condensed to itself.
"""

from __future__ import annotations

import json

from testkit.fault_server import default_reply

SURE = "4"


def prompt_text(body: dict) -> str:
    return "\n".join(str(m.get("content")) for m in body.get("messages", []))


def split_answer(temperature: float) -> str:
    return "42" if temperature < 0.6 else "41" if temperature < 0.9 else "40"


def review_reply(body: dict) -> str:
    text, reply = prompt_text(body), default_reply(body)
    try:
        data = json.loads(reply)
    except ValueError:
        return SURE
    if set(data) == {"task"}:  # a chat follow-up's condense call: these tasks stand alone already
        data["task"] = text.split("Last message: ")[-1].strip()
    elif "Candidate answers" in text and "choice" in data:
        data["choice"] = "none of these"
    elif "answer" in data:
        data["answer"] = (
            split_answer(float(body.get("temperature") or 0)) if "unsure" in text else SURE
        )
    return json.dumps(data)
