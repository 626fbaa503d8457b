"""Prompt templates as data: the defaults (version 0) of the versioned prompt entries.

`string.Template`, not `str.format`: the prompts quote JSON, and an edited template fails at
`prompts set` (`problems`), not in the middle of a run (docs/data-loop.md, prompts).
"""

from __future__ import annotations

import functools
from dataclasses import dataclass
from string import Template

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from parallax.state.records import PromptText
from parallax.state.vocabulary import BUSINESS_KINDS

JSON_RULE = "Reply with one JSON object only, no other text."


@dataclass(frozen=True)
class PromptTemplate:
    name: str
    system: str
    user: str
    placeholders: tuple[str, ...]
    """Every placeholder a version may use (the values the branch provides)."""
    required: tuple[str, ...]
    """Placeholders a version must keep."""
    about: str = ""

    def text(self) -> PromptText:
        return {"system": self.system, "user": self.user}


DEFAULTS: dict[str, PromptTemplate] = {
    t.name: t
    for t in (
        PromptTemplate(
            "answer",
            'You solve tasks carefully. Reply with a JSON object with two keys: "reasoning" (one or'
            ' two sentences of working) and "answer" ($answer_spec). $json_rule$lessons',
            "$ask",
            ("answer_spec", "json_rule", "lessons", "ask"),
            ("lessons", "ask"),
            "direct and vote branches",
        ),
        PromptTemplate(
            "slice",
            "You read part of a longer document, one part at a time. Report only what this part"
            " says that helps answer the question; set `relevant` to false if nothing does. Reply"
            ' with a JSON object with two keys: "relevant" (true or false) and "points" (a list of'
            ' findings from this part; each is an object with "quote", a few words copied exactly'
            ' from the part, and "point", the finding in one short sentence). A point whose quote'
            " is not in the part is discarded. $json_rule$lessons",
            "Brief: $brief\nQuestion: $question\n\nPart $number of $total:\n$part",
            ("number", "total", "json_rule", "lessons", "brief", "question", "part"),
            ("lessons", "part"),
            "section branches, one per slice",
        ),
        PromptTemplate(
            "typed",
            'You solve tasks carefully. Reply with a JSON object with two keys: "reasoning" (one or'
            ' two sentences of working) and "data" (the result: an object that follows this JSON'
            " Schema). $json_rule$lessons\n\nJSON Schema of data: $schema",
            "$ask",
            ("json_rule", "lessons", "ask", "schema"),
            ("lessons", "ask", "schema"),
            "direct and vote branches asked for the user's object (an output schema)",
        ),
        PromptTemplate(
            "typed_slice",
            "You read part of a longer document, one part at a time, and fill in only what this"
            ' part says. Reply with a JSON object with two keys: "relevant" (true or false) and'
            ' "data": an object with the fields of the schema below that this part gives, leaving'
            ' out the others; each value is written as {"quote": a few words copied exactly from'
            ' the part that support it, "value": the value}. A value whose quote is not in the part'
            " is discarded. $json_rule$lessons\n\nJSON Schema of the values: $schema",
            "Brief: $brief\nQuestion: $question\n\nPart $number of $total:\n$part",
            ("number", "total", "json_rule", "lessons", "brief", "question", "part", "schema"),
            ("lessons", "part", "schema"),
            "section branches asked for the user's object, one per slice",
        ),
        PromptTemplate(
            "judge",
            'Independent solvers disagreed. Reply with a JSON object with two keys: "choice" (the'
            ' one candidate answer that is correct, copied exactly from the list) and "reason" (one'
            " sentence). $json_rule",
            "$ask\n\nCandidate answers:\n$candidates",
            ("json_rule", "ask", "candidates"),
            ("ask", "candidates"),
            "the arbitration call when votes disagree",
        ),
        PromptTemplate(
            "candidate",
            "You solve tasks carefully, in the approach given after the task. Reply with a JSON"
            ' object with keys "reasoning" (one or two sentences on how you approach it), "answer"'
            ' (the complete answer to the task$check_note) and "files" (a list of further files as'
            ' {"path", "content"}; usually empty). $json_rule$lessons',
            "$ask\n\nApproach: $approach",
            ("approach", "check_note", "json_rule", "lessons", "ask"),
            ("approach", "lessons", "ask"),
            "speculative candidates, each with its own approach",
        ),
        PromptTemplate(
            "compare",
            "You compare two answers to the same task against this rubric: $rubric Reply with a"
            ' JSON object with two keys: "reason" (one sentence) and "better" ("A" or "B": the'
            " answer that meets the rubric better). $json_rule",
            "$ask\n\nAnswer A:\n$first\n\nAnswer B:\n$second",
            ("rubric", "json_rule", "ask", "first", "second"),
            ("ask", "first", "second"),
            "the pairwise judge of speculative candidates (asked twice per pair, positions"
            " swapped)",
        ),
        PromptTemplate(
            "red_team",
            'You are a critic. Reply with a JSON object with two keys: "objection" (the strongest'
            ' reason the proposed answer could be wrong) and "severity" (low, medium or high).'
            " $json_rule",
            "$ask\n\nProposed answer: $answer",
            ("json_rule", "ask", "answer"),
            ("ask", "answer"),
            "the red-team branch",
        ),
        PromptTemplate(
            "reflect",
            "You review one solved task to learn from it. Reply with a JSON object with keys"
            ' "diagnosis" (what went right or wrong, one sentence), "lessons" (a list of at most'
            " two concrete, reusable lessons, each one sentence naming the formula, field or step"
            ' it is about) and "item_tags" (a list of objects {"id", "tag"} with tag helpful,'
            " harmful or neutral for each lesson the solver was shown). $json_rule",
            "Task:\n$task\n\nAnswer given: $answer\nResult: $result ($feedback)\n\nLessons the"
            " solver was shown:\n$used",
            ("json_rule", "task", "answer", "result", "feedback", "used"),
            ("task", "answer", "result"),
            "the reflector of the learn graph, one run at a time",
        ),
        PromptTemplate(
            "curate",
            'You turn lessons into playbook entries. Reply with a JSON object with key "entries": a'
            ' list with one object per lesson worth keeping, each with "section" (a short topic'
            ' such as a formula name), "text" (the lesson as one general, reusable instruction) and'
            ' "about" (a list of the named things it is about: formulas, fields, tools). Leave out'
            " lessons that are vague or only restate the task. $json_rule",
            "Diagnosis: $diagnosis\nLessons:\n$lessons",
            ("json_rule", "diagnosis", "lessons"),
            ("lessons",),
            "the curator of the learn graph, one reflection at a time",
        ),
    )
}
SOLVE_PROMPTS = (
    *dict.fromkeys(kind.prompt for kind in BUSINESS_KINDS.values()),
    "judge",
    "red_team",
)
TYPED_PROMPTS = tuple(dict.fromkeys(kind.typed_prompt for kind in BUSINESS_KINDS.values()))
"""Served only to runs with an output schema."""
SPECULATE_PROMPTS = ("candidate", "compare")
"""Served only to speculative runs."""
LEARN_PROMPTS = ("reflect", "curate")


