"""Untrusted text screened: `screen` (strict, for lessons) and `screen_input` (lenient, for a task).

See docs/internals/untrusted-input.md#screening.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass, field
from typing import NamedTuple

from parallax.runtime.redaction import find_secrets

IGNORE_INSTRUCTIONS = "tells the model to ignore its instructions"
NEW_INSTRUCTIONS = "gives the model new instructions"
CLAIMS_ROLE = "claims a system/developer role"
REVEAL = "asks to reveal the system prompt or secrets"
TEMPLATE_MARKER = "contains a chat-template/role marker"
RUN_CODE = "asks to call a URL or run code/shell"
HAS_URL = "contains a URL"
HIDDEN = "hidden/invisible characters"
PERSONA = "addresses the model/assistant directly with a new persona"
EXFILTRATE = "asks to exfiltrate data"
OVERRIDES_TASK = "overrides the task (answers regardless of the question)"


@dataclass(frozen=True)
class Verdict:
    """Whether a text may be stored (`ok`) and, if not, short human reasons."""

    ok: bool
    reasons: list[str] = field(default_factory=list)


class _Check(NamedTuple):
    reason: str
    pattern: re.Pattern[str]


def _rx(*parts: str) -> re.Pattern[str]:
    return re.compile("".join(parts), re.IGNORECASE | re.MULTILINE)


# Vocabulary shared by several rules. Texts are case-folded before matching.
_W = r"[\w'-]+"  # one word
_NOT_NEGATED = (  # "don't forget the rules above" is advice
    r"(?<!don't )(?<!dont )(?<!do not )(?<!never )"
)
_VERB = r"(?:ignore|disregard|forget|override|overrule|bypass|discard|abandon|neglect)"
_QUALIFIER = (
    r"(?:all|any|every|previous|prior|above|earlier|preceding|foregoing|former|original|initial"
    r"|existing|current|old|your|these|those|system|developer|safety|given)"
)
_TARGET = (
    r"(?:instructions?|rules?|prompts?|context|directions?|guidelines?|directives?|constraints?"
    r"|guardrails?|polic(?:y|ies)|programming|training|messages?|orders?|commands?"
    r"|restrictions?|filters?|guidance)"
)
_ASSISTANT = r"(?:assistant|ai|chatgpt|gpt|claude|llm|model|bot|language model)"
_REVEAL_VERB = (
    r"(?:reveal|show|print|output|display|repeat|leak|dump|disclose|expose|share|recite|echo"
    r"|tell me|give me|send me|write out|write down|list|return|what is|what are|what's)"
)
_SECRET_THING = (
    r"(?:system prompt|(?:initial|original|hidden|secret|full|developer|system)"
    r" (?:prompt|instructions)"
    r"|your (?:(?:initial|original|hidden|secret|full|system)"
    r" )?(?:prompt|instructions|rules|guidelines)"
    r"|api[ _-]?keys?|(?:access|auth|secret|bearer|api) tokens?|secret keys?|private keys?"
    r"|passwords?|credentials?|environment variables?|env vars?|\.env|secrets)(?![\w-])"
)  # nosec B105 # a pattern that finds secrets, not one
_URL = r"(?:(?:https?|ftp)://|www\.)"
_DOMAIN = (
    r"[\w-]+(?:\.[\w-]+)*\.(?:com|net|org|io|ru|cn|xyz|example|info|biz|co|me|app|dev|site|top)\b"
)
_SHELL = (
    r"(?:shell|bash|zsh|sh|terminal|console|command|cmd|powershell|script|subprocess|os\.system)"
)
_TASK = r"(?:question|task|input|prompt|query|problem|user)s?"

_CHECKS: tuple[_Check, ...] = (
    _Check(
        IGNORE_INSTRUCTIONS,
        _rx(  # "ignore all previous instructions", "forget your rules"
            _NOT_NEGATED,
            rf"\b{_VERB}\s+(?:{_W}\s+){{0,3}}?{_QUALIFIER}\s+(?:{_W}\s+){{0,3}}?{_TARGET}\b",
        ),
    ),
    _Check(
        IGNORE_INSTRUCTIONS,
        _rx(  # "disregard the above", "forget everything you were told"
            _NOT_NEGATED,
            rf"\b{_VERB}\s+(?:(?:all|everything|anything|what(?:ever)?|of|the|is|was|that|written|said)\s+){{0,4}}",
            r"(?:above\b(?!-)|foregoing\b|before this\b|you (?:were|have been|'ve been) told\b|you"
            r" know\b)",
        ),
    ),
    _Check(
        IGNORE_INSTRUCTIONS,
        _rx(
            r"\b(?:do not|don't|stop|no longer|never)\s+(?:follow|obey|comply with|adhere to|listen"
            r" to)\s+",
            rf"(?:{_W}\s+){{0,2}}?{_QUALIFIER}\s+(?:{_W}\s+){{0,2}}?{_TARGET}\b",
        ),
    ),
    _Check(
        IGNORE_INSTRUCTIONS,
        _rx(
            rf"\b(?:your|previous|prior|all|the above)\s+(?:{_W}\s+)?{_TARGET}\s+(?:are|is|have"
            r" been|has been)\s+",
            r"(?:now\s+)?(?:void|null|cancell?ed|revoked|lifted|replaced|overridden|suspended|no"
            r" longer)\b",
        ),
    ),
    _Check(
        NEW_INSTRUCTIONS,
        _rx(
            r"\b(?:new|updated|revised|real|actual|true|additional|secret)\s+(?:system\s+)?",
            r"(?:instructions?|rules|directives?|orders|task|prompt|role|persona)\s*:",
        ),
    ),
    _Check(
        NEW_INSTRUCTIONS,
        _rx(
            r"\b(?:here are|these are|follow)\s+(?:your|my)\s+new\s+(?:instructions|rules|orders)\b"
        ),
    ),
    _Check(
        CLAIMS_ROLE,
        _rx(  # "system: ..." at the start of a line or sentence
            r"(?:^|[.!?]\s)\s*[\[(<{]?(?:system|developer|admin(?:istrator)?)[\])>}]?\s*",
            r"(?:prompt|message|note|override|instructions?|update)?\s*:",
        ),
    ),
    _Check(CLAIMS_ROLE, _rx(r"[\[(<{]\s*(?:system|developer|admin)\s*[\])>}]")),
    _Check(CLAIMS_ROLE, _rx(r"[\"']?role[\"']?\s*[:=]\s*[\"']?(?:system|developer)\b")),
    _Check(CLAIMS_ROLE, _rx(r"\b(?:system|developer|admin(?:istrator)?)\s+override\b")),
    _Check(
        CLAIMS_ROLE,
        _rx(
            r"\b(?:i am|i'm|this is|message from|speaking as)\s+(?:your|the)\s+",
            r"(?:developer|creator|administrator|admin|system|operator|owner|programmer)s?\b",
        ),
    ),
    _Check(
        TEMPLATE_MARKER, _rx(r"<\|[^|<>\s]{1,40}\|>")
    ),  # <|im_start|>, <|eot_id|>, <|endoftext|>
    _Check(TEMPLATE_MARKER, _rx(r"\[/?(?:inst|sys|system)\]|<</?sys>>")),  # Llama 2
    _Check(
        TEMPLATE_MARKER,
        _rx(
            r"</?(?:system|assistant|user|s|im_start|im_end|start_of_turn|end_of_turn|instructions?)>"
        ),
    ),
    _Check(
        TEMPLATE_MARKER,
        _rx(
            r"(?:^|\s)#{1,6}\s*(?:system|developer|assistant|user|human|instructions?|response)\b(?!\s+of\b)"
        ),
    ),
    _Check(TEMPLATE_MARKER, _rx(r"^\s*(?:human|assistant|user|ai)\s*:")),
    _Check(REVEAL, _rx(rf"\b{_REVEAL_VERB}\b(?:\s+{_W}){{0,4}}?\s+{_SECRET_THING}")),
    _Check(
        REVEAL,
        _rx(
            r"\b(?:repeat|print|output|reveal)\s+(?:everything|all|the text|the words|the"
            r" content|the message)\s+",
            r"(?:above|before)\b",
        ),
    ),
    _Check(
        RUN_CODE,
        _rx(
            r"\b(?:visit|open|fetch|call|browse|go to|navigate"
            r" to|download|request|load|access|curl|wget",
            rf"|ping|query|click|get)\b[^\n]{{0,60}}?{_URL}",
        ),
    ),
    _Check(
        RUN_CODE,
        _rx(rf"\b(?:run|execute|exec|invoke|spawn|launch)\b[^\n]{{0,40}}?(?:`|\b{_SHELL}\b)"),
    ),
    _Check(
        RUN_CODE,
        _rx(
            r"\brm\s+-[a-z]*[rf]|\bsudo\s+\S|\bchmod\s+[+0-7]|/bin/(?:ba|z)?sh\b|\|\s*(?:sudo\s+)?(?:ba|z|k|da)?sh\b",
            rf"|\b(?:curl|wget)\s+(?:-\S+\s+)*[\"']?{_URL}|\bos\.system\b|\bsubprocess\.|__import__",
            r"|\b(?:eval|exec)\s*\(|<script\b|javascript:|\bpowershell\b",
        ),
    ),
    _Check(HAS_URL, _rx(_URL, r"\S")),
    _Check(
        EXFILTRATE,
        _rx(
            r"\b(?:send|post|upload|forward|transmit|exfiltrate|leak|e-?mail|mail|submit|copy|beacon)\b",
            rf"[^\n]{{0,80}}?\b(?:to|at|into|via)\s+(?:{_URL}|[\w.+-]+@[\w-]+\.\w+|{_DOMAIN})",
        ),
    ),
    _Check(EXFILTRATE, _rx(r"\bexfiltrat\w*|!\[[^\]\n]*\]\(\s*(?:https?:)?//")),
    _Check(
        EXFILTRATE,
        _rx(
            r"\b(?:include|embed|append|encode|put)\b[^\n]{0,40}?\b(?:system prompt|api"
            r" keys?|passwords?|secrets",
            r"|credentials|conversation|chat history|user data)\b[^\n]{0,40}?\b(?:in|into)\s+(?:the"
            r" |a |your )?",
            r"(?:url|link|image|request|query string|markdown)",
        ),
    ),
    _Check(
        PERSONA,
        _rx(
            r"\byou\s+are\s+(?:now|henceforth)\b(?!\s+(?:left|ready|done|finished|able|at|on|working|solving|looking",
            r"|dealing|given|asked|in (?:a|the))\b)",
        ),
    ),
    _Check(
        PERSONA,
        _rx(
            rf"\byou\s+are\s+no\s+longer\s+(?:an?\s+|the\s+)?(?:{_ASSISTANT}|bound|restricted|limited)\b"
        ),
    ),
    _Check(PERSONA, _rx(r"\bfrom\s+now\s+on,?\s+you\s+(?:are|will|must|shall|should|can|have)\b")),
    _Check(PERSONA, _rx(r"\bpretend\s+(?:to be|you are|that you are|you're)\b")),
    _Check(
        PERSONA,
        _rx(
            r"\b(?:act|behave|respond|roleplay|role-play)\s+as\s+(?:if you"
            r" (?:are|were)\s+)?(?:an?\s+)?",
            r"(?:unrestricted|unfiltered|uncensored|jailbroken|evil|different|new|dan|another|my)\b",
        ),
    ),
    _Check(
        PERSONA,
        _rx(
            r"\b(?:developer|god|jailbreak|jailbroken|dan|unrestricted|admin)\s+mode\b|\bjailbr(?:eak|oken)"
            r"|\bdo anything now\b"
        ),
    ),
    _Check(
        PERSONA,
        _rx(
            r"\byour\s+new\s+(?:name|role|persona|identity|personality|instructions|task|goal|purpose)\b"
        ),
    ),
    _Check(PERSONA, _rx(rf"\b(?:dear|hey|hi|hello|attention|listen)\s*,?\s+(?:{_ASSISTANT})\b")),
    _Check(
        PERSONA,
        _rx(
            r"\b(?:assistant|chatgpt|claude|llm)\s*,\s*(?:you|please|from"
            r" now|ignore|forget|now|listen)\b"
        ),
    ),
    _Check(
        OVERRIDES_TASK,
        _rx(
            rf"\bregardless\s+of\s+(?:what\s+)?(?:the\s+|any\s+|which\s+)?{_TASK}\b",
            r"(?!\s+(?:type|format|length|style|wording|topic|kind|size)s?\b)",
        ),
    ),
    _Check(OVERRIDES_TASK, _rx(rf"\bno\s+matter\s+(?:what|which)\s+(?:the\s+)?{_TASK}\b")),
    _Check(
        OVERRIDES_TASK,
        _rx(r"\bno\s+matter\s+what\s+(?:is asked|you are asked|they ask|anyone asks)\b"),
    ),
    _Check(OVERRIDES_TASK, _rx(rf"\bwhatever\s+the\s+{_TASK}\s+(?:is|says|asks)\b")),
)

# Characters that render as nothing (or as blank space) and can hide words from a reviewer.
_EXTRA_HIDDEN = frozenset("\u034f\u115f\u1160\u17b4\u17b5\u2800\u3164\uffa0")
_QUOTES = str.maketrans(
    {
        "\u2018": "'",
        "\u2019": "'",
        "\u201b": "'",
        "\u2032": "'",
        "\u201c": '"',
        "\u201d": '"',
        "\u201f": '"',
        "\u2033": '"',
    }
)


def _is_hidden(ch: str) -> bool:
    cat = unicodedata.category(ch)
    if cat in ("Cf", "Co") or (cat == "Cc" and ch not in "\t\n\r"):
        return True
    code = ord(ch)
    return (
        ch in _EXTRA_HIDDEN
        or 0xFE00 <= code <= 0xFE0F
        or 0xE0100 <= code <= 0xE01EF
        or 0x180B <= code <= 0x180F
    )


def _fold(text: str) -> str:
    """NFKC, case-folded, straight quotes, each line's whitespace collapsed, blank lines dropped."""
    text = unicodedata.normalize("NFKC", text).casefold().translate(_QUOTES)
    lines = (" ".join(line.split()) for line in text.splitlines())
    return "\n".join(line for line in lines if line)


