"""docs/deploy.md's commands and the clients of `parallax serve` in README.md and docs/, run as a
newcomer runs them.

Why: an example that does nothing (its calls left as comments, a result printed without its reason)
passes every test that only imports it, and the newcomer who pastes it learns nothing. Here
deploy.md's set-up block runs through bash as written, on the real services (PostgreSQL, Redis,
Aegra), with only what a second deployment on the same machine must change: the database's name, the
two ports, the venv's path (this one) and the Redis keys' prefix (deploy.md's own advice for sharing
a Redis). No model endpoint is set, as a newcomer forgets it: the replicas find the "embedded" model
where `parallax model serve` advertises it, a scripted stand-in (testkit/examples_model.py), and
must say they answer with the toy model. Then every client block that talks to `parallax serve`
(README: deploy_client.py, openai_client.py, mcp_http.py; deploy.md: the retry and 422 client, the
timeline's curl) runs in a fresh interpreter, and each must print what it says it prints: an example
that prints nothing fails as doing nothing.

The venv and pip lines of the block are .ci/run's step 4 (tests/unit/test_readme.py checks it runs
them as written); the CLI's commands of every page run in tests/integration/test_examples.py.
"""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest

from testkit.aegra_cluster import PG_ADMIN, free_port, missing_services
from testkit.examples_model import ExamplesModel
from testkit.fault_server import FaultConfig, FaultServer
from testkit.readme_examples import run_block

pytestmark = pytest.mark.deploy
ROOT = Path(__file__).resolve().parents[2]
DEPLOY = (ROOT / "docs" / "deploy.md").read_text()
INSTALLED_BY_CI = (
    "python3.12 -m venv .venv-server",
    ".venv-server/bin/pip install -c constraints/server.txt pip",
    ".venv-server/bin/pip install -c constraints/server.txt -e '.[server]'",
)
"""The block's lines that make the server venv: .ci/run step 4 runs them as written; here the venv
exists."""


def blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, re.S)


def setup_block() -> str:
    """deploy.md's first bash block: the server venv, the database, the variables and two
    replicas."""
    return blocks(DEPLOY, "bash")[0]


def prints_something(name: str, out: str) -> list[str]:
    """The lines an example printed; none means it did nothing (a call left as a comment)."""
    lines = out.strip().splitlines()
    assert lines, (
        f"{name} printed nothing: an example that does nothing (are its calls commented out?)"
    )
    return lines


