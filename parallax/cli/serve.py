"""`parallax serve`: one replica of the deployed graph API (Aegra on PostgreSQL and Redis).

Checks Aegra's version, takes the start-up lock, migrates, makes the patches, serves with uvicorn in
this process and prints `ready <url>` once it can take runs (docs/deploy.md).
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from contextlib import ExitStack
from pathlib import Path
from typing import Annotated

import typer

from parallax.cli.common import err, fail
from parallax.cli.endpoint import BaseUrl, Model, use_endpoint
from parallax.runtime import settings as settings_mod

PACKAGED_CONFIG = Path(__file__).resolve().parents[1] / "server" / "aegra.json"
"""The Aegra config installed with the package: its graph paths are relative to it
(server/graphs.py), the rest module paths, so it serves the installed package, from a wheel as from
a checkout."""
INSTALL_HINT = (
    "install the server extra in a Python 3.12 venv: pip install -e '.[server]' (docs/deploy.md)"
)


def default_config() -> Path:
    here = Path.cwd() / "aegra.json"
    return here if here.is_file() else PACKAGED_CONFIG


def migrate(url: str) -> float:
    """Aegra's, the checkpointer's, the store's and the fence's tables, under the lock "migrate"
    that the CLI's store set-up also takes (the caller holds the startup lock as well); seconds
    taken."""
    import asyncio

    from aegra_api.core.migrations import run_migrations
    from langgraph.checkpoint.postgres.aio import AsyncPostgresSaver
    from langgraph.store.postgres.aio import AsyncPostgresStore

    from parallax.runtime.storage.postgres import conninfo, held_sync

    async def setup_langgraph() -> None:
        async with AsyncPostgresSaver.from_conn_string(conninfo(url)) as saver:
            await saver.setup()
        async with AsyncPostgresStore.from_conn_string(conninfo(url)) as store:
            await store.setup()

    started = time.perf_counter()
    with held_sync(url, "migrate"):
        run_migrations()
        asyncio.run(setup_langgraph())
        migrate_platform(url)
        import psycopg

        from parallax.runtime.storage.lease_tables import migrate_sync

        with psycopg.connect(
            url, autocommit=True
        ) as conn:  # the lease fence's tables (server/lease_fence.py)
            migrate_sync(conn)
    return time.perf_counter() - started


def migrate_platform(url: str) -> None:
    """Parallax's own tables and triggers beside Aegra's (webhook outbox, run order per thread, the
    spend ledger), and this configuration's tenant daily budgets (PARALLAX_DAILY_BUDGETS) where the
    cron-run trigger reads them.
    """
    import psycopg

    from parallax.runtime.storage import platform_schema, spend_ledger
    from parallax.runtime.storage.postgres import conninfo

    with psycopg.connect(conninfo(url)) as conn:
        platform_schema.migrate(conn)
        with conn.transaction():
            spend_ledger.write_budgets(conn, settings_mod.load().tenant_daily_budgets)


def configure_ttl(settings: settings_mod.Settings, config: Path) -> None:
    """Aegra's thread TTL on (AEGRA_THREAD_TTL, unless the operator configured Aegra's own) and the
    store's `ttl` checked, before anything starts: a bad `store.ttl` is one line and exit 2
    (runtime/ttl_config.py).
    """
    import json

    from parallax.runtime.ttl_config import store_ttl, thread_ttl_env

    try:
        served = json.loads(config.read_text())
    except (OSError, ValueError) as exc:
        fail(f"cannot read the Aegra config {config}: {exc}")
    if not isinstance(served, dict):
        fail(f"the Aegra config {config} is not a JSON object")
    store = served.get("store")
    try:
        store_ttl(settings, store.get("ttl") if isinstance(store, dict) else None)
    except ValueError as exc:
        fail(f"{exc} (in {config}; docs/retention.md)")
    if (thread_ttl := thread_ttl_env(settings, served, os.environ)) is not None:
        os.environ["AEGRA_THREAD_TTL"] = thread_ttl


def check_versions(allow_untested: bool) -> None:
    """Print the installed Aegra and LangGraph with their tested ranges; refuse untested ones (exit
    2) unless allowed."""
    from parallax.runtime import served_versions

    untested = served_versions.untested()
    if untested and not allow_untested:
        fail(served_versions.refusal(untested))
    err.print(
        ("running on UNTESTED versions: " if untested else "") + served_versions.summary(),
        highlight=False,
        soft_wrap=True,
    )


def announce_ready(url: str, starting: ExitStack, timeout_s: float = 300.0) -> None:
    """Print `ready <url>` on stderr once /ready answers 200, then release the startup lock
    (from a thread beside the server; after `timeout_s` the lock is released all the same)."""
    from parallax.runtime.model_server import wait_for_200

    try:
        if wait_for_200(f"{url}/ready", timeout_s, interval_s=0.2) == "ready":
            print(f"ready {url} (pid {os.getpid()})", file=sys.stderr, flush=True)
    finally:
        starting.close()


def model_line() -> str:
    """What this replica's runs answer with, said once at start: the embedded toy model loudly, else
    the endpoint."""
    from parallax.runtime.model_note import model_in_use

    using = model_in_use()
    if using["embedded"]:
        return (
            f"model: no OPENAI_BASE_URL, so runs use the embedded {using['model']}: {using['note']}"
        )
    return f"model: {using['model']}" + (f" at {using['endpoint']}" if using["endpoint"] else "")


def serve(
    host: Annotated[
        str, typer.Option(help="Interface to listen on (0.0.0.0 for every one).")
    ] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 2026,
    config: Annotated[
        Path | None,
        typer.Option(help="Aegra config (default: ./aegra.json, else the installed package's)."),
    ] = None,
    model: Model = None,
    base_url: BaseUrl = None,
    allow_untested_aegra: Annotated[
        bool,
        typer.Option(
            "--allow-untested-aegra",
            help="Start on an Aegra or LangGraph outside the tested ranges (a patch whose target "
            "changed is left out).",
        ),
    ] = False,
) -> None:
    """Serve the graphs over HTTP with Aegra on PostgreSQL (DATABASE_URL) and Redis (REDIS_URL):
    migrate, then serve."""
    use_endpoint(
        None, model, base_url
    )  # for the life of this replica: its runs call that endpoint and model
    if allow_untested_aegra:  # the app factory and the lifespan read it from the settings
        os.environ["PARALLAX_ALLOW_UNTESTED_AEGRA"] = "true"
        settings_mod.reload_settings()
    settings = settings_mod.load()
    url = os.environ.get("DATABASE_URL") or settings.database_url
    if not url:
        fail(
            "set DATABASE_URL (or PARALLAX_DATABASE_URL) to the PostgreSQL database, e.g. "
            "postgresql://postgres@127.0.0.1:5432/parallax"
        )
    if not settings.api_keys and not settings.jwt_jwks:
        fail(
            "set PARALLAX_API_KEYS=key:tenant[,key2:tenant2] (every request needs a key, and the"
            " key names its tenant), or PARALLAX_JWT_JWKS with PARALLAX_JWT_ISSUER and"
            " PARALLAX_JWT_AUDIENCE for your identity provider's JWTs"
        )
    if settings.jwt_jwks and not (settings.jwt_issuer and settings.jwt_audience):
        fail(
            "PARALLAX_JWT_JWKS is set: set PARALLAX_JWT_ISSUER and PARALLAX_JWT_AUDIENCE too (every"
            " JWT's iss and aud are checked against them)"
        )
    from parallax.runtime.storage.namespaces import StoreError
    from parallax.runtime.storage.postgres import conninfo, held_sync

    try:
        url = conninfo(url)
        settings.api_key_tenants  # noqa: B018  (a bad entry raises here, before anything starts)
        settings.tenant_daily_budgets  # noqa: B018  (and so does a bad daily budget)
    except (StoreError, settings_mod.SettingsError) as exc:
        fail(str(exc))
    config = (config or default_config()).resolve()
    if not config.is_file():
        fail(
            f"no Aegra config at {config}: pass --config with the path of an aegra.json"
            " (docs/deploy.md)"
        )
    try:
        import aegra_api  # noqa: F401
        import uvicorn
    except ImportError:
        fail(
            "Aegra is not installed here (Python"
            f" {sys.version_info.major}.{sys.version_info.minor}): {INSTALL_HINT}"
        )
    check_versions(settings.allow_untested_aegra)
    configure_ttl(settings, config)
    redis = os.environ.get("REDIS_URL")
    os.environ.update(
        {
            "DATABASE_URL": url,
            "AEGRA_CONFIG": str(config),
            "RUN_MIGRATIONS_ON_STARTUP": "false",
            "HOST": host,
            "PORT": str(port),
        }
    )
    os.environ.setdefault("ENABLE_PROMETHEUS_METRICS", "true")
    os.environ.setdefault("REDIS_BROKER_ENABLED", "true" if redis else "false")
    if not redis:
        err.print(
            "no REDIS_URL: this replica runs alone (runs are not shared with or taken over by other"
            " replicas)"
        )
    starting = ExitStack()
    try:
        starting.enter_context(held_sync(url, "startup"))
        seconds = migrate(url)
    except (
        Exception
    ) as exc:  # a database that cannot be reached or migrated: one line, not a traceback
        starting.close()
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
        fail(f"cannot migrate the database at {url.split('@')[-1]!r}: {first}", code=1)
    err.print(f"migrated {url.split('@')[-1]} in {seconds:.1f}s; serving {config} on {host}:{port}")
    err.print(model_line(), highlight=False, markup=False, soft_wrap=True)
    here = "127.0.0.1" if host in ("0.0.0.0", "::") else host  # nosec B104 # a comparison: which address to poll
    threading.Thread(
        target=announce_ready, args=(f"http://{here}:{port}", starting), daemon=True
    ).start()
    # uvicorn shuts down gracefully on SIGTERM, then re-raises the signal with the handler it found:
    # exit through Python then, so atexit stops the embedded model server this replica may have
    # started
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(128 + signal.SIGTERM))
    from parallax.runtime.plain_logs import plain_aegra_logs

    plain_aegra_logs(
        sys.stdout
    )  # Aegra logs to stdout, in colour even into a file: plain text there
    uvicorn.run(
        "parallax.server.aegra_patches:serving_app",
        factory=True,
        host=host,
        port=port,
        log_level=os.environ.get("LOG_LEVEL", "info").lower(),
    )
