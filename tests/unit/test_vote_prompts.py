"""A `work` task builds its votes' shared prompt once (logic/branch_plans.py VotePrompts), and each
vote is still sent exactly what it would have been sent on its own: a vote asked with other lessons,
another served template or the user's schema gets its own prompt, and a re-ask appended to one
vote's conversation never reaches its siblings."""

from __future__ import annotations

from langchain_core.messages import AIMessage, BaseMessage

from parallax.logic.branch_plans import VotePrompts, branch_messages

LESSONS = [{"id": "pb-1", "text": "Quote the figure with its unit."}]
SCHEMA = {"type": "object", "properties": {"revenue": {"type": "number"}}, "required": ["revenue"]}
TEMPLATE = {
    "version": 3,
    "system": "Answer with JSON. $json_rule $lessons",
    "user": "Task: $ask ($answer_spec)",
}


def read(messages: list[BaseMessage]) -> list[tuple[str, str]]:
    return [(m.type, str(m.content)) for m in messages]


def vote(**changes: object) -> dict:
    return {"kind": "vote", "text": "How many apples?", "question": "", "playbook": [], **changes}


def test_each_vote_is_sent_what_it_would_be_sent_alone():
    shared = VotePrompts()
    asks = [
        (vote(), None, None),
        (vote(), None, None),
        (vote(playbook=LESSONS), None, None),
        (vote(), TEMPLATE, None),
        (vote(), None, SCHEMA),
        (vote(question="Green ones only?"), None, None),
        (vote(text="How many pears?"), None, None),
        (
            {
                "kind": "slice",
                "text": "part",
                "question": "",
                "playbook": [],
                "index": 0,
                "total": 2,
                "brief": "b",
            },
            None,
            None,
        ),
    ]
    for ask, template, schema in asks:
        assert read(shared.messages(ask, template, schema)) == read(
            branch_messages(ask, template, schema)
        ), (ask, template)
    assert len(shared.built) == 6  # the two plain votes shared one prompt; the slice is never kept


def test_a_reask_appended_to_one_vote_does_not_reach_its_siblings():
    shared = VotePrompts()
    first = shared.messages(vote(), None)
    first.append(AIMessage("not JSON"))
    assert len(shared.messages(vote(), None)) == 2
