"""The branch call's parts, each alone (arguments, tracing, attempts, the error that ends it), and
the CLI's run options as the graph input they make."""

from __future__ import annotations

from pathlib import Path

import openai
import pytest
from pydantic import BaseModel

from parallax.logic.run_input import RunInputError
from parallax.logic.run_options import RunOptions, check_options, graph_input
from parallax.runtime.call_attempts import Attempts
from parallax.runtime.call_errors import branch_error
from parallax.runtime.call_setup import call_format, trace_config
from parallax.runtime.circuit_breaker import CircuitBreaker
from parallax.runtime.failure_cause import ParseFailure
from parallax.runtime.request_budget import BudgetRefused
from parallax.state.lifecycle import Lifecycle


class Reply(BaseModel):
    answer: str


def test_a_budget_shrinks_the_reply_cap_in_every_place_the_endpoint_reads_it():
    llama = call_format(Reply, "json_object_schema", 0.2, 512)
    assert llama.kwargs["extra_body"] == {"max_tokens": 512} and llama.schema is None
    assert llama.capped(512) is llama.kwargs
    assert llama.capped(100)["max_completion_tokens"] == 100 and llama.capped(100)[
        "extra_body"
    ] == {"max_tokens": 100}
    openai_style = call_format(Reply, "json_schema", 0.0, 512)
    assert (
        openai_style.schema == Reply.model_json_schema()
        and "extra_body" not in openai_style.capped(100)
    )


def test_tracing_config_names_the_branch_kind_only_when_tracing():
    assert trace_config({"kind": "vote"}, tracing=False) is None
    assert trace_config({"kind": "vote"}, tracing=True) == {
        "metadata": {"kind": "vote"},
        "tags": ["parallax", "vote"],
        "run_name": "parallax vote",
    }


def test_attempts_move_the_lifecycle_and_count_reasks_until_none_is_left():
    attempts = Attempts(Lifecycle([{"state": "DISPATCHED", "at": 0.0, "reason": ""}]))
    attempts.start()
    assert attempts.reask(ParseFailure("no JSON"), max_reasks=1) is True
    attempts.start()
    assert attempts.reask(ParseFailure("no JSON"), max_reasks=1) is False
    steps = [(t["state"], t["reason"]) for t in attempts.life.transitions]
    assert steps[1:] == [
        ("IN_PROGRESS", ""),
        ("FAILED", "invalid reply: no JSON"),
        ("RETRY", "re-ask for a valid reply"),
        ("IN_PROGRESS", "attempt 2, re-ask 1"),
        ("FAILED", "invalid reply: no JSON"),
    ]
    assert (attempts.attempts, attempts.reasks) == (2, 1)


def test_the_branch_error_says_a_budget_stop_and_a_failing_endpoint():
    breaker = CircuitBreaker("http://model")
    refused = branch_error(
        BudgetRefused("budget reached"),
        attempts=0,
        reasks=0,
        tokens={},
        endpoint="e",
        breaker=breaker,
    )
    assert (refused.cause, refused.timeout, str(refused)) == ("budget", False, "budget reached")
    timed_out = branch_error(
        TimeoutError(), attempts=3, reasks=0, tokens={}, endpoint="e", breaker=breaker
    )
    assert timed_out.timeout and str(timed_out) == "TimeoutError" and timed_out.attempts == 3
    parse = branch_error(
        ParseFailure("answer: missing"),
        attempts=1,
        reasks=2,
        tokens={},
        endpoint="e",
        breaker=breaker,
    )
    assert parse.cause == "parse" and parse.reasks == 2
    assert not isinstance(parse, openai.APIError)


FLAGS = {"mode": "--mode", "check": "--check", "check_file": "--check-file", "repo": "--repo"}


def test_run_options_make_the_graph_input_a_face_sends():
    name, payload = graph_input(RunOptions("Write a function.", check="pytest", votes=5), FLAGS)
    assert name == "solve" and payload["mode"] == "speculate" and payload["candidates"] == 3
    assert payload["check"] == "pytest" and "check_file" not in payload
    name, payload = graph_input(RunOptions("x", mode="plan"), FLAGS)
    assert name == "plan" and "red_team" not in payload and payload["max_replans"] == 1


def test_run_options_refuse_in_the_faces_own_words(tmp_path: Path):
    with pytest.raises(
        RunInputError,
        match="^--check and --check-file work with --mode speculate, not --mode vote$",
    ):
        check_options("vote", "true", None, None, FLAGS)
    with pytest.raises(
        RunInputError, match="^check and check_file work with mode speculate, not mode vote$"
    ):
        check_options("vote", "true", None, None, {})
    with pytest.raises(RunInputError, match="no such folder") as refused:
        check_options("plan", None, None, tmp_path / "missing", FLAGS)
    assert refused.value.field == "repo"
