"""The installed wheel works on its own: run by a fresh venv's Python, from a folder outside the
checkout (.ci/run).

    python installed_smoke.py CHECKOUT [--server]

Why: an editable install sees the checkout, so CI on it never saw a wheel that missed a package.
Here the venv holds the wheel (with its `mcp` extra; with `--server`, the `server` extra too) and
the two model wheels, and this script, copied out of the checkout, checks what a user of the
installed package does:

1. `parallax run "..." --json` on the embedded model (the README's first command);
2. `parallax.solve` against a scripted OpenAI-compatible server (below, stdlib only: nothing of the
   checkout's tests/ or testkit/ is imported, and the script refuses to run if `parallax` comes from
   the checkout);
3. `parallax mcp` over stdio, driven by the MCP SDK's client, against the same server;
4. the graphs loaded as `langgraph dev` loads module paths (`parallax.graphs.solve:graph`: the
   langgraph.json docs/graph-api.md gives for an installed package) and, with `--server`, as Aegra
   loads the installed package's own aegra.json for `parallax serve` (graph files relative to the
   config, the auth and app modules by module path).

One line per check on stdout with its seconds; any failure raises (exit 1).
"""

from __future__ import annotations

import asyncio
import importlib
import importlib.util
import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

CHECKOUT = Path(sys.argv[1]).resolve()
SERVER = "--server" in sys.argv[2:]
PARALLAX = Path(sys.executable).with_name("parallax")
ANSWER = "22"
TASK = "A farmer has 17 sheep and buys 5 more. How many sheep does he have?"


def instance(schema: dict[str, Any], root: dict[str, Any], name: str = "") -> Any:
    """A small instance of a JSON schema (required keys only), answering ANSWER where a key is an
    answer."""
    if "$ref" in schema:
        return instance(root["$defs"][schema["$ref"].rsplit("/", 1)[1]], root, name)
    for key in ("anyOf", "oneOf", "allOf"):
        if key in schema:
            options = [s for s in schema[key] if s.get("type") != "null"] or schema[key]
            return instance(options[0], root, name)
    if "const" in schema:
        return schema["const"]
    if schema.get("enum"):
        return schema["enum"][0]
    kind = schema.get("type", "object")
    kind = next((k for k in kind if k != "null"), "string") if isinstance(kind, list) else kind
    if kind == "object":
        properties = schema.get("properties", {})
        return {
            key: instance(properties.get(key, {}), root, key) for key in schema.get("required", [])
        }
    if kind == "array":
        return [
            instance(schema.get("items", {}), root, name)
            for _ in range(max(1, schema.get("minItems", 1)))
        ]
    if kind in ("integer", "number"):
        return max(1, schema.get("minimum", 1))
    if kind == "boolean":
        return True
    return ANSWER if name in ("answer", "choice") else "ok"


class ScriptedModel(BaseHTTPRequestHandler):
    """`POST /v1/chat/completions`: the schema's instance (response_format), as an OpenAI chat
    completion."""

    calls = 0

    def do_POST(self) -> None:  # noqa: N802 - http.server's name
        body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
        form = body.get("response_format") or {}
        schema = form.get("schema") or (form.get("json_schema") or {}).get("schema")
        content = json.dumps(instance(schema, schema)) if schema else json.dumps({"answer": ANSWER})
        ScriptedModel.calls += 1
        reply = {
            "id": f"chatcmpl-{ScriptedModel.calls}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body.get("model", "scripted"),
            "choices": [
                {
                    "index": 0,
                    "finish_reason": "stop",
                    "message": {"role": "assistant", "content": content},
                }
            ],
            "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15},
        }
        data = json.dumps(reply).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: Any) -> None:
        pass


def timed(label: str, check: Any) -> None:
    started = time.perf_counter()
    said = check()
    print(f"installed smoke: {label}: {said} ({time.perf_counter() - started:.1f} s)", flush=True)


def installed_not_checkout() -> str:
    import parallax
    import parallax.graphs

    where = [Path(parallax.__file__).resolve(), Path(parallax.graphs.__file__).resolve()]
    assert all(CHECKOUT not in path.parents for path in where), (
        f"parallax imported from the checkout: {where}"
    )
    assert all("site-packages" in path.parts for path in where), where
    assert not (Path.cwd() / "parallax").exists() and CHECKOUT not in Path.cwd().parents
    from importlib.metadata import distribution

    installed = distribution(
        "parallax-graph"
    )  # the distribution's name; `parallax` on PyPI is another project
    assert installed.read_text("top_level.txt") in (None, "parallax\n"), installed.read_text(
        "top_level.txt"
    )
    return f"parallax (distribution parallax-graph {installed.version}) from {where[0].parent}"