class Deployment:
    def __init__(self, work: Path) -> None:
        self.work, self.db = work, f"parallax_docs_{uuid.uuid4().hex[:8]}"
        self.ports = (free_port(), free_port())
        self.log_path = work / "deploy-block.log"
        self.script: subprocess.Popen[bytes] | None = None

    def url(self, i: int = 0) -> str:
        return f"http://127.0.0.1:{self.ports[i]}"

    def as_here(self, text: str) -> str:
        """A block as this deployment runs it: its ports (2026, 2027), its database, this venv."""
        bin_dir = str(Path(sys.executable).parent)
        return (
            text.replace("2026", str(self.ports[0]))
            .replace("2027", str(self.ports[1]))
            .replace(".venv-server/bin/", bin_dir + "/")
            .replace("5432/parallax", f"5432/{self.db}")
            .replace("-U postgres parallax", f"-U postgres {self.db}")
        )

    def start(self, env: dict[str, str]) -> None:
        lines = [
            line for line in setup_block().splitlines() if not line.startswith(INSTALLED_BY_CI)
        ]
        assert len(lines) == len(setup_block().splitlines()) - len(INSTALLED_BY_CI), (
            "the venv lines changed"
        )
        script = "set -e\n" + self.as_here("\n".join(lines)) + "\n"
        with open(
            self.log_path, "wb"
        ) as log:  # the replicas' output too: a file, as under a service manager
            self.script = subprocess.Popen(
                ["bash", "-c", script],
                cwd=ROOT,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        try:
            code = self.script.wait(timeout=240)
        except subprocess.TimeoutExpired:
            code = None
        assert code == 0, f"deploy.md's block ended {code}:\n{self.log()[-4000:]}"
        from parallax.runtime.model_server import wait_for_200

        assert wait_for_200(f"{self.url(1)}/ready", 120, interval_s=0.5) == "ready", self.log()[
            -4000:
        ]

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def stop(self) -> None:
        if self.script is not None:
            try:
                os.killpg(
                    self.script.pid, signal.SIGTERM
                )  # the replicas the block started with `&`
            except ProcessLookupError:
                pass
        import psycopg

        with psycopg.connect(PG_ADMIN, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{self.db}" WITH (FORCE)')


@pytest.fixture(scope="module")
def deployment(tmp_path_factory):
    if missing := missing_services():
        pytest.fail("the deploy tests need these and they are missing: " + "; ".join(missing))
    work = tmp_path_factory.mktemp("documented")
    model = FaultServer(FaultConfig(reply=ExamplesModel()))
    url = model.start()
    home = work / "home"  # where `parallax model serve` would advertise the embedded model
    home.mkdir()
    (home / "model-server.json").write_text(
        json.dumps({"url": url, "pid": os.getpid(), "parallel": 5})
    )
    env = {
        k: v
        for k, v in os.environ.items()
        if not k.startswith(
            ("OPENAI_", "PARALLAX_", "DATABASE_URL", "REDIS_", "AEGRA_", "WORKER_QUEUE")
        )
    }
    deployment = Deployment(work)
    env.update(
        PARALLAX_HOME=str(home),
        PARALLAX_RESPONSE_FORMAT="json_schema",
        LOG_LEVEL="info",
        REDIS_CHANNEL_PREFIX=f"{deployment.db}:run:",
        WORKER_QUEUE_KEY=f"{deployment.db}:jobs",
    )
    try:
        deployment.start(env)
        yield deployment
    finally:
        deployment.stop()
        model.stop()


def test_the_setup_block_serves_two_replicas_that_say_they_answer_with_the_toy_model(deployment):
    log = deployment.log()
    said = [line for line in log.splitlines() if line.startswith("model: ")]
    assert (
        said
        == [
            "model: no OPENAI_BASE_URL, so runs use the embedded smollm2-135m-instruct: answered by"
            " the embedded SmolLM2-135M, a tiny test model that is often wrong: set OPENAI_BASE_URL"
            " (with OPENAI_API_KEY and PARALLAX_MODEL) to use a real model"
        ]
        * 2
    ), log[-3000:]
    # each replica says `ready` from a thread a moment after its /ready first answers 200, which the
    # block awaited
    deadline = time.monotonic() + 30
    while (
        not all(f"ready {deployment.url(i)}" in log for i in (0, 1)) and time.monotonic() < deadline
    ):
        time.sleep(0.2)
        log = deployment.log()
    assert f"ready {deployment.url(0)}" in log and f"ready {deployment.url(1)}" in log, log[-3000:]
    assert "\x1b[" not in log  # written to a file: plain text, no colour codes
    print(
        "\n".join(said), "\n/ok:", httpx.get(f"{deployment.url(0)}/ok", timeout=10).text
    )  # the evidence, with -s
    for i in (0, 1):
        ok = httpx.get(f"{deployment.url(i)}/ok", timeout=10).json()
        assert (
            ok["ok"] is True
            and ok["model"]["embedded"] is True
            and "often wrong" in ok["model"]["note"]
        )


def test_the_readmes_langgraph_sdk_client_runs_and_prints_the_run_with_its_reason(deployment):
    lines = prints_something(
        "deploy_client.py",
        run_block(deployment.as_here((ROOT / "examples" / "deploy_client.py").read_text())),
    )
    status, answer, trace_id = lines[0].split()
    assert (status, answer, len(trace_id)) == ("ok", "144", 32) and lines[
        1
    ] == "reason: none | vote counts: {'144': 3}"
    curl = next(line for line in blocks(DEPLOY, "bash") if "/timeline/TRACE_ID" in line).strip()
    done = subprocess.run(
        ["bash", "-c", deployment.as_here(curl).replace("TRACE_ID", trace_id)],
        cwd=deployment.work,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 0 and "<svg" in (deployment.work / "run.svg").read_text()[:400], (
        done.stderr
    )


def test_the_runs_output_carries_the_toy_model_note_on_every_face(deployment):
    from langgraph_sdk import get_client
    from openai import OpenAI

    from parallax.runtime.model_note import EMBEDDED_NOTE

    async def graph_api():
        client = get_client(url=deployment.url(1), api_key="key-acme")
        thread = await client.threads.create()
        return await client.runs.wait(
            thread["thread_id"], "solve", input={"task": "What is 6 * 7?", "mode": "direct"}
        )

    import asyncio

    out = asyncio.run(graph_api())
    assert (out["answer"], out["note"]) == ("42", EMBEDDED_NOTE)
    reply = OpenAI(base_url=f"{deployment.url(0)}/v1", api_key="key-acme").chat.completions.create(
        model="parallax-direct", messages=[{"role": "user", "content": "What is 6 * 7?"}]
    )
    assert reply.parallax["note"] == EMBEDDED_NOTE  # type: ignore[attr-defined]  # the reply's metadata
    print("\nreply.parallax:", json.dumps(reply.parallax), "\nruns.wait note:", out["note"])  # type: ignore[attr-defined]


def test_the_readmes_openai_client_runs_and_prints_the_answer_its_reason_and_the_parsed_object(
    deployment,
):
    lines = prints_something(
        "openai_client.py",
        run_block(deployment.as_here((ROOT / "examples" / "openai_client.py").read_text())),
    )
    assert lines == [
        "42 ok {'42': 3}",
        "reason: none",
        "vendor='ACME Tools' total=1250.5 paid=False",
    ]


def test_the_readmes_mcp_client_runs_and_prints_the_object_and_its_reason(deployment):
    lines = prints_something(
        "mcp_http.py",
        run_block(deployment.as_here((ROOT / "examples" / "mcp_http.py").read_text())),
    )
    assert lines[0].startswith("ok {'total': 41.5} ") and lines[1] == "reason: none"


def test_deploy_mds_client_retries_and_reads_the_reason_of_a_422(deployment):
    block = next(b for b in blocks(DEPLOY, "python") if "def retry_on_429" in b)
    lines = prints_something("docs/deploy.md's client", run_block(deployment.as_here(block)))
    assert lines[0] == "ok 144 reason: none"
    assert lines[1].startswith("422 votes ") and "0" in lines[1], (
        lines
    )  # the sentence the CLI and /v1 give too