def problems(name: str, system: str, user: str) -> list[str]:
    """What keeps (system, user) from being a version of prompt `name`; [] when it can be one."""
    default = DEFAULTS[name]
    found: set[str] = set()
    issues = []
    for part, text in (("system", system), ("user", user)):
        template = Template(text)
        if not template.is_valid():
            issues.append(
                f"the {part} text has a '$' that is no placeholder (write $$ for a dollar sign)"
            )
        found |= set(template.get_identifiers())
    unknown = sorted(found - set(default.placeholders))
    if unknown:
        issues.append(
            f"unknown placeholder(s) {', '.join('$' + u for u in unknown)} "
            f"(this prompt has {', '.join('$' + p for p in default.placeholders)})"
        )
    missing = [p for p in default.required if p not in found]
    if missing:
        issues.append(f"required placeholder(s) left out: {', '.join('$' + m for m in missing)}")
    return issues


def render(name: str, version: PromptText | None, **values: object) -> list[BaseMessage]:
    """The messages of prompt `name`: `version` is a stored version ({"system", "user"}) or None for
    the default."""
    text = version or DEFAULTS[name].text()
    filled = {"json_rule": JSON_RULE, **{k: str(v) for k, v in values.items()}}
    return [
        SystemMessage(_template(text["system"]).safe_substitute(filled)),
        HumanMessage(_template(text["user"]).safe_substitute(filled)),
    ]


@functools.lru_cache(maxsize=256)
def _template(text: str) -> Template:
    return Template(text)
