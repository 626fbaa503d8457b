"""The fault-injecting model server: real HTTP, the real openai client, the real product call
path."""

from __future__ import annotations

import json
import os
import threading
import time
import weakref

import httpx
import openai
import pytest
from pydantic import ValidationError

from testkit.fault_server import FaultConfig, FaultServer, messages_hash, schema_instance

ANSWER_SCHEMA = {
    "type": "object",
    "properties": {
        "reasoning": {"type": "string"},
        "answer": {"type": "string"},
        "note": {"type": "string"},
    },
    "required": ["reasoning", "answer"],
}
MESSAGES = [{"role": "user", "content": "What is 6 * 7?"}]


def client(url: str, timeout: float = 5.0) -> openai.OpenAI:
    return openai.OpenAI(base_url=url, api_key="test", max_retries=0, timeout=timeout)


def ask(url: str, *, timeout: float = 5.0, **extra):
    return client(url, timeout).chat.completions.create(
        model="fault-model", messages=MESSAGES, **extra
    )


def test_no_faults_gives_a_valid_reply_with_usage():
    with FaultServer(FaultConfig()) as url:
        assert url.startswith("http://127.0.0.1:") and url.endswith("/v1")
        plain = ask(url)
        assert plain.choices[0].message.content == "42"
        assert plain.choices[0].finish_reason == "stop"
        assert plain.usage.prompt_tokens > 0 and plain.usage.completion_tokens > 0
        assert plain.usage.total_tokens == plain.usage.prompt_tokens + plain.usage.completion_tokens
        shaped = ask(url, response_format={"type": "json_object", "schema": ANSWER_SCHEMA})
        assert json.loads(shaped.choices[0].message.content) == {"reasoning": "ok", "answer": "42"}
        openai_style = ask(
            url,
            response_format={
                "type": "json_schema",
                "json_schema": {"name": "A", "schema": ANSWER_SCHEMA},
            },
        )
        assert json.loads(openai_style.choices[0].message.content) == {
            "reasoning": "ok",
            "answer": "42",
        }
        assert [m.id for m in client(url).models.list()] == ["fault-model"]


def test_schema_instance_is_minimal_and_follows_refs():
    schema = {
        "type": "object",
        "$defs": {
            "Tag": {
                "type": "object",
                "properties": {"id": {"type": "string"}, "helpful": {"type": "boolean"}},
                "required": ["id", "helpful"],
            }
        },
        "properties": {
            "choice": {"type": "string"},
            "count": {"type": "integer"},
            "ok": {"type": "boolean"},
            "severity": {"enum": ["low", "medium"]},
            "tags": {"type": "array", "items": {"$ref": "#/$defs/Tag"}},
            "maybe": {"anyOf": [{"type": "null"}, {"type": "number"}]},
            "optional": {"type": "string"},
        },
        "required": ["choice", "count", "ok", "severity", "tags", "maybe"],
    }
    assert schema_instance(schema) == {
        "choice": "42",
        "count": 1,
        "ok": True,
        "severity": "low",
        "tags": [{"id": "ok", "helpful": True}],
        "maybe": 1,
    }


def test_429_has_retry_after():
    with FaultServer(FaultConfig(rate_429=1.0, retry_after_s=7)) as url:
        with pytest.raises(openai.RateLimitError) as caught:
            ask(url)
        assert caught.value.status_code == 429
        assert caught.value.response.headers["retry-after"] == "7"


def test_500_is_an_internal_server_error():
    with FaultServer(FaultConfig(rate_500=1.0)) as url:
        with pytest.raises(openai.InternalServerError) as caught:
            ask(url)
        assert caught.value.status_code == 500


def test_malformed_content_is_not_json():
    with FaultServer(FaultConfig(rate_malformed=1.0)) as url:
        for fmt in (None, {"type": "json_object", "schema": ANSWER_SCHEMA}):
            reply = ask(url, **({"response_format": fmt} if fmt else {}))
            content = reply.choices[0].message.content
            assert content
            with pytest.raises(json.JSONDecodeError):
                json.loads(content)


def test_truncated_reply_is_cut_with_finish_reason_length():
    with FaultServer(FaultConfig(rate_truncated=1.0)) as url:
        reply = ask(url, response_format={"type": "json_object", "schema": ANSWER_SCHEMA})
        choice = reply.choices[0]
        assert choice.finish_reason == "length"
        full = json.dumps({"reasoning": "ok", "answer": "42"})
        assert 0 < len(choice.message.content) < len(full) and full.startswith(
            choice.message.content
        )


def test_hang_outlives_the_client_timeout_and_is_released():
    server = FaultServer(FaultConfig(rate_hang=1.0, hang_s=300))
    with server as url:
        with pytest.raises(openai.APITimeoutError):
            ask(url, timeout=0.5)
        # the hang ends when the client goes away, not after 300 s
        for _ in range(200):
            if server.log()[-1]["status"] is not None:
                break
            time.sleep(0.02)
        assert server.log()[-1]["fault"] == "hang"
        assert server.log()[-1]["status"] == 499


