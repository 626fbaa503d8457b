"""What admission refuses in a served request before any database is asked (server/run_fields.py,
json_body.py, caller.py): each field a caller could use to reach past a graph's entry or to pose as
the server, each bound.

The same refusals against a running deployment, with what did not happen:
tests/integration/test_deploy_admission.py.
"""

from __future__ import annotations

import asyncio

import pytest

from parallax.server import run_fields as rf
from parallax.server.caller import Caller, resolve
from parallax.server.json_body import parse, read_capped
from parallax.server.refusals import Refused

THREAD = "5b1f3f5e-8f0c-4a53-9a49-3c9f3e0d6a11"
CHECKPOINT = "1f0a2b3c-4d5e-6f70-8192-a3b4c5d6e7f8"


def refusal(call, *args, **kwargs) -> Refused:
    with pytest.raises(Refused) as refused:
        call(*args, **kwargs)
    return refused.value


@pytest.mark.parametrize(
    ("command", "field", "says"),
    [
        (
            {"goto": {"node": "candidate", "input": {"check": {"command": "touch x"}}}},
            "command.goto",
            "command.goto is refused",
        ),
        (
            {"goto": "record_trace", "update": {"tenant": "beta"}},
            "command.goto",
            "command.goto is refused",
        ),
        ({"update": {"tenant": "beta"}}, "command.update", "command.update is refused"),
        ({"resume": "yes", "graph": "x"}, "command.graph", "carries only resume"),
        ({}, "command", "must carry resume"),
        ("resume", "command", "must be an object"),
    ],
)
def test_a_command_that_would_reach_past_the_entry_is_refused_by_name(command, field, says):
    refused = refusal(rf.check_run_fields, {"command": command}, THREAD)
    assert (refused.status, refused.field) == (422, field) and says in refused.message


def test_a_resume_is_kept_and_a_stateless_one_refused():
    assert rf.check_run_fields({"command": {"resume": "yes"}}, THREAD) == (None, True, "yes")
    assert (
        refusal(rf.check_run_fields, {"command": {"resume": "yes"}}, None).field == "command.resume"
    )


@pytest.mark.parametrize(
    ("config", "field", "says"),
    [
        ({"run_id": "x"}, "config.run_id", "is not accepted"),
        ({"callbacks": []}, "config.callbacks", "is not accepted"),
        ({"max_concurrency": 100}, "config.max_concurrency", "is not accepted"),
        ({"recursion_limit": 0}, "config.recursion_limit", "from 1 to 10000"),
        ({"recursion_limit": 10_001}, "config.recursion_limit", "from 1 to 10000"),
        ({"recursion_limit": True}, "config.recursion_limit", "from 1 to 10000"),
        ({"tags": ["x"] * 17}, "config.tags", "at most 16"),
        ({"run_name": "x" * 129}, "config.run_name", "at most 128"),
        ({"metadata": {"parallax_cron": "x"}}, "config.metadata.parallax_cron", "Parallax's own"),
        (
            {"configurable": {"langgraph_auth_user": {"identity": "beta"}}},
            "config.configurable.langgraph_auth_user",
            "set by the server",
        ),
        ({"configurable": {"user_id": "beta"}}, "config.configurable.user_id", "set by the server"),
        ({"configurable": {"run_id": "x"}}, "config.configurable.run_id", "set by the server"),
        (
            {"configurable": {"checkpoint_ns": "sub"}},
            "config.configurable.checkpoint_ns",
            "LangGraph's own",
        ),
        (
            {"configurable": {"checkpoint_map": {}}},
            "config.configurable.checkpoint_map",
            "LangGraph's own",
        ),
        (
            {"configurable": {"__pregel_send": 1}},
            "config.configurable.__pregel_send",
            "LangGraph's own",
        ),
        (
            {"configurable": {"parallax_fence": {}}},
            "config.configurable.parallax_fence",
            "Parallax's own",
        ),
        (
            {"configurable": {"parallax_trace_context": {}}},
            "config.configurable.parallax_trace_context",
            "Parallax's own",
        ),
        (
            {"configurable": {"thread_id": "another"}},
            "config.configurable.thread_id",
            "thread of the route",
        ),
        (
            {"configurable": {"checkpoint_id": "not-a-uuid"}},
            "config.configurable.checkpoint_id",
            "UUID",
        ),
        ({"configurable": {"anything": 1}}, "config.configurable.anything", "is not a run setting"),
    ],
)
def test_config_that_would_pose_as_the_server_is_refused_by_name(config, field, says):
    refused = refusal(rf.check_run_fields, {"config": config}, THREAD)
    assert (refused.status, refused.field) == (422, field) and says in refused.message


