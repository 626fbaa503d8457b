"""Bad input, everywhere it can enter: one line, exit 2, no traceback, nothing written; parsers
never crash."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from langgraph.store.memory import InMemoryStore
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.solve import builder as solve_builder
from parallax.logic.routing import InvalidInput, validate
from parallax.logic.task_files import TaskFileError, load_tasks
from parallax.runtime import settings as settings_mod
from parallax.runtime.storage.namespaces import NAME_RE, StoreError, check_tenant
from parallax.runtime.storage.playbook_files import parse_playbook
from parallax.state.context import Context
from testkit.scripted_model import scripted

runner = CliRunner()
FUZZ = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def assert_refused(result, message: str) -> None:
    assert result.exit_code == 2, result.output
    assert message in result.output and "Traceback" not in result.output
    assert len(result.output.strip().splitlines()) == 1


@pytest.mark.parametrize(
    "args, message",
    [
        (["run", "x" * 50], "above the limit of 20"),
        (["run", "hi", "--question", "q" * 30], "above the limit of 20"),
        (
            ["run", "hi", "--votes", "5000"],
            "--votes must be a whole number from 1 to 1000, got 5000",
        ),
        (
            ["run", "hi", "--playbook", "a/b"],
            "--playbook must be 1-64 letters, digits, '-' or '_', got 'a/b'",
        ),
        (["run", "hi", "--playbook", "typo"], "unknown playbook 'typo'"),
        (["run", "hi", "--tenant", "../x"], "bad tenant"),
        (["trace", "abc", "--tenant", "a b"], "bad tenant"),
        (["dlq", "list", "--tenant", ""], "bad tenant"),
        (["eval", "/no/such.jsonl"], "not found"),
        (["learn", "/no/such.jsonl"], "not found"),
        (["playbook", "show", "--version", "3"], "no versions yet"),
    ],
)
def test_cli_refuses_bad_input_and_writes_nothing(monkeypatch, args, message):
    monkeypatch.setenv("PARALLAX_MAX_INPUT_CHARS", "20")
    model_ctx, calls = scripted(lambda p, t, i: "{}")
    assert_refused(runner.invoke(app, args, obj=model_ctx), message)
    assert calls == [] and not settings_mod.load().home.exists()


def test_unknown_playbook_version_for_eval_is_refused(tmp_path, monkeypatch):
    data = tmp_path / "t.jsonl"
    data.write_text(json.dumps({"input": "2+2?", "target": "4"}) + "\n")
    export = tmp_path / "pb.json"
    export.write_text(json.dumps([{"id": "pb-1", "text": "Add carefully."}]))
    assert (
        runner.invoke(app, ["playbook", "import", str(export), "--playbook", "ops"]).exit_code == 0
    )
    model_ctx, calls = scripted(lambda p, t, i: "{}")
    assert_refused(
        runner.invoke(
            app, ["eval", str(data), "--playbook", "ops", "--version", "9"], obj=model_ctx
        ),
        "has no version 9",
    )
    assert_refused(
        runner.invoke(app, ["eval", str(data), "--playbook", "opz"], obj=model_ctx),
        "unknown playbook 'opz'",
    )
    assert calls == []


async def test_the_graph_refuses_an_unknown_playbook_before_any_model_call(monkeypatch):
    model_ctx, calls = scripted(lambda p, t, i: "{}")
    with pytest.raises(InvalidInput, match="unknown playbook 'typo'"):
        await solve_builder.compile(store=InMemoryStore()).ainvoke(
            {"task": "2+2?", "playbook": "typo"}, context=model_ctx
        )
    assert calls == []


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=6,
)


@FUZZ
@given(
    st.dictionaries(
        st.sampled_from(
            [
                "task",
                "question",
                "mode",
                "votes",
                "min_votes",
                "tenant",
                "playbook",
                "max_cost",
                "max_tokens",
            ]
        ),
        json_values,
        max_size=7,
    )
)
def test_graph_input_validation_only_ever_says_invalid_input(payload):
    """Whatever a client sends, validation accepts it or raises InvalidInput - never a crash."""
    try:
        validate(payload, Context(max_input_chars=1000))
    except InvalidInput as exc:
        assert str(exc) and "\n" not in str(exc)
    else:
        assert isinstance(payload["task"], str) and payload["task"].strip()


@FUZZ
@given(st.text(max_size=70))
def test_tenant_names_are_accepted_exactly_when_they_are_safe(name):
    try:
        assert check_tenant(name) == name
        assert NAME_RE.fullmatch(name) and "/" not in name and ".." not in name
    except StoreError as exc:
        assert "bad tenant" in str(exc) and not NAME_RE.fullmatch(name)


@FUZZ
@given(st.text(max_size=300))
def test_playbook_files_parse_or_say_why(text):
    try:
        items = parse_playbook(text)
    except StoreError as exc:
        assert str(exc)
    else:
        assert all(item.text.strip() for item in items)


good_line = st.builds(
    lambda q, a: json.dumps({"question": q, "answer": a}),
    st.text(alphabet="abc xyz?", min_size=1, max_size=10).filter(str.strip),
    st.text(max_size=5),
)
bad_line = st.sampled_from(["{", "[]", "42", '{"answer": "1"}', '{"input": 3}', "not json"])


@FUZZ
@given(st.lists(st.tuples(st.booleans(), good_line, bad_line), min_size=1, max_size=8))
def test_task_files_report_bad_lines_by_number_and_skip_bad_keeps_the_rest(tmp_path_factory, lines):
    chosen = [good if keep else bad for keep, good, bad in lines]
    path = tmp_path_factory.mktemp("tasks") / "t.jsonl"
    path.write_text("\n".join(chosen) + "\n")
    first_bad = next((n for n, (keep, _, _) in enumerate(lines, 1) if not keep), None)
    if first_bad is not None:
        with pytest.raises(TaskFileError, match=f"t.jsonl:{first_bad}: "):
            load_tasks(path)
    good = sum(keep for keep, _, _ in lines)
    if good:
        tasks, problems = load_tasks(path, skip_bad=True)
        assert len(tasks) == good and len(problems) == len(lines) - good
    else:
        with pytest.raises(TaskFileError):
            load_tasks(path, skip_bad=True)


@pytest.mark.parametrize("name", ["acme\n", "acme\r\n", "\nacme", "a/b", "../acme", ""])
def test_a_name_with_a_line_break_or_a_path_is_no_tenant(name):
    with pytest.raises(StoreError, match="bad tenant"):
        check_tenant(name)