def _hidden_in(text: str) -> set[str]:
    """The distinct hidden characters of `text` (each distinct character is looked at once)."""
    return {c for c in set(text) if _is_hidden(c)}


def _readings(text: str, hidden: set[str]) -> set[str]:
    """The normalised versions of `text` that every rule is tried on."""
    if hidden:
        hidden_removed = text.translate({ord(c): None for c in hidden})
        hidden_as_space = text.translate({ord(c): " " for c in hidden})
    else:
        hidden_removed = hidden_as_space = text
    folded = {_fold(hidden_removed), _fold(hidden_as_space)}
    # '**ignore** all "previous" instructions': emphasis and quotes must not split a phrase.
    return folded | {re.sub(r"[*~_`\"']+", "", f) for f in folded}


def _as_text(value: object) -> str:
    try:
        return "" if value is None else str(value)
    except Exception:  # noqa: BLE001 - a broken __str__ must not break screening
        return ""


def screen(text: str) -> Verdict:
    """Judge whether `text` may become a playbook item. Never raises."""
    if not isinstance(text, str):
        text = _as_text(text)
    hidden = _hidden_in(text)
    reasons = [HIDDEN] if hidden else []
    readings = _readings(text, hidden)
    for check in _CHECKS:
        if check.reason not in reasons and any(check.pattern.search(r) for r in readings):
            reasons.append(check.reason)
    return Verdict(ok=not reasons, reasons=reasons)


