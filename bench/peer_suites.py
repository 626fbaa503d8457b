"""The peer projects' own test suites against `parallax serve` (and langgraph-sdk's against
`langgraph dev`).

Why: "conforms to the Agent Protocol" is only worth what the clients' own tests say. This runs,
unchanged, from checkouts given on the command line (it fetches nothing, and copies nothing
into this repository):

- langgraph-sdk's integration suite (`libs/sdk-py/tests/integration` of a LangGraph checkout)
  against `parallax serve` with the suite's sample graphs (`libs/sdk-py/integration/graph`)
  served beside Parallax's, and the same suite against `langgraph dev` serving those graphs
  (`sdk_on_langgraph_dev`, the baseline: the in-memory langgraph-api the SDK is developed
  against), in the same run;
- Aegra's e2e suite (`libs/aegra-api/tests/e2e` of an Aegra checkout) against `parallax serve`
  with Aegra's sample graphs (`examples/`, their model answered by bench/peer_model.py).

Each `parallax serve` gets a temporary Aegra config outside the repository (Parallax's
aegra.json with the suite's graphs added, paths made absolute; auth, store scopes and the HTTP
app stay Parallax's), a throwaway PostgreSQL database and Redis keys (testkit/aegra_cluster.py),
and one API key. The suites need two things they do not get from `parallax serve` as shipped,
given by bench/peer_plugin.py without editing them: the API key on every request, and
test_remote_graph_v3.py's hard-coded http://localhost:2024 pointed at the server. Aegra's
suite is run with `-m "e2e and not auth_only"` minus its multi-instance stress files (they
start servers of their own), as its pytest.ini runs it.

    python -m bench.peer_suites --langgraph ~/src/langgraph --aegra ~/src/aegra --json

Prints JSON: per suite `passed`, `failed`, `skipped`, `errors`, `total` and `failures` (test id:
first line of its reason). Needs the server venv (Python 3.12, `pip install -e '.[server,test]'`),
PostgreSQL and Redis, and the suites' own graph dependencies: `pip install 'langchain>=1.3'
'deepagents>=0.6.2'` (langgraph-sdk's sample graphs; its Dockerfile installs the same).
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from testkit.aegra_cluster import ROOT, Cluster, config_with, free_port, missing_services

TENANT, KEY = "peer", "key-peer"
SDK_GRAPHS = Path("libs/sdk-py/integration")
AEGRA_TESTS = Path("libs/aegra-api/tests/e2e")
AEGRA_SKIP = ["multi_instance", "manual_auth_tests"]  # servers of their own / the auth-only tests


def suite_graphs(suite_config: Path) -> dict[str, str]:
    """The graphs a suite's langgraph.json / aegra.json serves, paths absolute."""
    theirs = json.loads(suite_config.read_text())
    return {
        name: f"{(suite_config.parent / spec.partition(':')[0]).resolve()}:{spec.partition(':')[2]}"
        for name, spec in theirs["graphs"].items()
    }


def suite_paths(suite_config: Path) -> list[str]:
    """The suite's own `dependencies` (import roots of its graphs), absolute."""
    theirs = json.loads(suite_config.read_text())
    return [str((suite_config.parent / dep).resolve()) for dep in theirs.get("dependencies", [])]