def test_config_a_client_sends_is_taken():
    config = {
        "configurable": {"thread_id": THREAD, "max_tokens": 64, "checkpoint_id": CHECKPOINT},
        "metadata": {"from": "remote graph"},
        "tags": ["a"],
        "recursion_limit": 50,
        "run_name": "x",
    }
    assert rf.check_run_fields({"config": config}, THREAD) == (CHECKPOINT, False, None)
    assert rf.configurable_settings(config) == {"max_tokens": 64}


@pytest.mark.parametrize(
    ("metadata", "thread", "field", "says"),
    [
        ({"parallax_webhook": "x"}, False, "metadata.parallax_webhook", "Parallax's own"),
        ({"owner": "beta"}, True, "metadata.owner", "set from your API key"),
        ({f"k{i}": i for i in range(33)}, False, "metadata", "at most 32"),
        ({"k": "x" * 9000}, False, "metadata", "over 8192 bytes"),
        ({"x" * 65: 1}, False, "metadata", "1 to 64 characters"),
        (["not", "an", "object"], False, "metadata", "must be an object"),
    ],
)
def test_metadata_is_bounded_and_names_no_key_of_ours(metadata, thread, field, says):
    refused = refusal(rf.check_metadata, metadata, "metadata", thread=thread)
    assert refused.field == field and says in refused.message
    rf.check_metadata({"owner": "x"}, "metadata")  # only a thread's owner is the key's


@pytest.mark.parametrize(
    ("payload", "thread", "field"),
    [
        (
            {"checkpoint": {"checkpoint_id": CHECKPOINT, "checkpoint_map": {}}},
            THREAD,
            "checkpoint.checkpoint_map",
        ),
        (
            {"checkpoint": {"checkpoint_id": CHECKPOINT, "checkpoint_ns": "sub:1"}},
            THREAD,
            "checkpoint.checkpoint_ns",
        ),
        (
            {"checkpoint": {"checkpoint_id": CHECKPOINT, "thread_id": "other"}},
            THREAD,
            "checkpoint.thread_id",
        ),
        (
            {"checkpoint": {"checkpoint_id": CHECKPOINT, "user_id": "beta"}},
            THREAD,
            "checkpoint.user_id",
        ),
        ({"checkpoint_id": CHECKPOINT}, None, "checkpoint_id"),
        (
            {"config": {"configurable": {"checkpoint_id": CHECKPOINT}}},
            None,
            "config.configurable.checkpoint_id",
        ),
    ],
)
def test_a_checkpoint_is_one_of_the_threads_own_root_checkpoints(payload, thread, field):
    assert refusal(rf.check_run_fields, payload, thread).field == field


def test_a_checkpoint_of_the_thread_is_taken():
    given = {"checkpoint": {"checkpoint_id": CHECKPOINT, "checkpoint_ns": "", "thread_id": THREAD}}
    assert rf.check_run_fields(given, THREAD)[0] == CHECKPOINT


@pytest.mark.parametrize(
    ("graph", "answer", "says"),
    [
        ("chat", {"decisions": [{"type": "execute"}]}, "does not fit the review"),
        (
            "chat",
            {"decisions": [{"type": "edit", "edited_action": {"args": {"answer": " "}}}]},
            "does not fit the review",
        ),
        ("learn", {"node": "commit"}, "asks yes or no"),
        ("learn", "y" * 17, "asks yes or no"),
        ("solve", "yes", "never asks for an answer"),
        ("loop", "yes", "never asks for an answer"),
        ("echo", "x" * 25_000, "over 20000 bytes"),
        (
            "chat",
            {"0123456789abcdef0123456789abcdef": {"decisions": [{"type": "nope"}]}},
            "does not fit the review",
        ),
    ],
)
def test_a_resume_must_be_what_the_interrupt_asked(graph, answer, says):
    refused = refusal(rf.check_resume, graph, answer)
    assert (refused.status, refused.field) == (422, "command.resume") and says in refused.message


@pytest.mark.parametrize(
    ("graph", "answer"),
    [
        ("chat", {"decisions": [{"type": "approve"}]}),
        (
            "chat",
            {
                "decisions": [
                    {"type": "edit", "edited_action": {"name": "answer", "args": {"answer": "95"}}}
                ]
            },
        ),
        ("chat", {"0123456789abcdef0123456789abcdef": "accept"}),
        ("learn", "yes"),
        ("learn", False),
        ("echo", {"any": "thing"}),
    ],
)
def test_a_resume_in_the_shape_asked_passes(graph, answer):
    rf.check_resume(graph, answer)


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        ({"values": {"tenant": "beta"}, "as_node": "judge"}, "values"),
        ({"values": [{"answer": "x"}]}, "values"),
        ({"as_node": "record_trace"}, "as_node"),
        ({"as_node": "__copy__", "checkpoint_ns": "sub"}, "checkpoint_ns"),
        (
            {
                "as_node": "__copy__",
                "checkpoint": {"checkpoint_id": CHECKPOINT, "checkpoint_map": {}},
            },
            "checkpoint.checkpoint_map",
        ),
    ],
)
def test_a_state_update_may_only_fork(payload, field):
    assert refusal(rf.check_state_update, payload, THREAD).field == field