# --- the lenient screen of a run's input ----------------------------------------------

HARMFUL = re.compile(
    r"\b(?:how (?:do i|to|can i) (?:make|build|assemble) (?:a |an )?(?:bomb|explosive|pipe"
    r" bomb|bioweapon|nerve agent)"
    r"|synthesi[sz]e (?:sarin|vx|ricin|meth(?:amphetamine)?|fentanyl)"
    r"|write (?:a )?(?:ransomware|keylogger|malware)"
    r"|(?:kill|poison|murder) (?:my|a|the) (?:wife|husband|boss|neighbou?r|child|person))",
    re.IGNORECASE,
)
INPUT_INJECTION = re.compile(
    r"ignore (?:all |any )?(?:the )?(?:previous|prior|above|earlier)"
    r" (?:instructions|prompts?|rules)"
    r"|disregard (?:all |any )?(?:the )?(?:previous|prior|above|your) (?:instructions|rules)"
    r"|(?:reveal|print|show) (?:me )?(?:your|the) (?:system )?prompt"
    r"|you are now (?:dan|in developer"
    r" mode)|</?(?:system|assistant)>|<\|im_start\|>|\[/?inst\]|\bjailbreak\b",
    re.IGNORECASE,
)
SSN = re.compile(r"\b\d{3}-\d{2}-\d{4}\b")


def screen_input(text: str) -> list[str]:
    """Reasons to hold a run for review; empty when nothing was found."""
    reasons = []
    if HARMFUL.search(text):
        reasons.append("harmful request")
    if INPUT_INJECTION.search(text):
        reasons.append("prompt injection in the input")
    personal = sorted(set(find_secrets(text)) | ({"ssn"} if SSN.search(text) else set()))
    if personal:
        reasons.append("personal data or secrets in the input (" + ", ".join(personal) + ")")
    return reasons
