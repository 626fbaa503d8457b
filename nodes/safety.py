"""Safety check that runs beside the business branches, not after them.

Rules, not a model: they are fast, deterministic and cannot be talked out of a verdict by
the very prompt injection they look for. A flag never stops the other branches; it turns
the run's status into `needs_review` with the reasons.
"""

from __future__ import annotations

import re
import time
import uuid

from state.payloads import BranchRecord

INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) (?:instructions|prompts?|rules)"
    r"|disregard (?:all |any )?(?:the )?(?:previous|prior|above|your) (?:instructions|rules)"
    r"|(?:reveal|print|show) (?:me )?(?:your|the) (?:system )?prompt"
    r"|you are now (?:dan|in developer mode)|</?(?:system|assistant)>|\bjailbreak\b",
    re.IGNORECASE,
)
HARMFUL = re.compile(
    r"\b(?:how (?:do i|to|can i) (?:make|build|assemble) (?:a |an )?(?:bomb|explosive|pipe bomb|bioweapon|nerve agent)"
    r"|synthesi[sz]e (?:sarin|vx|ricin|meth(?:amphetamine)?|fentanyl)"
    r"|write (?:a )?(?:ransomware|keylogger|malware)"
    r"|(?:kill|poison|murder) (?:my|a|the) (?:wife|husband|boss|neighbou?r|child|person))",
    re.IGNORECASE,
)
EMAIL = re.compile(r"\b[\w.+-]+@[\w-]+\.[\w.-]+\b")
SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")
CARD = re.compile(r"\b(?:\d[ -]?){13,19}\b")


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch) * (2 if i % 2 else 1)
        total += d - 9 if d > 9 else d
    return total % 10 == 0


def screen(text: str) -> list[str]:
    """Reasons to hold a run for review; empty when nothing was found."""
    reasons = []
    if HARMFUL.search(text):
        reasons.append("harmful request")
    if INJECTION.search(text):
        reasons.append("prompt injection in the input")
    cards = [re.sub(r"\D", "", m.group()) for m in CARD.finditer(text)]
    if EMAIL.search(text) or SSN.search(text) or any(13 <= len(c) <= 19 and _luhn(c) for c in cards):
        reasons.append("personal data in the input")
    return reasons


async def check_safety(payload: dict) -> dict:
    """The `safety` branch: screens the full input and records its verdict like any branch."""
    started = time.perf_counter()
    reasons = screen(payload["text"])
    record = BranchRecord(
        id=f"safety-{uuid.uuid4().hex[:8]}",
        parent_id=payload["trace_id"],
        kind="safety",
        status="ok",
        latency_ms=(time.perf_counter() - started) * 1000,
        output={"flagged": bool(reasons), "reasons": reasons},
    )
    return {"branches": [record.model_dump()]}
