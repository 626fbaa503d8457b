"""A scripted model that answers the README's and docs' example commands as a capable model would.

Why: the examples in examples/ must run as written (tests/integration/test_examples.py), and a
reader judges an example by its output: the vote on "Is 221 a prime number?" should settle, the
schema run over annual_report.pdf should verify both figures on their pages, `parallax learn` on the
Formula tasks should commit a playbook version. Plugged into the fault server
(`FaultConfig(reply=ExamplesModel())`), it tells calls apart by the schema they ask for, never by a
prompt's wording. Never used by the product.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path

from testkit.extraction_model import PART, ExtractionModel, Fact, schema_of, user_text
from testkit.fault_server import schema_instance
from testkit.scripted_model import schema_name

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"
REPORT_FACTS = [
    Fact("revenue", 4796, "Total net revenue was 4,796 million"),
    Fact("net_income", 629, "Net income was 629 million"),
]
"""What annual_report.pdf says, with the words that say it."""
ANSWERS = {
    "Is 221 a prime number?": "No: 221 = 13 * 17",
    "What is 12 * 12?": "144",
    "What is 6 * 7?": "42",
    "Compute the total of 17 and 25": "42",
}
TYPED = {
    "ACME Tools invoice, total 1250.50, still due.": {
        "vendor": "ACME Tools",
        "total": 1250.5,
        "paid": False,
    },
    "Invoice 7: total due 41.50 EUR.": {"total": 41.5},
}
"""The README's typed tasks (the OpenAI client's `parse`, the MCP client's output_schema) and the
objects they hold."""
FORMULA = re.compile(r"Use formula (.+?) to answer.*?Formula: (.+?), Explanation:", re.S)
LESSONS = "Lessons from earlier runs"
BETTER_PROMPT = "use the formula or method the question names"
"""From examples/new.txt, the system prompt docs/data-loop.md's `prompts set` tries: it helps as a
lesson does."""


def formula_targets() -> dict[str, str]:
    """Each example Formula task's question (the words after `Question:`, which tell tasks apart) ->
    its target."""
    targets = {}
    for name in ("train.jsonl", "val.jsonl"):
        for line in (EXAMPLES / name).read_text().splitlines():
            row = json.loads(line)
            targets[row["context"].rsplit("Question:", 1)[-1].strip()[:200]] = str(row["target"])
    return targets


@dataclass
class ExamplesModel:
    """Formula tasks are answered right only once a lesson (or examples/new.txt's system prompt) is
    in the prompt (so learning and a prompt edit show a gain), the README's questions right always;
    reflections name the task's formula; slices report what the annual report and the meeting say,
    with quotes from their own part."""

    targets: dict[str, str] = field(default_factory=formula_targets)
    extraction: ExtractionModel = field(default_factory=lambda: ExtractionModel(facts=REPORT_FACTS))
    broken: set[str] = field(default_factory=set)
    """Task texts answered with text that is not JSON (an endpoint gone wrong): their branches
    escalate."""

    def __call__(self, body: dict) -> str:
        name = schema_name(body.get("response_format"))
        properties = schema_of(body).get("properties", {})
        prompt = "\n".join(str(m.get("content")) for m in body.get("messages", []))
        if any(text in prompt for text in self.broken):
            return "the endpoint is down for maintenance"
        if "relevant" in properties:
            if "data" in properties:  # a slice asked for the user's schema
                return self.extraction(body)
            match = PART.search(user_text(body))
            part = " ".join((match.group("part") if match else "").split())
            return json.dumps(
                {
                    "relevant": True,
                    "points": [{"quote": part[:60], "point": f"The part says: {part[:60]}"}],
                }
            )
        if name == "Reflection":
            return json.dumps(
                {
                    "diagnosis": "the answer did not apply the formula the question gives",
                    "lessons": [self.lesson(prompt)],
                    "item_tags": [],
                }
            )
        if name == "Curation":
            lesson = re.search(r"For [^\n]+? then round as the question asks\.", prompt)
            formula = FORMULA.search(prompt)
            about = formula.group(1) if formula else "the ratio"
            text = lesson.group(0) if lesson else self.lesson(prompt)
            return json.dumps({"entries": [{"section": about, "text": text, "about": [about]}]})
        if "reasoning" in properties and "answer" in properties:
            return json.dumps({"reasoning": "worked it out", "answer": self.answer(prompt)})
        if "reasoning" in properties and "data" in properties:  # a typed vote or direct run
            data = next(
                (d for text, d in TYPED.items() if text in prompt),
                {f.path: f.value for f in REPORT_FACTS},
            )
            return json.dumps({"reasoning": "read it off", "data": data})
        return json.dumps(schema_instance(schema_of(body), name=name))

    @staticmethod
    def lesson(prompt: str) -> str:
        """A lesson grounded in its task: the task's own formula, to use as written."""
        formula = FORMULA.search(prompt)
        if not formula:
            return (
                "For a ratio, divide the figures in the order the question names them, then round"
                " as the question asks."
            )
        return (
            f"For {formula.group(1)}, compute {formula.group(2)} from the figures given, then round"
            " as the question asks."
        )

    def answer(self, prompt: str) -> str:
        for text, target in self.targets.items():
            if text in prompt:
                return target if LESSONS in prompt or BETTER_PROMPT in prompt else "0"
        return next((a for q, a in ANSWERS.items() if q in prompt), "42")
