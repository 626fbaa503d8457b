"""A small OpenAI-compatible model server that injects faults, for tests and benchmarks.

Why this exists: retries, re-asks, timeouts and crash/resume are only worth trusting if
they have been exercised against a real HTTP endpoint that misbehaves the way real ones
do. This server answers `POST /v1/chat/completions` (non-streaming) and `GET /v1/models`
like a model, and at configured rates answers instead with one of these faults:

- ``"429"``: HTTP 429 with a ``Retry-After`` header (``retry_after_s``);
- ``"500"``: HTTP 500;
- ``"hang"``: no answer for ``hang_s`` seconds (far beyond a client timeout); the wait
  ends early when the client disconnects (logged as status 499) or the server stops (503);
- ``"malformed"``: HTTP 200 whose assistant content is not valid JSON;
- ``"truncated"``: HTTP 200 whose content is cut mid-way, with ``finish_reason`` "length";
- ``"slow"``: a normal answer after an extra ``slow_tail_ms`` (a slow tail / straggler).

Every chat request also waits ``latency_ms`` first. The fault of the n-th chat request is
a pure function of ``(seed, n)`` (see `FaultConfig.fault_for`), so runs are reproducible.

The normal reply: with a JSON schema in ``response_format`` (llama.cpp's
``{"type": "json_object", "schema": ...}`` or OpenAI's ``{"type": "json_schema",
"json_schema": {"schema": ...}}``) the content is a minimal JSON instance of the schema
(required keys only; strings "42" for keys named answer/choice, else "ok"; integers and
numbers 1; booleans true; arrays of one element; enums their first value). With
``{"type": "json_object"}`` and no schema it is ``{"answer": "42"}``; otherwise the plain
text ``42``. ``FaultConfig.reply`` may instead be a fixed string or a callable taking the
request body and returning the content.

``GET /health`` answers 200 as llama.cpp's server does, so a test can advertise this server in
``model-server.json`` where `parallax model serve` would advertise the embedded one.

Every request is logged in memory (``GET /_log``, cleared with ``POST /_reset``, which also
restarts the fault sequence) and, when ``log_path`` is set, appended as one JSON line per
finished request. An entry holds ``id`` (monotonic, assigned on arrival), ``time``,
``path``, ``messages_hash`` (sha256 of the canonical JSON of ``messages``), ``model``,
``temperature``, ``fault`` (or "ok"), ``status`` (None while in flight) and, for chat requests,
``client`` (the caller's address: which replica asked, in a network namespace lab).
``POST /_config`` with a partial JSON config changes the configuration of a running server.

Loopback only: binding anything but 127.0.0.1, ::1 or localhost raises ValueError (a test's own
network namespace lab passes the address it made as ``lab_host``).

Run it::

    python -m testkit.fault_server --port 0 --fault-rate 0.2 [--seed N] [--log FILE]

or in tests::

    with FaultServer(FaultConfig(rate_429=0.3)) as base_url:  # http://127.0.0.1:PORT/v1
        ...
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import random
import signal
import socket
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import uvicorn
from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from parallax.runtime.model_server import wait_for_200

LOOPBACK_HOSTS = ("127.0.0.1", "::1", "localhost")
FAULT_KINDS = ("429", "500", "hang", "malformed", "truncated")
"""The kinds that `--fault-rate` spreads evenly over."""
ALL_KINDS = (*FAULT_KINDS, "slow")
ANSWER_KEYS = {"answer", "choice"}


class FaultConfig(BaseModel):
    """What the server injects and how it answers. Rates are per chat request, exclusive."""

    model_config = ConfigDict(extra="forbid", validate_assignment=True)

    rate_429: float = Field(
        0.0, ge=0.0, le=1.0, description="share of requests answered 429 + Retry-After"
    )
    rate_500: float = Field(0.0, ge=0.0, le=1.0, description="share of requests answered 500")
    rate_hang: float = Field(
        0.0, ge=0.0, le=1.0, description="share of requests that hang for hang_s"
    )
    rate_malformed: float = Field(
        0.0, ge=0.0, le=1.0, description="share of replies whose content is not JSON"
    )
    rate_truncated: float = Field(
        0.0, ge=0.0, le=1.0, description="share of replies cut mid-way (finish_reason length)"
    )
    rate_slow: float = Field(
        0.0, ge=0.0, le=1.0, description="share of replies delayed by slow_tail_ms"
    )
    latency_ms: float = Field(0.0, ge=0.0, description="delay before every chat reply")
    slow_tail_ms: float = Field(2000.0, ge=0.0, description="extra delay of a slow reply")
    hang_s: float = Field(600.0, ge=0.0, description="how long a hanging request waits")
    retry_after_s: float = Field(1.0, ge=0.0, description="Retry-After header value of a 429")
    seed: int = 0
    reply: str | Callable[[dict], str] = Field(
        "auto",
        description=(
            '"auto" (schema instance or "42"), a fixed content string, or f(request_body) ->'
            " content"
        ),
    )
    delay: Callable[[dict], float] | None = Field(
        None,
        description=(
            "f(request_body) -> extra seconds this request waits (a slow reply chosen by its"
            " content)"
        ),
    )
    model_name: str = "fault-model"
    log_path: str | None = Field(None, description="append one JSON line per finished request here")

    @model_validator(mode="after")
    def _rates_fit(self) -> FaultConfig:
        total = sum(self.rate(kind) for kind in ALL_KINDS)
        if total > 1.0 + 1e-9:
            parts = ", ".join(f"rate_{k}={self.rate(k):g}" for k in ALL_KINDS if self.rate(k))
            raise ValueError(f"fault rates must sum to at most 1, got {total:g} ({parts})")
        return self

    def rate(self, kind: str) -> float:
        return getattr(self, f"rate_{kind}")

    @classmethod
    def from_fault_rate(cls, fault_rate: float, **overrides: Any) -> FaultConfig:
        """`fault_rate` spread evenly over the five fault kinds; `overrides` win (e.g.
        rate_429=0)."""
        if not 0.0 <= fault_rate <= 1.0:
            raise ValueError(f"fault rate must be between 0 and 1, got {fault_rate:g}")
        values: dict[str, Any] = {
            f"rate_{kind}": fault_rate / len(FAULT_KINDS) for kind in FAULT_KINDS
        }
        values.update({k: v for k, v in overrides.items() if v is not None})
        return cls(**values)

    def fault_for(self, index: int) -> str:
        """The fault of the `index`-th chat request (0-based): a pure function of seed and index."""
        draw = random.Random(f"{self.seed}:{index}").random()
        edge = 0.0
        for kind in ALL_KINDS:
            edge += self.rate(kind)
            if draw < edge:
                return kind
        return "ok"


def messages_hash(messages: Any) -> str:
    """sha256 of the canonical JSON (sorted keys, no spaces, UTF-8) of a request's `messages`."""
    canonical = json.dumps(messages, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return hashlib.sha256(canonical.encode("utf-8")).hexdigest()


# --- replies -------------------------------------------------------------------------


def schema_instance(schema: dict, *, name: str = "", root: dict | None = None) -> Any:
    """A minimal instance of a JSON schema: required keys only, simple fixed values."""
    root = schema if root is None else root
    if not isinstance(schema, dict):
        return "ok"
    if "$ref" in schema:
        target: Any = root
        for part in schema["$ref"].lstrip("#/").split("/"):
            if part:
                target = target.get(part, {}) if isinstance(target, dict) else {}
        return schema_instance(target, name=name, root=root)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    for key in ("anyOf", "oneOf"):
        if schema.get(key):
            options = [
                s for s in schema[key] if not (isinstance(s, dict) and s.get("type") == "null")
            ]
            return schema_instance((options or schema[key])[0], name=name, root=root)
    if schema.get("allOf"):
        merged: dict = {}
        for part in schema["allOf"]:
            for k, v in part.items():
                merged[k] = (
                    {**merged.get(k, {}), **v}
                    if isinstance(v, dict) and isinstance(merged.get(k), dict)
                    else v
                )
        return schema_instance(merged, name=name, root=root)
    kind = schema.get("type")
    if isinstance(kind, list):
        kind = next((k for k in kind if k != "null"), "null")
    if kind is None:
        kind = "object" if "properties" in schema else "array" if "items" in schema else "string"
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            key: schema_instance(properties.get(key, {}), name=key, root=root)
            for key in schema.get("required", [])
        }
    if kind == "array":
        return [schema_instance(schema.get("items", {}), name=name, root=root)]
    if kind == "boolean":
        return True
    if kind == "integer":
        return max(1, int(schema.get("minimum", 1)))
    if kind == "number":
        return max(1, schema.get("minimum", 1))
    if kind == "null":
        return None
    text = "42" if name.lower() in ANSWER_KEYS else "ok"
    return text.ljust(int(schema.get("minLength", 0)), "k")