def main_job() -> str:
    done = subprocess.run(
        [str(PARALLAX), "run", TASK, "--json"],
        capture_output=True,
        text=True,
        timeout=900,
        env={
            k: v for k, v in os.environ.items() if not k.startswith(("OPENAI_", "PARALLAX_MODEL"))
        },
    )
    assert done.returncode in (0, 1), done.stderr[
        -2000:
    ]  # the toy model may fail the task; the job must run
    result = json.loads(done.stdout)
    assert result["status"] in ("ok", "needs_review", "failed") and result["branches"], result
    return (
        f"{result['status']} ({result['mode']}, {len(result['branches'])} branches)"
        f" answer={result['answer'][:40]!r}"
    )


def python_api() -> str:
    import parallax

    result = parallax.solve(TASK, mode="vote", votes=3)
    assert (result.status, result.answer, result.vote_counts) == ("ok", ANSWER, {ANSWER: 3}), result
    assert sorted(b.kind for b in result.branches) == [
        "safety",
        "vote",
        "vote",
        "vote",
    ], result.branches
    return f"{result.status}, answer {result.answer}, votes {result.vote_counts}"


def mcp_stdio() -> str:
    from mcp import Client
    from mcp.client.stdio import StdioServerParameters

    async def talk() -> tuple[list[str], dict[str, Any]]:
        server = StdioServerParameters(command=str(PARALLAX), args=["mcp"], env=dict(os.environ))
        async with Client(server) as client:
            tools = sorted(t.name for t in (await client.list_tools()).tools)
            voted = await client.call_tool("solve", {"task": TASK, "mode": "vote", "votes": 3})
            assert not voted.is_error, voted.content
            return tools, voted.structured_content

    tools, run = asyncio.run(talk())
    assert tools == ["feedback", "plan", "solve"] and (run["status"], run["answer"]) == (
        "ok",
        ANSWER,
    ), (tools, run)
    return f"tools {tools}, solve {run['status']} answer {run['answer']}"


def langgraph_dev_graphs() -> str:
    """The module-path langgraph.json of docs/graph-api.md, as written there: the same graphs as the
    checkout's langgraph.json (file paths), each loaded as langgraph_api loads 'my.module:variable'.
    """
    doc = (CHECKOUT / "docs" / "graph-api.md").read_text()
    block = next(
        b.split("\n", 1)[1] for b in doc.split("```json")[1:] if "parallax.graphs.solve:graph" in b
    )
    config = json.loads(block.split("```")[0])
    assert set(config["graphs"]) == set(
        json.loads((CHECKOUT / "langgraph.json").read_text())["graphs"]
    )
    for graph_id, path in config["graphs"].items():
        module, attr = path.split(":")
        graph = getattr(importlib.import_module(module), attr)
        assert hasattr(graph, "ainvoke") and hasattr(graph, "get_graph"), (graph_id, graph)
    module, attr = config["http"]["app"].split(":")
    assert getattr(importlib.import_module(module), attr) is not None
    return (
        f"{len(config['graphs'])} graphs by module path ({', '.join(config['graphs'])}) and"
        f" {module}:{attr}"
    )


def aegra_graphs() -> str:
    from parallax.cli.serve import PACKAGED_CONFIG, default_config

    assert default_config() == PACKAGED_CONFIG and "site-packages" in PACKAGED_CONFIG.parts, (
        PACKAGED_CONFIG
    )
    config = json.loads(PACKAGED_CONFIG.read_text())
    assert "dependencies" not in config
    for graph_id, path in config[
        "graphs"
    ].items():  # Aegra: a file relative to the config, under its own name
        file, attr = path.rsplit(":", 1)
        spec = importlib.util.spec_from_file_location(
            f"aegra_graphs.{graph_id}", PACKAGED_CONFIG.parent / file
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[spec.name] = module
        spec.loader.exec_module(module)
        assert hasattr(getattr(module, attr), "ainvoke"), graph_id
    for spec_text in (config["auth"]["path"], config["http"]["app"]):
        module_name, attr = spec_text.split(":")
        assert getattr(importlib.import_module(module_name), attr) is not None, spec_text
    return f"{len(config['graphs'])} graphs from {PACKAGED_CONFIG}, auth and app by module path"


def main() -> None:
    timed("import", installed_not_checkout)
    timed("main job on the embedded model", main_job)
    httpd = ThreadingHTTPServer(("127.0.0.1", 0), ScriptedModel)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    os.environ.update(
        {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{httpd.server_port}/v1",
            "OPENAI_API_KEY": "scripted",
            "PARALLAX_MODEL": "scripted",
            "PARALLAX_RESPONSE_FORMAT": "json_schema",
            "PARALLAX_STRAGGLER_FACTOR": "0",
            "LANGSMITH_TRACING": "false",
        }
    )
    try:
        timed("parallax.solve against a scripted server", python_api)
        timed("parallax mcp over stdio", mcp_stdio)
    finally:
        httpd.shutdown()
    timed("graphs as langgraph dev loads them", langgraph_dev_graphs)
    if SERVER:
        timed("graphs as parallax serve (Aegra) loads them", aegra_graphs)


if __name__ == "__main__":
    os.environ.setdefault("PARALLAX_HOME", tempfile.mkdtemp(prefix="parallax-smoke-home-"))
    main()
