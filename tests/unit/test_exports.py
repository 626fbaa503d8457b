"""`parallax export sft|preferences`: every line checked against its format by hand, secrets
redacted, counts printed."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from testkit.scripted_model import scripted

runner = CliRunner()
SECRET_TASK = "Contact bob@example.com (key sk-abcdefghijklmnopqrstuvwx1234). What is 2 + 2?"


def script(prompt: str, temperature: float, index: int) -> str:
    """Votes at low temperature say 4, at high temperature 5; 'three' questions are answered 3."""
    if "You read part" in prompt:
        return json.dumps({"relevant": True, "points": ["four"]})
    if "What is 1 + 2?" in prompt:
        return json.dumps({"reasoning": "one plus two", "answer": "3"})
    answer = "4" if temperature < 0.7 else "5"
    return json.dumps({"reasoning": "adding", "answer": answer})


def run(ctx, *args: str) -> dict:
    out = runner.invoke(app, ["run", *args, "--json"], obj=ctx)
    assert out.exit_code == 0, out.output
    return json.loads(out.output.strip().splitlines()[-1])


@pytest.fixture
def history():
    """Runs with known answers, a vote run with a split, duplicates, a section run and feedback."""
    ctx, _ = scripted(script)
    right = run(ctx, SECRET_TASK, "--mode", "direct", "--target", "4")  # right (temperature 0.2)
    run(ctx, SECRET_TASK, "--mode", "direct", "--target", "4")  # same prompt: a duplicate
    run(ctx, "What is 2 + 3?", "--mode", "direct", "--target", "5")  # wrong
    liked = run(ctx, "What is 1 + 2?", "--mode", "direct")  # no target, feedback up
    runner.invoke(app, ["feedback", liked["trace_id"], "--score", "up"])
    split = run(
        ctx, SECRET_TASK, "--mode", "vote", "--votes", "5", "--target", "4"
    )  # 0.3,0.475,0.65 say 4; 0.825,1.0 say 5
    run(
        ctx, "What is 1 + 2?", "--mode", "vote", "--votes", "3", "--target", "3"
    )  # every vote right: no pair
    section = run(ctx, "# A\n" + "x " * 40 + "\n# B\n" + "y " * 40, "--mode", "section")
    runner.invoke(app, ["feedback", section["trace_id"], "--score", "up"])
    return {"right": right, "liked": liked, "split": split}


def roles(messages: list[dict]) -> list[str]:
    assert all(
        set(m) == {"role", "content"} and isinstance(m["content"], str) and m["content"]
        for m in messages
    )
    return [m["role"] for m in messages]


def lines(path) -> list[dict]:
    text = path.read_text()
    assert text.endswith("\n")
    return [json.loads(line) for line in text.splitlines()]


def export(*args: str) -> dict:
    out = runner.invoke(app, ["export", *args, "--json"])
    assert out.exit_code == 0, out.output
    return json.loads(out.output)


def test_sft_lines_are_openai_chat_examples_of_right_runs(history, tmp_path):
    path = tmp_path / "sft.jsonl"
    report = export("sft", "--out", str(path))
    found = lines(path)
    assert (
        report["written"] == len(found) == 4
    )  # right direct, liked direct, the two vote runs' winning votes
    for line in found:
        assert set(line) == {"messages"} and roles(line["messages"]) == [
            "system",
            "user",
            "assistant",
        ]
        reply = json.loads(line["messages"][2]["content"])
        assert set(reply) == {"reasoning", "answer"} and reply["answer"] in ("4", "3")
    assert report["left_out"]["wrong"] == 1 and report["left_out"]["duplicate prompt"] == 1
    assert sum(report["left_out"].values()) + report["written"] == report["runs"] == 7
    text = path.read_text()
    assert "bob@example.com" not in text and "sk-abcdef" not in text and "[REDACTED:email]" in text


def test_trl_and_openai_preferences_pair_a_right_vote_with_a_wrong_one(history, tmp_path):
    trl, openai = tmp_path / "trl.jsonl", tmp_path / "dpo.jsonl"
    report = export("preferences", "--format", "trl", "--out", str(trl))
    assert report["written"] == 1
    assert (
        report["left_out"]["not a vote or speculate run"] == 5
        and report["left_out"]["no pair: every vote was right"] == 1
    )
    (line,) = lines(trl)
    assert set(line) == {"prompt", "chosen", "rejected"}
    assert roles(line["prompt"]) == ["system", "user"] and roles(line["chosen"]) == roles(
        line["rejected"]
    ) == ["assistant"]
    assert json.loads(line["chosen"][0]["content"])["answer"] == "4"
    assert json.loads(line["rejected"][0]["content"])["answer"] == "5"
    assert "bob@example.com" not in json.dumps(line)
    export("preferences", "--format", "openai", "--out", str(openai))
    (dpo,) = lines(openai)
    assert set(dpo) == {"input", "preferred_output", "non_preferred_output"}
    assert (
        set(dpo["input"]) == {"messages", "tools", "parallel_tool_calls"}
        and dpo["input"]["tools"] == []
    )
    assert (
        roles(dpo["input"]["messages"]) == ["system", "user"]
        and dpo["input"]["messages"] == line["prompt"]
    )
    assert (
        dpo["preferred_output"] == line["chosen"]
        and dpo["non_preferred_output"] == line["rejected"]
    )


def test_kto_labels_each_run_with_a_verdict(history, tmp_path):
    path = tmp_path / "kto.jsonl"
    report = export("preferences", "--format", "kto", "--out", str(path))
    found = lines(path)
    for line in found:
        assert set(line) == {"prompt", "completion", "label"} and isinstance(line["label"], bool)
        assert roles(line["prompt"]) == ["system", "user"] and roles(line["completion"]) == [
            "assistant"
        ]
    labels = sorted(line["label"] for line in found)
    assert labels == [
        False,
        True,
        True,
        True,
        True,
    ]  # wrong direct; right direct, liked, split vote, all-right vote
    assert report["left_out"]["duplicate prompt"] == 1


def test_the_command_prints_counts_and_reasons(history, tmp_path):
    out = runner.invoke(app, ["export", "sft", "--out", str(tmp_path / "x.jsonl")])
    assert out.exit_code == 0
    assert (
        "wrote 4 sft examples" in out.output
        and "1 wrong" in out.output
        and "1 duplicate prompt" in out.output
    )


@pytest.mark.parametrize(
    "args, message",
    [
        (["sft", "--out", "x.txt"], "must be a .jsonl"),
        (["sft", "--out", "/nope/x.jsonl"], "does not exist"),
        (["sft", "--out", "x.jsonl", "--min-score", "2"], "--min-score"),
        (["preferences", "--out", "x.jsonl", "--format", "csv"], "unknown format"),
    ],
)
def test_bad_export_input_is_one_line_exit_2(args, message, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    out = runner.invoke(app, ["export", *args])
    assert (
        out.exit_code == 2 and message in out.output and len(out.output.strip().splitlines()) == 1
    )
    assert not (tmp_path / "x.jsonl").exists()


def test_the_format_check_refuses_lines_that_are_not_the_format():
    from pydantic import ValidationError

    from parallax.logic.export_lines import validate_line

    system, user = {"role": "system", "content": "s"}, {"role": "user", "content": "u"}
    a, b = [{"role": "assistant", "content": "a"}], [{"role": "assistant", "content": "b"}]
    good = {
        "sft": {"messages": [system, user, *a]},
        "trl": {"prompt": [system, user], "chosen": a, "rejected": b},
        "openai": {
            "input": {"messages": [system, user], "tools": [], "parallel_tool_calls": True},
            "preferred_output": a,
            "non_preferred_output": b,
        },
        "kto": {"prompt": [system, user], "completion": a, "label": True},
    }
    for fmt, line in good.items():
        validate_line(fmt, line)
    bad = [
        ("sft", {"messages": [system, user]}),
        ("sft", {"messages": [system, user, *a], "id": 1}),
        ("trl", {**good["trl"], "chosen": a + b}),
        ("trl", {**good["trl"], "prompt": [*a, user]}),
        ("openai", {**good["openai"], "preferred_output": [user]}),
        ("kto", {**good["kto"], "label": "yes"}),
        ("kto", {**good["kto"], "completion": [{"role": "assistant", "content": ""}]}),
    ]
    for fmt, line in bad:
        with pytest.raises(ValidationError):
            validate_line(fmt, line)


def test_the_format_check_refuses_tool_calling_lines_that_do_not_hold_together():
    from pydantic import ValidationError

    from parallax.logic.export_lines import validate_line
    from parallax.logic.exports import edit_tools

    prompt, tools = (
        [
            {"role": "system", "content": "s"},
            {"role": "user", "content": "u"},
        ],
        edit_tools(),
    )
    call = {
        "id": "call_1",
        "type": "function",
        "function": {"name": "read", "arguments": '{"path": "a"}'},
    }
    openai = [
        {"role": "assistant", "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "x"},
        {"role": "assistant", "content": "done"},
    ]
    trl = [
        {
            "role": "assistant",
            "tool_calls": [{"type": "function", "function": {"name": "read", "arguments": {}}}],
        },
        {"role": "tool", "name": "read", "content": "x"},
        {"role": "assistant", "content": "done"},
    ]
    validate_line("sft", {"messages": [*prompt, *openai], "tools": tools})
    validate_line("trl", {"prompt": prompt, "chosen": trl, "rejected": trl[2:], "tools": tools})
    validate_line("kto", {"prompt": prompt, "completion": trl, "label": True, "tools": tools})
    unknown = {**call, "function": {"name": "rm", "arguments": "{}"}}
    bad = [
        (
            "sft",
            {"messages": [*prompt, *openai[:2]], "tools": tools},
        ),  # ends with the tool's result
        (
            "sft",
            {
                "messages": [
                    *prompt,
                    openai[0],
                    {**openai[1], "tool_call_id": "call_9"},
                    openai[2],
                ],
                "tools": tools,
            },
        ),
        (
            "sft",
            {"messages": [*prompt, {"role": "assistant", "tool_calls": [unknown]}], "tools": tools},
        ),
        (
            "sft",
            {
                "messages": [
                    *prompt,
                    {
                        "role": "assistant",
                        "tool_calls": [{**call, "function": {"name": "read", "arguments": "[1]"}}],
                    },
                ],
                "tools": tools,
            },
        ),
        ("sft", {"messages": [*prompt, *openai], "tools": []}),
        (
            "trl",
            {"prompt": prompt, "chosen": openai, "rejected": trl, "tools": tools},
        ),  # OpenAI's shape, not TRL's
        (
            "kto",
            {"prompt": prompt, "completion": [trl[0], trl[2]], "label": True, "tools": tools},
        ),  # call unanswered
        (
            "openai",
            {
                "input": {"messages": prompt},
                "preferred_output": trl,
                "non_preferred_output": trl[2:],
                "tools": tools,
            },
        ),
    ]
    for fmt, line in bad:
        with pytest.raises(ValidationError):
            validate_line(fmt, line)


# --- speculate runs: a real check said which candidate passed -------------------------------------

PASS_AFTER_TWO_FAILED = r"""
import os, sys, time
text, marks = open(os.environ["PARALLAX_CANDIDATE_FILE"]).read(), sys.argv[1]
if "FAIL" in text:
    open(os.path.join(marks, str(os.getpid())), "w").close()
    print("1 passed, 2 failed"); sys.exit(1)