def test_stop_releases_a_request_still_hanging():
    server = FaultServer(FaultConfig(rate_hang=1.0, hang_s=300))
    url = server.start()
    errors: list = []
    thread = threading.Thread(target=lambda: errors.append(_catch(lambda: ask(url, timeout=30))))
    thread.start()
    while not server.log():
        time.sleep(0.02)
    started = time.monotonic()
    server.stop()
    thread.join(10)
    assert time.monotonic() - started < 5
    assert not thread.is_alive()
    assert server.log()[0]["status"] == 503


def _catch(fn):
    try:
        return fn()
    except Exception as exc:
        return exc


def test_seeded_runs_choose_the_same_faults():
    config = FaultConfig.from_fault_rate(0.8, seed=1234, retry_after_s=0, hang_s=0)

    def run() -> list[str]:
        with FaultServer(config) as url:
            for _ in range(20):
                _catch(lambda: ask(url))
            return [entry["fault"] for entry in httpx.get(f"{url[:-3]}/_log").json()]

    first, second = run(), run()
    assert first == second == [config.fault_for(i) for i in range(20)]
    assert {"429", "500", "hang", "malformed", "truncated", "ok"} <= set(first)
    assert [FaultConfig.from_fault_rate(0.8, seed=4321).fault_for(i) for i in range(20)] != first


def test_request_log_records_hashes_faults_and_status(tmp_path):
    log_file = tmp_path / "requests.jsonl"
    config = FaultConfig(rate_500=0.5, seed=5, log_path=str(log_file))
    expected = [config.fault_for(i) for i in range(6)]
    assert {"500", "ok"} <= set(expected)
    with FaultServer(config) as url:
        for i in range(6):
            _catch(
                lambda i=i: client(url).chat.completions.create(
                    model="m", temperature=0.5, messages=[{"role": "user", "content": f"q{i % 3}"}]
                )
            )
        log = httpx.get(f"{url[:-3]}/_log").json()
        assert [e["id"] for e in log] == sorted(e["id"] for e in log) and len(
            {e["id"] for e in log}
        ) == 6
        assert [e["fault"] for e in log] == expected
        assert [e["status"] for e in log] == [500 if f == "500" else 200 for f in expected]
        hashes = [messages_hash([{"role": "user", "content": f"q{i % 3}"}]) for i in range(6)]
        assert [e["messages_hash"] for e in log] == hashes
        assert hashes[0] == hashes[3] != hashes[1]
        assert all(e["temperature"] == 0.5 and e["path"] == "/v1/chat/completions" for e in log)
        on_disk = [json.loads(line) for line in log_file.read_text().splitlines()]
        assert sorted(on_disk, key=lambda e: e["id"]) == log
        assert httpx.post(f"{url[:-3]}/_reset").json() == {"ok": True}
        assert httpx.get(f"{url[:-3]}/_log").json() == []
        _catch(lambda: ask(url))  # the fault sequence restarts after a reset
        assert [e["fault"] for e in httpx.get(f"{url[:-3]}/_log").json()] == expected[:1]


def test_messages_hash_is_canonical():
    assert messages_hash([{"role": "user", "content": "x"}]) == messages_hash(
        [{"content": "x", "role": "user"}]
    )
    assert len(messages_hash([])) == 64


def test_only_loopback_binds():
    for host in ("0.0.0.0", "192.168.1.10", "::", "example.com"):
        with pytest.raises(ValueError, match="loopback"):
            FaultServer(FaultConfig(), host=host)
    FaultServer(FaultConfig(), host="localhost")  # accepted (not started)


def test_rates_above_one_are_rejected():
    with pytest.raises(ValidationError, match="sum to at most 1"):
        FaultConfig(rate_429=0.6, rate_500=0.5)
    with pytest.raises(ValidationError):
        FaultConfig(rate_hang=1.5)
    with pytest.raises(ValueError):
        FaultConfig.from_fault_rate(1.2)
    spread = FaultConfig.from_fault_rate(0.2, rate_429=0.0)
    assert spread.rate_429 == 0.0 and spread.rate_500 == pytest.approx(0.04)


async def test_product_call_path_survives_rate_limits(monkeypatch):
    from parallax.graphs.solve import graph
    from parallax.runtime import chat_models as models

    seed = 0
    config = FaultConfig(rate_429=0.3, retry_after_s=0, seed=seed)
    planned = [config.fault_for(i) for i in range(8)]
    # 5 votes and at most 2 retries in all: every branch ends ok within its 3 attempts.
    assert planned[:5].count("429") >= 1 and planned.count("429") <= 2

    with FaultServer(config) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_object_schema")
        monkeypatch.setenv(
            "PARALLAX_EARLY_STOP", "false"
        )  # all 5 votes, so the planned faults meet them
        monkeypatch.setattr(models, "_clients", weakref.WeakKeyDictionary())
        out = await graph.ainvoke({"task": "What is 6 * 7?", "mode": "vote", "votes": 5})
        log = httpx.get(f"{url[:-3]}/_log").json()

    assert out["status"] == "ok"
    assert out["vote_counts"] == {"42": 5}
    votes = [b for b in out["branches"] if b["kind"] == "vote"]
    assert len(votes) == 5 and all(b["status"] == "ok" for b in votes)
    assert any(b["attempts"] > 1 for b in votes)
    assert sum(b["attempts"] for b in votes) == len(log)
    assert [e["status"] for e in log].count(429) == sum(b["attempts"] - 1 for b in votes) >= 1
    assert os.environ["OPENAI_BASE_URL"] == url