def _requested_schema(body: dict) -> tuple[bool, dict | None]:
    """(wants JSON, schema or None) from the request's response_format."""
    fmt = body.get("response_format")
    if not isinstance(fmt, dict):
        return False, None
    if fmt.get("type") == "json_schema":
        inner = fmt.get("json_schema") or {}
        return True, inner.get("schema") if isinstance(inner, dict) else None
    if fmt.get("type") == "json_object":
        return True, fmt.get("schema") if isinstance(fmt.get("schema"), dict) else None
    return False, None


def default_reply(body: dict) -> str:
    wants_json, schema = _requested_schema(body)
    if schema is not None:
        return json.dumps(schema_instance(schema))
    return json.dumps({"answer": "42"}) if wants_json else "42"


def malformed(content: str) -> str:
    """Looks like the reply but no `{` in it starts valid JSON (single quotes, no closing brace)."""
    text = content.replace('"', "'").replace("{}", "{,}").rstrip("}")
    return text if text.startswith("{") else "{'answer': " + repr(text)


def truncated(content: str) -> str:
    """The first half of the content (at least one character short of the whole)."""
    return content[: max(0, min(len(content) - 1, len(content) // 2))]


def _tokens(text: str) -> int:
    return max(1, len(text) // 4) if text else 0


def _prompt_text(messages: Any) -> str:
    parts = []
    for message in messages if isinstance(messages, list) else []:
        content = message.get("content") if isinstance(message, dict) else None
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts += [p.get("text", "") for p in content if isinstance(p, dict)]
    return "\n".join(parts)


# --- the app -------------------------------------------------------------------------


class FaultState:
    """Config, request counters and the log of one server; lives on the server's event loop."""

    def __init__(self, config: FaultConfig):
        self.config = config
        self.lock = threading.Lock()
        self.entries: list[dict] = []
        self.next_id = 0
        self.chat_index = 0
        self.stopping: asyncio.Event | None = None  # created on the server loop

    def reset(self) -> None:
        with self.lock:
            self.entries.clear()
            self.chat_index = 0

    def log(self) -> list[dict]:
        with self.lock:
            return [dict(entry) for entry in self.entries]

    def open_entry(self, path: str, body: dict | None) -> tuple[dict, int | None]:
        with self.lock:
            self.next_id += 1
            entry = {
                "id": self.next_id,
                "time": time.time(),
                "path": path,
                "messages_hash": messages_hash(body.get("messages")) if body is not None else None,
                "model": body.get("model") if body is not None else None,
                "temperature": body.get("temperature") if body is not None else None,
                "fault": "ok",
                "status": None,
            }
            self.entries.append(entry)
            index = None
            if body is not None:
                index, self.chat_index = self.chat_index, self.chat_index + 1
            return entry, index

    def close_entry(self, entry: dict, status: int) -> None:
        with self.lock:
            entry["status"] = status
            entry["latency_ms"] = round((time.time() - entry["time"]) * 1000, 3)
            line = json.dumps(entry)
        if self.config.log_path:
            with open(self.config.log_path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


async def _wait(seconds: float, request: Request, state: FaultState) -> int | None:
    """Sleep; None when the time ran out, 499 if the client left first, 503 if the server stops."""
    if seconds <= 0:
        return None

    async def disconnected() -> None:
        while (await request.receive())["type"] != "http.disconnect":
            pass

    waits = {
        asyncio.ensure_future(asyncio.sleep(seconds)): None,
        asyncio.ensure_future(disconnected()): 499,
    }
    if state.stopping is not None:
        waits[asyncio.ensure_future(state.stopping.wait())] = 503
    try:
        done, _ = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in waits:
            task.cancel()
        await asyncio.gather(*waits, return_exceptions=True)
    outcomes = [waits[task] for task in done]
    return next((o for o in outcomes if o is not None), None)


def _error(status: int, message: str, kind: str, headers: dict | None = None) -> JSONResponse:
    return JSONResponse(
        {"error": {"message": message, "type": kind, "code": kind}},
        status_code=status,
        headers=headers,
    )


def create_app(config: FaultConfig | None = None, state: FaultState | None = None) -> Starlette:
    """The ASGI app; `app.state.fault` is its `FaultState`."""
    state = state or FaultState(config or FaultConfig())

    async def chat_completions(request: Request) -> JSONResponse:
        try:
            body = json.loads(await request.body())
            if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
                raise ValueError("expected a JSON object with a `messages` list")
        except ValueError as exc:
            entry, _ = state.open_entry(request.url.path, None)
            entry["fault"] = "bad_request"
            state.close_entry(entry, 400)
            return _error(400, f"bad request: {exc}", "invalid_request_error")
        entry, index = state.open_entry(request.url.path, body)
        entry["client"] = request.client.host if request.client else None
        cfg = state.config
        fault = entry["fault"] = cfg.fault_for(index)
        status = await _respond_status(cfg, fault, request, state, body)
        if status is not None:  # interrupted wait
            state.close_entry(entry, status)
            return _error(status, "interrupted", "server_error")
        if body.get("stream"):
            state.close_entry(entry, 400)
            return _error(
                400, "streaming is not supported by the fault server", "invalid_request_error"
            )
        if fault == "429":
            state.close_entry(entry, 429)
            after = cfg.retry_after_s
            header = str(int(after)) if float(after).is_integer() else f"{after:g}"
            return _error(
                429, "rate limited (injected fault)", "rate_limit_exceeded", {"Retry-After": header}
            )
        if fault == "500":
            state.close_entry(entry, 500)
            return _error(500, "internal error (injected fault)", "server_error")
        n = max(1, int(body.get("n") or 1))
        entry["choices"] = (
            n  # completions this request asks for (a wave of votes is one request with `n`)
        )
        try:
            # each of `n` choices is its own sample: a reply function is asked once per choice
            contents = [
                (
                    cfg.reply(body)
                    if callable(cfg.reply)
                    else default_reply(body)
                    if cfg.reply == "auto"
                    else cfg.reply
                )
                for _ in range(n)
            ]
        except Exception as exc:  # a test's reply function failed: say so instead of hanging up
            state.close_entry(entry, 500)
            return _error(500, f"reply function failed: {exc!r}", "server_error")
        finish = "stop"
        if fault == "malformed":
            contents = [malformed(c) for c in contents]
        elif fault == "truncated":
            contents, finish = [truncated(c) for c in contents], "length"
        prompt_tokens = _tokens(_prompt_text(body["messages"]))
        completion_tokens = sum(_tokens(c) for c in contents)
        state.close_entry(entry, 200)
        return JSONResponse(
            {
                "id": f"chatcmpl-fault-{entry['id']}",
                "object": "chat.completion",
                "created": int(entry["time"]),
                "model": body.get("model") or cfg.model_name,
                "system_fingerprint": None,
                "choices": [
                    {
                        "index": i,
                        "message": {"role": "assistant", "content": c},
                        "logprobs": None,
                        "finish_reason": finish,
                    }
                    for i, c in enumerate(contents)
                ],
                "usage": {
                    "prompt_tokens": prompt_tokens,
                    "completion_tokens": completion_tokens,
                    "total_tokens": prompt_tokens + completion_tokens,
                },
            }
        )

    async def models(request: Request) -> JSONResponse:
        entry, _ = state.open_entry(request.url.path, None)
        state.close_entry(entry, 200)
        name = state.config.model_name
        return JSONResponse(
            {
                "object": "list",
                "data": [{"id": name, "object": "model", "created": 0, "owned_by": "parallax"}],
            }
        )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok"})

    async def get_log(request: Request) -> JSONResponse:
        return JSONResponse(state.log())

    async def reset(request: Request) -> JSONResponse:
        state.reset()
        return JSONResponse({"ok": True})

    async def set_config(request: Request) -> JSONResponse:
        try:
            changes = json.loads(await request.body() or b"{}")
            state.config = FaultConfig(**{**state.config.model_dump(), **changes})
        except (ValueError, TypeError, ValidationError) as exc:
            return _error(400, str(exc), "invalid_request_error")
        return JSONResponse({k: v for k, v in state.config.model_dump().items() if not callable(v)})

    app = Starlette(
        routes=[
            Route("/v1/chat/completions", chat_completions, methods=["POST"]),
            Route("/chat/completions", chat_completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            Route("/health", health, methods=["GET"]),
            Route("/_log", get_log, methods=["GET"]),
            Route("/_reset", reset, methods=["POST"]),
            Route("/_config", set_config, methods=["POST"]),
        ]
    )
    app.state.fault = state
    return app


async def _respond_status(
    cfg: FaultConfig, fault: str, request: Request, state: FaultState, body: dict | None = None
) -> int | None:
    """All the waiting a request does before it answers; a status if the wait was interrupted."""
    seconds = cfg.latency_ms / 1000 + (
        cfg.delay(body) if cfg.delay is not None and body is not None else 0.0
    )
    if fault == "slow":
        seconds += cfg.slow_tail_ms / 1000
    elif fault == "hang":
        seconds += cfg.hang_s
    return await _wait(seconds, request, state)


# --- running it ----------------------------------------------------------------------


def check_loopback(host: str) -> str:
    if host not in LOOPBACK_HOSTS:
        raise ValueError(
            f"the fault server binds loopback only ({', '.join(LOOPBACK_HOSTS)}), not {host!r}"
        )
    return "127.0.0.1" if host == "localhost" else host


def chat_log(base_url: str) -> list[dict[str, Any]]:
    """The chat completion requests a running fault server at `base_url` (…/v1) has logged, oldest
    first."""
    import httpx

    return [
        e
        for e in httpx.get(f"{base_url[:-3]}/_log").json()
        if e["path"].endswith("/chat/completions")
    ]


class FaultServer:
    """Runs the fault server with uvicorn in a background thread on a free loopback port.

    ``with FaultServer(cfg) as base_url:`` yields ``http://127.0.0.1:PORT/v1``; entering
    returns once the server answers, leaving stops it (hanging requests are released).
    """

    def __init__(
        self,
        config: FaultConfig | None = None,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        lab_host: str | None = None,
    ):
        """`lab_host`: an address of a test's own network namespaces (testkit/fault_lab.py) to bind
        instead of loopback; the lab made it and removes it."""
        self.host = lab_host or check_loopback(host)
        self.port = port
        self.state = FaultState(config or FaultConfig())
        self.app = create_app(state=self.state)
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._error: BaseException | None = None

    @property
    def config(self) -> FaultConfig:
        return self.state.config

    @config.setter
    def config(self, value: FaultConfig) -> None:
        self.state.config = value

    @property
    def url(self) -> str:
        """The `/v1` base URL (an OpenAI client's base_url)."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port}/v1"

    def log(self) -> list[dict]:
        return self.state.log()

    def reset(self) -> None:
        self.state.reset()

    def start(self, timeout_s: float = 10.0) -> str:
        if self._thread is not None:
            raise RuntimeError("fault server already started")
        family = socket.AF_INET6 if ":" in self.host else socket.AF_INET
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((self.host, self.port))
        except OSError:
            sock.close()
            raise
        sock.listen(128)
        self.port = sock.getsockname()[1]
        config = uvicorn.Config(
            self.app,
            log_level="warning",
            lifespan="off",
            access_log=False,
            timeout_graceful_shutdown=2,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._run, args=(sock,), name=f"fault-server-{self.port}", daemon=True
        )
        self._thread.start()
        running = lambda: self._error is None and self._thread.is_alive()  # noqa: E731
        outcome = wait_for_200(
            f"{self.url[:-3]}/_log", timeout_s, alive=running, interval_s=0.02
        )  # /_log is not logged
        if outcome == "died":
            raise RuntimeError(f"fault server failed to start: {self._error!r}")
        if outcome == "timeout":
            self.stop()
            raise RuntimeError(f"fault server did not answer within {timeout_s:g} s")
        return self.url

    def _run(self, sock: socket.socket) -> None:
        async def serve() -> None:
            self._loop = asyncio.get_running_loop()
            self.state.stopping = asyncio.Event()
            await self._server.serve(sockets=[sock])

        try:
            asyncio.run(serve())
        except BaseException as exc:  # reported by start()
            self._error = exc
        finally:
            sock.close()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._thread is None:
            return
        if self._loop is not None and self.state.stopping is not None:
            try:
                self._loop.call_soon_threadsafe(self.state.stopping.set)
            except RuntimeError:  # loop already closed
                pass
        if self._server is not None:
            self._server.should_exit = True
        self._thread.join(timeout_s)
        self._thread = None

    def __enter__(self) -> str:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
        self.stop()


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(
        prog="python -m testkit.fault_server", description=__doc__.split("\n\n")[0]
    )
    p.add_argument("--host", default="127.0.0.1", help="loopback only: 127.0.0.1, ::1 or localhost")
    p.add_argument("--port", type=int, default=0, help="0 picks a free port")
    p.add_argument(
        "--fault-rate",
        type=float,
        default=0.0,
        help="spread evenly over 429, 500, hang, malformed, truncated",
    )
    for kind in ALL_KINDS:
        p.add_argument(
            f"--rate-{kind}",
            type=float,
            default=None,
            help=f"rate of {kind} (overrides --fault-rate)",
        )
    p.add_argument("--latency-ms", type=float, default=0.0)
    p.add_argument("--slow-tail-ms", type=float, default=2000.0)
    p.add_argument("--hang-s", type=float, default=600.0)
    p.add_argument("--retry-after-s", type=float, default=1.0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reply", default="auto", help='"auto" or a fixed content string')
    p.add_argument("--log", default=None, help="append one JSON line per request to this file")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        overrides = {f"rate_{kind}": getattr(args, f"rate_{kind}") for kind in ALL_KINDS}
        config = FaultConfig.from_fault_rate(
            args.fault_rate,
            **overrides,
            latency_ms=args.latency_ms,
            slow_tail_ms=args.slow_tail_ms,
            hang_s=args.hang_s,
            retry_after_s=args.retry_after_s,
            seed=args.seed,
            reply=args.reply,
            log_path=str(Path(args.log)) if args.log else None,
        )
        server = FaultServer(config, host=args.host, port=args.port)
    except (ValueError, ValidationError) as exc:
        message = exc.errors()[0]["msg"] if isinstance(exc, ValidationError) else str(exc)
        print(f"fault server: {message}", file=sys.stderr)
        return 2
    stop = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    try:
        url = server.start()
    except OSError as exc:
        print(f"fault server: cannot listen on {args.host}:{args.port}: {exc}", file=sys.stderr)
        return 2
    print(f"fault server at {url}", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
