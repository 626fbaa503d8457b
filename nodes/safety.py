"""Safety check that runs beside the business branches, not after them.

Rules, not a model: they are fast, deterministic and cannot be talked out of a verdict by
the very prompt injection they look for. A flag never stops the other branches; it turns
the run's status into `needs_review` with the reasons. Personal data and secrets are
found with the rules that redact them (parallax/redaction.py). Injection is looked for
with a few phrases aimed at the model, not with the strict lesson screen
(parallax/screening.py): a task may rightly contain URLs, code, "User:" transcript lines
or "### Instructions" headings, and it is read once per run, in the event loop, so it
must stay cheap on a long document.
"""

from __future__ import annotations

import re
import time
import uuid

from parallax.redaction import find_secrets
from state.lifecycle import Lifecycle
from state.payloads import BranchRecord

HARMFUL = re.compile(
    r"\b(?:how (?:do i|to|can i) (?:make|build|assemble) (?:a |an )?(?:bomb|explosive|pipe bomb|bioweapon|nerve agent)"
    r"|synthesi[sz]e (?:sarin|vx|ricin|meth(?:amphetamine)?|fentanyl)"
    r"|write (?:a )?(?:ransomware|keylogger|malware)"
    r"|(?:kill|poison|murder) (?:my|a|the) (?:wife|husband|boss|neighbou?r|child|person))",
    re.IGNORECASE,
)
INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier) (?:instructions|prompts?|rules)"
    r"|disregard (?:all |any )?(?:the )?(?:previous|prior|above|your) (?:instructions|rules)"
    r"|(?:reveal|print|show) (?:me )?(?:your|the) (?:system )?prompt"
    r"|you are now (?:dan|in developer mode)|</?(?:system|assistant)>|<\|im_start\|>|\[/?inst\]|\bjailbreak\b",
    re.IGNORECASE,
)
SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")


def screen(text: str) -> list[str]:
    """Reasons to hold a run for review; empty when nothing was found."""
    reasons = []
    if HARMFUL.search(text):
        reasons.append("harmful request")
    if INJECTION.search(text):
        reasons.append("prompt injection in the input")
    personal = sorted(set(find_secrets(text)) | ({"ssn"} if SSN.search(text) else set()))
    if personal:
        reasons.append("personal data or secrets in the input (" + ", ".join(personal) + ")")
    return reasons


async def check_safety(payload: dict) -> dict:
    """The `safety` branch: screens the full input and records its verdict like any branch."""
    started = time.perf_counter()
    life = Lifecycle()
    for state in ("PENDING", "DISPATCHED", "IN_PROGRESS"):
        life.move(state)
    reasons = screen(payload["text"])
    life.move("COMPLETED")
    record = BranchRecord(
        id=f"safety-{uuid.uuid4().hex[:8]}",
        parent_id=payload["trace_id"],
        kind="safety",
        status="ok",
        latency_ms=(time.perf_counter() - started) * 1000,
        output={"flagged": bool(reasons), "reasons": reasons},
        state=life.state,
        transitions=life.transitions,
    )
    return {"branches": [record.model_dump()]}
