"""Prompts of the learn graph: one reflection per run, one curation per reflection.

Neither ever sees more than one run: that is how Parallax avoids the aggregator that
squeezes a hundred reflections into a few generic lines.
"""

from __future__ import annotations

from langchain_core.messages import BaseMessage, HumanMessage, SystemMessage

from parallax.prompts.solve import JSON_RULE


def reflect_messages(task: str, answer: str, feedback: str, correct: bool, items: list[dict]) -> list[BaseMessage]:
    used = "\n".join(f"- [{i['id']}] {i['text']}" for i in items) or "(none)"
    return [
        SystemMessage(
            "You review one solved task to learn from it. Reply with a JSON object with keys "
            "\"diagnosis\" (what went right or wrong, one sentence), \"lessons\" (a list of at most "
            "two concrete, reusable lessons, each one sentence naming the formula, field or step it "
            "is about) and \"item_tags\" (a list of objects {\"id\", \"tag\"} with tag helpful, "
            f"harmful or neutral for each lesson the solver was shown). {JSON_RULE}"
        ),
        HumanMessage(
            f"Task:\n{task}\n\nAnswer given: {answer}\nResult: {'correct' if correct else 'wrong'} ({feedback})\n\n"
            f"Lessons the solver was shown:\n{used}"
        ),
    ]


def curate_messages(diagnosis: str, lessons: list[str]) -> list[BaseMessage]:
    listed = "\n".join(f"- {lesson}" for lesson in lessons)
    return [
        SystemMessage(
            "You turn lessons into playbook entries. Reply with a JSON object with key \"entries\": a "
            "list with one object per lesson worth keeping, each with \"section\" (a short topic such "
            "as a formula name), \"text\" (the lesson as one general, reusable instruction) and "
            "\"about\" (a list of the named things it is about: formulas, fields, tools). Leave out "
            f"lessons that are vague or only restate the task. {JSON_RULE}"
        ),
        HumanMessage(f"Diagnosis: {diagnosis}\nLessons:\n{listed}"),
    ]