deadline = time.time() + 20
# pass once both failing checks are done
while len(os.listdir(marks)) < 2 and time.time() < deadline:
    time.sleep(0.05)
# a mark is made just before its check exits: let the failing checks' results reach their candidates
time.sleep(1.0)
print("3 passed"); sys.exit(0)
"""
CANDIDATES = {
    0.2: "PASS add",
    0.467: "FAIL add two",
    0.733: "FAIL add three",
}  # 1.0 is slow: cancelled


def candidate_script(sent: dict[str, str]):
    """Four add(a, b) candidates by temperature: one passes, two fail (the third also writes a
    file), the slowest is cancelled; sub(a, b)'s fail. `sent` gets each reply's prompt as the model
    got it, by the reply's answer.
    """

    def script(prompt: str, temperature: float, index: int):
        answer = (
            f"FAIL sub {temperature}"
            if "sub(a, b)" in prompt
            else CANDIDATES.get(round(temperature, 3), "SLOW")
        )
        sent[answer] = prompt
        files = [{"path": "notes.txt", "content": "three\n"}] if answer == "FAIL add three" else []
        reply = json.dumps({"reasoning": "r", "answer": answer, "files": files})
        return (30.0, reply) if answer == "SLOW" else reply

    return script


@pytest.fixture
def speculated(tmp_path, monkeypatch):
    """A speculate run with 1 passing, 2 failing and 1 cancelled candidate, and one where none
    passed; each candidate's prompt as the model got it, by its reply's answer (and the runs' trace
    ids, by "won" and "lost").
    """
    monkeypatch.setenv(
        "PARALLAX_CHECK_SANDBOX", "off"
    )  # the checks wait for each other's marks in one folder
    check, marks = tmp_path / "check.py", tmp_path / "marks"
    check.write_text(PASS_AFTER_TWO_FAILED)
    marks.mkdir()
    sent: dict[str, str] = {}
    ctx, _ = scripted(candidate_script(sent), early_stop=True)
    command = f"{sys.executable} {check} {marks}"
    won = run(
        ctx, "Write add(a, b).", "--mode", "speculate", "--candidates", "4", "--check", command
    )
    lost = run(
        ctx, "Write sub(a, b).", "--mode", "speculate", "--candidates", "2", "--check", command
    )
    assert (won["status"], won["answer"], lost["status"]) == ("ok", "PASS add", "needs_review")
    results = sorted(
        b["speculation"]["result"] for b in won["branches"] if b["kind"] == "candidate"
    )
    assert results == ["cancelled", "lost", "lost", "won"]
    return {**sent, "won": won["trace_id"], "lost": lost["trace_id"]}


def asked(prompt: list[dict]) -> str:
    """A line's prompt as the scripted model saw it (its messages' contents, one a line)."""
    return "\n".join(m["content"] for m in prompt)


def reply(line: list[dict]) -> str:
    (message,) = line
    assert message["role"] == "assistant"
    return json.loads(message["content"])["answer"]


def test_sft_of_speculate_runs_is_the_candidate_that_passed_its_check(speculated, tmp_path):
    path = tmp_path / "sft.jsonl"
    report = export("sft", "--out", str(path))
    (line,) = lines(path)
    assert (
        roles(line["messages"]) == ["system", "user", "assistant"]
        and reply(line["messages"][2:]) == "PASS add"
    )
    assert (
        asked(line["messages"][:2]) == speculated["PASS add"]
    )  # the winner's own prompt, its approach in it
    assert (
        "Approach: Solve it the most direct, conventional way." in line["messages"][1]["content"]
    )  # said last
    assert report["left_out"] == {"no candidate passed its check": 1}


def test_kto_of_speculate_runs_labels_each_checked_candidate_by_its_check(speculated, tmp_path):
    path = tmp_path / "kto.jsonl"
    report = export("preferences", "--format", "kto", "--out", str(path))
    found = {reply(line["completion"]): line for line in lines(path)}
    assert {answer: line["label"] for answer, line in found.items()} == {
        "PASS add": True,
        "FAIL add two": False,
        "FAIL add three": False,
        "FAIL sub 0.2": False,
        "FAIL sub 1.0": False,
    }
    assert all(asked(line["prompt"]) == speculated[answer] for answer, line in found.items())
    assert (
        len({asked(line["prompt"]) for line in found.values()}) == 5
    )  # each candidate had its own approach
    assert report["left_out"] == {"candidate not checked (cancelled, refused or failed)": 1}


def test_preferences_of_speculate_runs_prefer_the_passing_candidate_to_a_failing_one(
    speculated, tmp_path
):
    trl, openai = tmp_path / "trl.jsonl", tmp_path / "dpo.jsonl"
    report = export("preferences", "--format", "trl", "--out", str(trl))
    (line,) = lines(trl)
    assert reply(line["chosen"]) == "PASS add" and reply(line["rejected"]) == "FAIL add two"
    assert (
        roles(line["prompt"]) == ["system", "user"]
        and asked(line["prompt"]) == speculated["PASS add"]
    )
    assert report["written"] == 1 and report["left_out"] == {"no candidate passed its check": 1}
    export("preferences", "--format", "openai", "--out", str(openai))
    (dpo,) = lines(openai)
    assert dpo["input"]["messages"] == line["prompt"]
    assert (
        dpo["preferred_output"] == line["chosen"]
        and dpo["non_preferred_output"] == line["rejected"]
    )


def test_a_speculate_run_without_a_passing_candidate_says_so(speculated, tmp_path):
    out = runner.invoke(app, ["export", "preferences", "--out", str(tmp_path / "x.jsonl")])
    said = " ".join(out.output.split())  # the console wraps long lines
    assert (
        out.exit_code == 0
        and "wrote 1 trl examples" in said
        and "left out: 1 no candidate passed its check" in said
    )


# --- a person's word over the check: a check can pass a wrong answer
# ---------------------------------


def feedback(*args: str) -> None:
    out = runner.invoke(app, ["feedback", *args])
    assert out.exit_code == 0, out.output


def kto_labels(tmp_path) -> tuple[dict[str, bool], dict]:
    path = tmp_path / "kto.jsonl"
    report = export("preferences", "--format", "kto", "--out", str(path))
    return {reply(line["completion"]): line["label"] for line in lines(path)}, report


def test_a_thumbs_down_unmakes_the_winner_whose_check_passed(speculated, tmp_path):
    feedback(speculated["won"], "--score", "down")
    report = export("sft", "--out", str(tmp_path / "sft.jsonl"))
    assert report["written"] == 0 and report["left_out"] == {
        "a person said the winner is wrong (its check passed)": 1,
        "no candidate passed its check": 1,
    }
    labels, report = kto_labels(tmp_path)
    assert labels == {
        "PASS add": False,
        "FAIL add two": False,
        "FAIL add three": False,
        "FAIL sub 0.2": False,
        "FAIL sub 1.0": False,
    }
    report = export("preferences", "--format", "trl", "--out", str(tmp_path / "trl.jsonl"))
    assert (
        report["written"] == 0
        and report["left_out"]["a person said the winner is wrong (its check passed)"] == 1
    )


def test_a_thumbs_up_leaves_the_check_to_judge(speculated, tmp_path):
    feedback(speculated["won"], "--score", "0.6")
    feedback(
        speculated["lost"], "--score", "up"
    )  # a person liked it, but its check failed: still no positive
    labels, _ = kto_labels(tmp_path)
    assert labels["PASS add"] is True and labels["FAIL sub 0.2"] is labels["FAIL sub 1.0"] is False
    assert export("sft", "--out", str(tmp_path / "sft.jsonl"))["written"] == 1


def test_a_correction_makes_the_candidate_that_gave_it_the_example(speculated, tmp_path):
    feedback(
        speculated["won"], "--correct", "FAIL add two"
    )  # its check failed, but a person says it is the answer
    sft = tmp_path / "sft.jsonl"
    export("sft", "--out", str(sft))
    (line,) = lines(sft)
    assert (
        reply(line["messages"][2:]) == "FAIL add two"
        and asked(line["messages"][:2]) == speculated["FAIL add two"]
    )
    labels, _ = kto_labels(tmp_path)
    assert labels == {
        "PASS add": False,
        "FAIL add two": True,
        "FAIL add three": False,
        "FAIL sub 0.2": False,
        "FAIL sub 1.0": False,
    }
    trl = tmp_path / "trl.jsonl"
    export("preferences", "--format", "trl", "--out", str(trl))
    (pair,) = lines(
        trl
    )  # the person's answer over the one the check passed, under the person's answer's prompt
    assert (reply(pair["chosen"]), reply(pair["rejected"])) == ("FAIL add two", "PASS add")
    assert asked(pair["prompt"]) == speculated["FAIL add two"]


def test_a_correction_that_a_candidate_with_files_gave_judges_only_its_answer(speculated, tmp_path):
    feedback(
        speculated["won"], "--correct", "FAIL add three"
    )  # its answer, but its file failed the check
    report = export("sft", "--out", str(tmp_path / "sft.jsonl"))
    assert (
        report["written"] == 0
        and report["left_out"]["a person said the winner is wrong (its check passed)"] == 1
    )
    labels, report = kto_labels(tmp_path)
    assert labels == {
        "PASS add": False,
        "FAIL add two": False,
        "FAIL sub 0.2": False,
        "FAIL sub 1.0": False,
    }
    assert report["left_out"]["candidate gave the target but its files failed the check"] == 1


# --- plan runs: a speculative edit task's candidates, each an agent's tool-calling conversation
# ----------

PASS_AFTER_THE_OTHER = r"""
import pathlib, sys, time
marks, here = pathlib.Path(sys.argv[1]), pathlib.Path.cwd()
if pathlib.Path("greeting.txt").read_text() != "HELLO\n":
    (marks / here.name).touch()
    print("0 passed, 1 failed"); sys.exit(1)
