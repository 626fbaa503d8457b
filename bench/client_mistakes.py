"""Client mistakes on every face of `parallax serve`: what the client saw, runs created, requests
sent (JSON).

Why: a client's mistake must come back as a client error in the face's own shape with the real
reason, create no run and provoke no retry (issue 31, item 3). This starts a throwaway deployment
as docs/deploy.md does (two `parallax serve` replicas on PostgreSQL and Redis, the scripted model
of testkit/fault_server.py) and makes each mistake of testkit/client_mistakes.py once,
with the face's official client: the openai SDK with its default retries, the MCP SDK's
Streamable HTTP client, langgraph-sdk. It prints one row per mistake (face, mistake, status,
shape, the field the error names, the message, runs_created, threads_left, requests_sent) and the
totals (goal: 0 runs, 0 threads, 1 request per mistake). tests/integration/test_deploy_mistakes.py
asserts the same rows.

    python -m bench.client_mistakes --json

Needs the server venv (Python 3.12, `pip install -e '.[server,test]'`), PostgreSQL and Redis.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
from dataclasses import asdict
from pathlib import Path

from testkit import client_mistakes as cm
from testkit import openai_checks
from testkit.aegra_cluster import Cluster, missing_services
from testkit.fault_server import FaultConfig, FaultServer


async def main() -> dict:
    from langgraph_sdk import get_client

    if missing := missing_services():
        raise SystemExit("bench.client_mistakes needs: " + "; ".join(missing))
    server = FaultServer(FaultConfig(latency_ms=20, reply=openai_checks.reply))
    env = {
        "OPENAI_BASE_URL": server.start(),
        "PARALLAX_RESPONSE_FORMAT": "json_schema",
        "PARALLAX_MODEL": "fault-model",
        "PARALLAX_API_KEYS": f"{cm.KEY}:{cm.TENANT},{cm.OTHER_KEY}:{cm.OTHER_TENANT}",
        "PARALLAX_STRAGGLER_FACTOR": "0",
    }
    try:
        with tempfile.TemporaryDirectory(prefix="bench-mistakes-") as tmp:
            cluster = Cluster(Path(tmp), env).create()
            try:
                a, b = cluster.start_replica(), cluster.start_replica()

                async def other_thread() -> str:
                    return str(
                        (await get_client(url=b.url, api_key=cm.OTHER_KEY).threads.create())[
                            "thread_id"
                        ]
                    )

                rows = await cm.make_mistakes(a.url, cluster.database_url, other_thread)
            finally:
                cluster.close()
    finally:
        server.stop()
    faces = sorted({r.face for r in rows})
    return {
        "mistakes": len(rows),
        "per_face": {f: sum(r.face == f for r in rows) for f in faces},
        "runs_created": sum(r.runs_created for r in rows),
        "threads_left": sum(r.threads_left for r in rows),
        "requests_sent": sum(r.requests_sent for r in rows),
        "status_5xx": sum(1 for r in rows if (r.status or 0) >= 500),
        "rows": [asdict(r) for r in rows],
    }


def cli() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--json", action="store_true", help="print the result as one JSON object (the default)"
    )
    parser.parse_args()
    print(json.dumps(asyncio.run(main())))


if __name__ == "__main__":
    cli()