def test_a_state_read_and_a_fork_pass():
    rf.check_state_update({}, THREAD)
    rf.check_state_update(
        {"checkpoint": {"checkpoint_id": CHECKPOINT, "checkpoint_ns": "sub:1"}, "subgraphs": True},
        THREAD,
    )
    rf.check_state_update({"as_node": "__copy__", "checkpoint_id": CHECKPOINT}, THREAD)


def test_json_is_parsed_once_within_its_depth():
    assert parse(b'{"a": [1, {"b": 2}]}', 3) == {"a": [1, {"b": 2}]}
    assert parse(b"", 3) is None
    assert refusal(parse, b'{"a": [1, {"b": [2]}]}', 3).status == 422
    deep = refusal(
        parse, b"[" * 100_000 + b"]" * 100_000, 64
    )  # the decoder's own recursion limit: no 500
    assert (deep.status, "nests JSON more than 64 levels" in deep.message) == (422, True)
    assert refusal(parse, b"{nope", 64).status == 400


def test_json_that_no_database_keeps_is_refused_not_a_500():
    """schemathesis found both as 500s from PostgreSQL: an offset of 10^24, and a NUL in a search's
    text."""
    big = refusal(parse, b'{"limit": 10, "offset": 406281270262576854335488}', 64)
    assert (big.status, "406281270262576854335488, outside 64 bits" in big.message) == (422, True)
    assert (
        parse(b'{"offset": 9223372036854775807, "low": -9223372036854775808}', 64)["offset"]
        == 2**63 - 1
    )
    nul = refusal(parse, b'{"metadata": {"name": "a\\u0000b"}}', 64)
    assert (nul.status, "NUL character" in nul.message) == (422, True)
    assert refusal(parse, b'{"a\\u0000": 1}', 64).status == 422  # in a key too
    assert parse(b'{"ok": 1.5e300, "yes": true}', 64) == {"ok": 1.5e300, "yes": True}


def test_a_body_over_the_cap_is_refused_before_or_while_it_is_read():
    chunks = [b"x" * 600, b"x" * 600, b"x" * 600]
    taken: list[int] = []

    async def receive():
        taken.append(1)
        return {"type": "http.request", "body": chunks[len(taken) - 1], "more_body": len(taken) < 3}

    declared = refusal(asyncio.run, read_capped([(b"content-length", b"5000")], receive, 1024))
    assert (declared.status, taken) == (413, [])  # nothing was read
    streamed = refusal(asyncio.run, read_capped([], receive, 1024))
    assert (streamed.status, len(taken)) == (413, 2)  # stopped at the chunk that passed the cap
    taken.clear()
    assert asyncio.run(read_capped([], receive, 4096)) == b"x" * 1800


@pytest.mark.parametrize(
    ("headers", "tenant"),
    [
        ({"x-api-key": "k1"}, "acme"),
        ({"authorization": "Bearer k2"}, "beta"),
        ({"Authorization": "bearer k2"}, "beta"),
        ([(b"x-api-key", b"k1")], "acme"),
        ({"authorization": "Basic k1"}, None),
        ({"x-api-key": "k1x"}, None),
        ({}, None),
    ],
)
def test_a_request_key_resolves_to_one_caller(monkeypatch, headers, tenant):
    from parallax.runtime.settings import reload_settings

    monkeypatch.setenv("PARALLAX_API_KEYS", "k1:acme,k2:beta")
    reload_settings()
    try:
        assert resolve(headers) == (None if tenant is None else Caller(tenant=tenant))
    finally:
        monkeypatch.delenv("PARALLAX_API_KEYS")
        reload_settings()


@pytest.mark.parametrize(
    ("payload", "field", "says"),
    [
        ({"assistant_id": "solve"}, "input", "a run needs input"),
        ({"assistant_id": "solve", "input": None}, "input", "a run needs input"),
        ({"input": {"task": "x"}, "command": {"resume": "yes"}}, "command", "exclusive"),
    ],
)
def test_a_run_starts_from_input_a_resume_or_a_checkpoint(payload, field, says):
    refused = refusal(rf.check_run_start, payload)
    assert (refused.status, refused.field) == (422, field) and says in refused.message


def test_an_empty_input_beside_a_resume_is_dropped_as_aegra_drops_it():
    payload = {"input": {}, "command": {"resume": "yes"}}
    rf.check_run_start(payload)
    assert payload["input"] is None
    rf.check_run_start({"checkpoint_id": CHECKPOINT})
    rf.check_run_start({"input": {"task": "x"}})
