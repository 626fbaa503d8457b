"""logic/run_input.py: the one definition of a valid run input every face checks before a run exists (offline)."""

from __future__ import annotations

import pytest

from parallax.logic.run_input import RunContext, RunInputError, check_run_input, checked_context

TASK = {"task": "What is 6 * 7?"}


@pytest.mark.parametrize(("graph", "run_input", "context", "field", "says"), [
    ("solve", {**TASK, "votes": -1}, None, "votes", "votes must be a whole number of at least 1"),
    ("solve", {**TASK, "vote": 3}, None, "vote", "unknown input field vote for solve"),
    ("solve", {**TASK, "vote": 3, "modus": "x"}, None, "modus", "unknown input fields modus, vote"),
    ("solve", {**TASK, "output_schema": {"type": "string"}}, None, "output_schema", "must describe an object"),
    ("solve", {**TASK, "min_votes": 9, "votes": 3}, None, "min_votes", "between 1 and votes (3)"),
    ("solve", {**TASK, "playbook": "../acme"}, None, "playbook", "bad playbook"),
    ("solve", {**TASK, "mode": "plan"}, None, "mode", "unknown mode 'plan'"),
    ("solve", {"task": "  "}, None, "task", "task is empty"),
    ("solve", TASK, {"max_concurrency": -3}, "context.max_concurrency", "must be greater than or equal to 1, got -3"),
    ("solve", TASK, {"temperature": 3}, "context.temperature", "must be less than or equal to 2"),
    ("solve", TASK, {"vote_stop_threshold": 0.4}, "context.vote_stop_threshold", "greater than 0.5"),
    ("solve", TASK, {"max_concurrency": "many"}, "context.max_concurrency", "valid integer"),
    ("solve", TASK, {"concurrency": 2}, "context.concurrency", "is not a run setting"),
    ("solve", TASK, {"chat_model": "x"}, "context.chat_model", "for code only"),
    ("solve", TASK, ["max_concurrency"], "context", "must be an object"),
    ("plan", {**TASK, "max_replans": 9}, None, "max_replans", "max_replans must be a whole number from 0 to 5"),
    ("plan", {**TASK, "votez": 1}, None, "votez", "unknown input field votez for plan"),
    ("plan", {**TASK, "output_schema": {"type": "object"}}, None, None, "not plan"),
    ("solve", ["task"], None, None, "must be an object"),
])
def test_what_cannot_run_is_refused_naming_the_field(graph, run_input, context, field, says):
    with pytest.raises(RunInputError) as refused:
        check_run_input(graph, run_input, context)
    assert refused.value.field == field and says in str(refused.value), str(refused.value)
    assert "\n" not in str(refused.value)


def test_what_can_run_passes_and_gives_the_resolved_context():
    ctx = check_run_input("solve", {**TASK, "mode": "vote", "votes": 3, "playbook": "support"}, {"max_concurrency": 2})
    assert ctx.max_concurrency == 2 and ctx.max_attempts is not None  # the rest from the process settings
    check_run_input("plan", {"task": "Add 2 and 2, then write a note.", "max_replans": 0, "test_command": "true"})
    check_run_input("solve", {"document": {"name": "a.txt", "base64": "aGk="}})  # read (and checked) by the run


def test_a_follow_up_on_a_thread_may_leave_the_task_out():
    with pytest.raises(RunInputError):
        check_run_input("solve", {"question": "And half of that?"})
    check_run_input("solve", {"question": "And half of that?"}, continues_thread=True)
    with pytest.raises(RunInputError):  # but its other fields are checked all the same
        check_run_input("solve", {"votes": 0}, continues_thread=True)


def test_every_caller_setting_of_context_is_there_and_the_code_only_ones_are_not():
    assert {"max_concurrency", "temperature", "ok_confidence", "max_reasks"} <= set(RunContext.model_fields)
    assert not {"chat_model", "embedder", "services"} & set(RunContext.model_fields)
    assert checked_context(None).max_concurrency is not None and checked_context({}).max_concurrency is not None