# pass once the failing candidate's check is over: its worktree is gone
deadline = time.time() + 30
while (
    not (any(marks.iterdir()) and list(here.parent.iterdir()) == [here])
    and time.time() < deadline
):
    time.sleep(0.05)
print("1 passed"); sys.exit(0)
"""


def edit_step(action: str, path: str = "", content: str = "", note: str = "") -> str:
    return json.dumps({"action": action, "path": path, "content": content, "note": note})


@pytest.fixture
def edited(tmp_path, monkeypatch):
    """A plan run whose one edit task ran 2 candidates: each read greeting.txt, wrote it and said
    done; the one at temperature 1.0 wrote what the tests want and passed them after the other's
    failed. Returns the run's output and the prompt each candidate's first step was sent, by
    temperature."""
    monkeypatch.setenv(
        "PARALLAX_CHECK_SANDBOX", "off"
    )  # the tests wait for each other's marks in one folder
    from parallax.runtime.worktrees import git

    repo, marks = tmp_path / "repo", tmp_path / "marks"
    marks.mkdir()
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True)
    (repo / "greeting.txt").write_text("hello\nworld\n")
    (repo / "check.py").write_text(PASS_AFTER_THE_OTHER)
    git(repo, "add", "-A")
    git(repo, "commit", "-q", "-m", "base")
    plan = {
        "tasks": [
            {
                "id": 1,
                "goal": "Shout the greeting for bob@example.com",
                "kind": "edit",
                "writes": ["greeting.txt"],
            }
        ]
    }
    sent: dict[float, str] = {}

    def script(prompt: str, temperature: float, index: int) -> str:
        if prompt.startswith("You plan work as a small graph"):
            return json.dumps(plan)
        if "wrote greeting.txt" in prompt:
            return edit_step("done", note=f"shouted at {temperature}")
        if "Result:" in prompt:
            return edit_step(
                "write", "greeting.txt", "HELLO\n" if temperature == 1.0 else "hello?\n"
            )
        sent[temperature] = prompt
        return edit_step("read", "greeting.txt")

    ctx, _ = scripted(script)
    out = run(
        ctx,
        "Shout the greeting.",
        "--mode",
        "plan",
        "--repo",
        str(repo),
        "--candidates",
        "2",
        "--test-command",
        f"{sys.executable} check.py {marks}",
    )
    (task,) = out["tasks"]
    assert [(c["temperature"], c["result"]) for c in task["edit"]["candidates"]] == [
        (0.2, "lost"),
        (1.0, "won"),
    ]
    return {"out": out, "sent": sent}


def tool_names(turns: list[dict]) -> list[str]:
    return [call["function"]["name"] for turn in turns for call in turn.get("tool_calls", [])]


def test_a_plan_run_keeps_its_edit_candidates_conversations_in_the_store_not_in_its_result(edited):
    import asyncio

    from parallax.runtime.storage.edit_conversations import EditConversations
    from parallax.runtime.storage.stores import open_sqlite_store

    out = edited["out"]
    candidates = out["tasks"][0]["edit"]["candidates"]
    assert [c["conversation"] for c in candidates] == [
        f"0.{c['id']}" for c in candidates
    ]  # where they are, no more
    assert "hello\\nworld" not in json.dumps(
        out
    )  # what the agents' reads returned is not in the run's result

    async def stored(key: str) -> dict | None:
        async with open_sqlite_store() as store:
            return await EditConversations(store, "default", out["trace_id"]).load(key)

    for candidate in candidates:
        kept = asyncio.run(stored(candidate["conversation"]))
        assert kept is not None and [s["call"]["action"] for s in kept["steps"]] == [
            "read",
            "write",
            "done",
        ]
        assert kept["steps"][0]["result"] == "hello\nworld\n" and "result" not in kept["steps"][2]
        assert "[REDACTED:email]" in kept["messages"][1][
            "content"
        ] and "bob@example.com" not in json.dumps(kept)


async def test_an_edit_conversation_is_kept_whole_or_not_at_all_by_the_traces_prompt_limit():
    from langgraph.store.memory import InMemoryStore

    from parallax.runtime.storage.edit_conversations import EditConversations

    kept = EditConversations(InMemoryStore(), "default", "trace-1")
    conversation = {
        "messages": [{"role": "user", "content": "x" * 500}],
        "steps": [{"call": {"action": "done"}}],
    }
    assert await kept.save("0.a", conversation, limit_chars=10_000) == "0.a"
    assert (await kept.load("0.a"))["messages"][0]["content"] == "x" * 500  # whole
    assert (
        await kept.save("0.b", conversation, limit_chars=400) is None
    )  # longer than the limit: not at all
    assert await kept.load("0.b") is None


def test_sft_of_a_speculative_edit_task_is_the_winners_tool_calling_conversation(edited, tmp_path):
    from parallax.runtime.redaction import redact

    path = tmp_path / "sft.jsonl"
    report = export("sft", "--out", str(path))
    (line,) = lines(path)
    assert report["written"] == 1 and set(line) == {"messages", "tools"}
    messages = line["messages"]
    assert [m["role"] for m in messages] == [
        "system",
        "user",
        "assistant",
        "tool",
        "assistant",
        "tool",
        "assistant",
    ]
    assert asked(messages[:2]) == redact(
        edited["sent"][1.0]
    )  # the winner's own first prompt, redacted
    assert "[REDACTED:email]" in messages[1]["content"] and "bob@example.com" not in json.dumps(
        line
    )
    assert "Approach: First think about edge cases" in messages[1]["content"]
    assert tool_names(messages) == ["read", "write", "done"]
    calls = [m["tool_calls"][0] for m in messages if m["role"] == "assistant"]
    assert [json.loads(c["function"]["arguments"]) for c in calls] == [
        {"path": "greeting.txt"},
        {"path": "greeting.txt", "content": "HELLO\n"},
        {"note": "shouted at 1.0"},
    ]
    assert [m["tool_call_id"] for m in messages if m["role"] == "tool"] == [
        calls[0]["id"],
        calls[1]["id"],
    ]
    assert messages[3]["content"] == "hello\nworld\n" and messages[5]["content"].startswith(
        "wrote greeting.txt"
    )
    assert sorted(t["function"]["name"] for t in line["tools"]) == [
        "done",
        "list",
        "read",
        "test",
        "write",
    ]


def test_kto_of_a_speculative_edit_task_labels_each_candidate_by_its_tests(edited, tmp_path):
    from parallax.runtime.redaction import redact

    path = tmp_path / "kto.jsonl"
    export("preferences", "--format", "kto", "--out", str(path))
    found = {line["label"]: line for line in lines(path)}
    assert set(found) == {True, False}
    for label, temperature in ((True, 1.0), (False, 0.2)):
        line = found[label]
        assert set(line) == {"prompt", "completion", "label", "tools"}
        assert asked(line["prompt"]) == redact(edited["sent"][temperature])
        assert [m["role"] for m in line["completion"]] == [
            "assistant",
            "tool",
            "assistant",
            "tool",
            "assistant",
        ]
        write = line["completion"][2]["tool_calls"][0]["function"]
        assert write["arguments"] == {
            "path": "greeting.txt",
            "content": "HELLO\n" if label else "hello?\n",
        }
        assert line["completion"][1] == {
            "role": "tool",
            "name": "read",
            "content": "hello\nworld\n",
        }


def test_preferences_of_a_speculative_edit_task_in_trl_and_why_not_in_openai(edited, tmp_path):
    trl, openai = tmp_path / "trl.jsonl", tmp_path / "dpo.jsonl"
    export("preferences", "--format", "trl", "--out", str(trl))
    (line,) = lines(trl)
    assert set(line) == {"prompt", "chosen", "rejected", "tools"}
    assert (
        "Approach: First think about edge cases" in line["prompt"][1]["content"]
    )  # the winner's prompt
    assert tool_names(line["chosen"]) == tool_names(line["rejected"]) == ["read", "write", "done"]
    assert line["chosen"][-1]["tool_calls"][0]["function"]["arguments"] == {
        "note": "shouted at 1.0"
    }
    assert line["rejected"][-1]["tool_calls"][0]["function"]["arguments"] == {
        "note": "shouted at 0.2"
    }
    report = export("preferences", "--format", "openai", "--out", str(openai))
    assert report["written"] == 0 and openai.read_text() == ""
    assert report["left_out"] == {
        "tool-calling conversations (an OpenAI preference output is one assistant message)": 1
    }


def test_a_thumbs_down_on_the_plan_run_overrules_the_tests_that_passed(edited, tmp_path):
    feedback(edited["out"]["trace_id"], "--score", "down")
    report = export("sft", "--out", str(tmp_path / "sft.jsonl"))
    assert report["written"] == 0
    assert report["left_out"] == {"a person said the plan run is wrong (its tests passed)": 1}
    labels, report = kto_labels_of(tmp_path)
    assert labels == [False] and report["left_out"] == {
        "a person said the plan run is wrong (its tests passed)": 1
    }


def kto_labels_of(tmp_path) -> tuple[list[bool], dict]:
    path = tmp_path / "kto.jsonl"
    report = export("preferences", "--format", "kto", "--out", str(path))
    return [line["label"] for line in lines(path)], report