def run_pytest(
    cwd: Path,
    targets: list[str],
    extra: list[str],
    env: dict[str, str],
    junit: Path,
    timeout_s: float,
) -> dict[str, Any]:
    """pytest on a peer suite with bench/peer_plugin.py loaded; the counts and failures from its
    JUnit XML."""
    command = [
        sys.executable,
        "-m",
        "pytest",
        *targets,
        "-p",
        "bench.peer_plugin",
        "-o",
        "addopts=",
        "-p",
        "no:cacheprovider",
        "-q",
        "--junitxml",
        str(junit),
        *extra,
    ]
    started = time.monotonic()
    done = subprocess.run(
        command,
        cwd=cwd,
        env={**env, "PYTHONPATH": os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")])},
        capture_output=True,
        text=True,
        timeout=timeout_s,
    )
    result = junit_counts(junit) if junit.is_file() else {}
    if not result.get("total"):
        result["error"] = done.stdout[-3000:] + done.stderr[-3000:]
    result["seconds"] = round(time.monotonic() - started, 1)
    result["command"] = " ".join(command)
    return result


def junit_counts(junit: Path) -> dict[str, Any]:
    counts = {"passed": 0, "failed": 0, "errors": 0, "skipped": 0}
    failures: dict[str, str] = {}
    for case in ET.parse(junit).getroot().iter("testcase"):
        name = f"{case.get('classname', '').split('.')[-1]}::{case.get('name')}"
        outcome = next(
            (child for child in case if child.tag in ("failure", "error", "skipped")), None
        )
        if outcome is None:
            counts["passed"] += 1
            continue
        kind = {"failure": "failed", "error": "errors", "skipped": "skipped"}[outcome.tag]
        counts[kind] += 1
        if kind != "skipped":
            message = (outcome.get("message") or outcome.text or "").strip().splitlines()
            failures[name] = (message[0] if message else "")[:300]
    return {**counts, "total": sum(counts.values()), "failures": failures}


def serve(work: Path, suite_config: Path, env: dict[str, str], tenant: str = TENANT) -> Cluster:
    """One replica serving the suite's graphs beside Parallax's, and the store scopes its config
    names."""
    scopes = json.loads(suite_config.read_text()).get("store", {}).get("scopes")
    config = config_with(work, suite_graphs(suite_config), scopes)
    pythonpath = os.pathsep.join(suite_paths(suite_config) + [os.environ.get("PYTHONPATH", "")])
    cluster = Cluster(
        work / "cluster",
        {
            "PARALLAX_API_KEYS": f"{KEY}:{tenant}",
            "PYTHONPATH": pythonpath,
            "PARALLAX_MAX_PENDING": "1000",
            **env,
        },
        config=config,
    ).create()
    cluster.start_replica(timeout_s=180)
    return cluster


def client_env(url: str) -> dict[str, str]:
    return {
        **os.environ,
        "LANGGRAPH_INTEGRATION_URL": url,
        "PARALLAX_PEER_URL": url,
        "PARALLAX_PEER_KEY": KEY,
        "LANGGRAPH_API_KEY": KEY,
        "SERVER_URL": url,
    }


def sdk_on_parallax(langgraph: Path, work: Path) -> dict[str, Any]:
    # Parallax's own graphs are not run by this suite: their model endpoint points nowhere
    cluster = serve(
        work,
        langgraph / SDK_GRAPHS / "langgraph.json",
        {"OPENAI_BASE_URL": "http://127.0.0.1:9/v1", "OPENAI_API_KEY": "unused"},
    )
    try:
        return run_pytest(
            langgraph / "libs/sdk-py",
            ["tests/integration"],
            ["-m", "integration"],
            client_env(cluster.replicas[0].url),
            work / "sdk-parallax.xml",
            1800,
        )
    finally:
        cluster.close()


def sdk_on_langgraph_dev(langgraph: Path, work: Path) -> dict[str, Any]:
    """langgraph dev resolves the config's paths from its working directory (the suite's
    integration/ folder, where its in-memory state, .langgraph_api/, lands too)."""
    port, config = free_port(), langgraph / SDK_GRAPHS / "langgraph.json"
    cli = Path(sys.executable).with_name("langgraph")
    log = open(work / "langgraph-dev.log", "wb")  # noqa: SIM115 - closed below
    process = subprocess.Popen(
        [
            str(cli),
            "dev",
            "--config",
            str(config),
            "--port",
            str(port),
            "--host",
            "127.0.0.1",
            "--no-browser",
            "--no-reload",
        ],
        cwd=config.parent,
        stdout=log,
        stderr=subprocess.STDOUT,
        env={**os.environ, "LANGSMITH_TRACING": "false", "LANGGRAPH_NO_ANALYTICS": "1"},
        start_new_session=True,
    )
    url = f"http://127.0.0.1:{port}"
    try:
        from parallax.runtime.model_server import wait_for_200

        if wait_for_200(f"{url}/ok", 180, alive=lambda: process.poll() is None) != "ready":
            return {
                "error": (
                    "langgraph dev did not start: "
                    + (work / "langgraph-dev.log").read_text()[-2000:]
                )
            }
        return run_pytest(
            langgraph / "libs/sdk-py",
            ["tests/integration"],
            ["-m", "integration"],
            client_env(url),
            work / "sdk-dev.xml",
            1800,
        )
    finally:
        from testkit.processes import stop_group

        stop_group(process)
        log.close()


def aegra_on_parallax(aegra: Path, work: Path) -> dict[str, Any]:
    from bench import peer_model

    model_port = free_port()
    model = peer_model.start(model_port)
    # the key's tenant is "anonymous": Aegra's identity without auth, which its tests that write
    # runs straight into the database give those runs (another tenant's runs are 404, as they should
    # be)
    cluster = serve(
        work,
        aegra / "aegra.json",
        {
            "OPENAI_BASE_URL": f"http://127.0.0.1:{model_port}/v1",
            "OPENAI_API_KEY": "unused",
            "CRON_ENABLED": "true",
        },
        "anonymous",
    )
    try:
        tests = aegra / AEGRA_TESTS
        ignore = [f"--ignore={tests / name}" for name in AEGRA_SKIP]
        # some of its tests read and write the server's database directly (settings.db.database_url)
        env = {**client_env(cluster.replicas[0].url), "DATABASE_URL": cluster.database_url}
        return run_pytest(
            aegra / "libs/aegra-api",
            ["tests/e2e"],
            ["-m", "e2e and not auth_only", *ignore],
            env,
            work / "aegra.xml",
            2400,
        )
    finally:
        cluster.close()
        model.should_exit = True


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--langgraph", type=Path, help="a checkout of langchain-ai/langgraph")
    parser.add_argument("--aegra", type=Path, help="a checkout of Aegra")
    parser.add_argument(
        "--only",
        choices=["sdk", "dev", "aegra"],
        action="append",
        help="run only these (repeatable; default: every suite whose checkout is given)",
    )
    parser.add_argument("--json", action="store_true", help="print only the JSON result")
    args = parser.parse_args()
    if missing := missing_services():
        sys.exit("missing: " + "; ".join(missing))
    wanted = set(args.only or ["sdk", "dev", "aegra"])
    results: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="parallax-peer-") as tmp:
        work = Path(tmp)
        if args.langgraph and "sdk" in wanted:
            results["sdk_on_parallax_serve"] = sdk_on_parallax(
                args.langgraph.resolve(), work / "sdk"
            )
        if args.langgraph and "dev" in wanted:
            (work / "dev").mkdir()
            results["sdk_on_langgraph_dev"] = sdk_on_langgraph_dev(
                args.langgraph.resolve(), work / "dev"
            )
        if args.aegra and "aegra" in wanted:
            results["aegra_e2e_on_parallax_serve"] = aegra_on_parallax(
                args.aegra.resolve(), work / "aegra"
            )
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
