"""PostgreSQL for a deployment: the store the CLI shares with the server, and locks across hosts.

See docs/internals/storage.md#advisory-locks.
"""

from __future__ import annotations

import asyncio
import hashlib
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import AbstractAsyncContextManager, asynccontextmanager, contextmanager
from typing import Any

from parallax.runtime.storage.namespaces import StoreError

MISSING_EXTRA = (
    "PostgreSQL support is not installed: pip install -e '.[postgres]' (or '.[server]'), "
    "or unset PARALLAX_DATABASE_URL to use SQLite"
)
SCHEMES = ("postgresql+psycopg://", "postgresql+asyncpg://", "postgres://")


def conninfo(url: str) -> str:
    """A libpq URL from any of the spellings deployments use (SQLAlchemy's driver suffixes,
    `postgres://`)."""
    for scheme in SCHEMES:
        if url.startswith(scheme):
            return "postgresql://" + url[len(scheme) :]
    if not url.startswith("postgresql://"):
        raise StoreError(
            f"not a PostgreSQL URL: {url.split('@')[-1]!r}: use"
            " postgresql://user@host:port/database"
        )
    return url


def lock_key(name: str) -> int:
    """The advisory lock key of `name`: a stable signed 64-bit number (Python's hash() is salted per
    process)."""
    return int.from_bytes(
        hashlib.blake2b(f"parallax:{name}".encode(), digest_size=8).digest(), "big", signed=True
    )


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise StoreError(MISSING_EXTRA) from None
    return psycopg


class LockTimeout(StoreError):
    """The lock stayed held by another holder for the whole timeout."""

    def __init__(self, name: str, timeout: float) -> None:
        super().__init__(
            f"timed out after {timeout:g}s waiting for the lock {name!r}: another writer holds it; "
            "retry when it is done"
        )


LockKey = str | tuple[int, str]
"""Which advisory lock: a name (the one 64-bit key `lock_key(name)`), or a pair (class, text): the
two-key lock (class, hashtext(text)), for a lock that SQL (a trigger) takes too."""


def _statements(key: LockKey) -> tuple[str, str, tuple[int | str, ...], str]:
    """How to try and to release the lock of `key`: the two statements, their parameters, and its
    name for errors."""
    if isinstance(key, str):
        return (
            "SELECT pg_try_advisory_lock(%s)",
            "SELECT pg_advisory_unlock(%s)",
            (lock_key(key),),
            key,
        )
    group, text = key
    return (
        "SELECT pg_try_advisory_lock(%s, hashtext(%s))",
        "SELECT pg_advisory_unlock(%s, hashtext(%s))",
        key,
        f"{text} (class {group:#x})",
    )


@asynccontextmanager
async def advisory_lock(url: str, key: LockKey, timeout: float) -> AsyncIterator[Any]:
    """Hold the advisory lock of `key` on a connection of its own, which it yields (the holder may
    run statements on it); LockTimeout after `timeout` seconds. The connection is closed on every
    way out.
    """
    psycopg = _psycopg()
    take, release, params, name = _statements(key)
    delay, deadline = 0.002, time.monotonic() + timeout
    async with await psycopg.AsyncConnection.connect(conninfo(url), autocommit=True) as conn:
        while not (await (await conn.execute(take, params)).fetchone())[0]:
            if time.monotonic() >= deadline:
                raise LockTimeout(name, timeout)
            await asyncio.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield conn
        finally:
            await conn.execute(release, params)


class PostgresCommitLock:
    """Excludes every holder of the same name on any host that uses this database."""

    def __init__(self, url: str, timeout: float = 120.0) -> None:
        self.conninfo, self.timeout = conninfo(url), timeout

    def hold(self, name: str) -> AbstractAsyncContextManager[Any]:
        return advisory_lock(self.conninfo, name, self.timeout)


@contextmanager
def held_sync(url: str, key: LockKey, timeout: float = 300.0) -> Iterator[None]:
    """The same lock for synchronous callers (migrations run outside any event loop)."""
    psycopg = _psycopg()
    take, release, params, name = _statements(key)
    delay, deadline = 0.002, time.monotonic() + timeout
    with psycopg.connect(conninfo(url), autocommit=True) as conn:
        while not conn.execute(take, params).fetchone()[0]:
            if time.monotonic() >= deadline:
                raise LockTimeout(name, timeout)
            time.sleep(delay)
            delay = min(delay * 2, 0.05)
        try:
            yield
        finally:
            conn.execute(release, params)


def postgres_url_of(store: Any, fallback: str | None = None) -> str | None:
    """The URL of a LangGraph Postgres store (also when wrapped), or None for any other store.
    A store on a connection pool knows its URL; one on a single connection gets `fallback`
    (its connection's dsn hides the password)."""
    for _ in range(4):
        if store is None:
            return None
        if type(store).__module__.startswith("langgraph.store.postgres"):
            return getattr(store.conn, "conninfo", None) or fallback
        store = getattr(store, "_store", None)
    return None


@asynccontextmanager
async def open_postgres_store(url: str) -> AsyncIterator[Any]:
    """langgraph's AsyncPostgresStore on `url` (a small pool), its tables set up under the migration
    lock."""
    _psycopg()
    try:
        from langgraph.store.postgres.aio import AsyncPostgresStore
    except ImportError:
        raise StoreError(MISSING_EXTRA) from None
    psycopg = _psycopg()
    try:
        async with AsyncPostgresStore.from_conn_string(
            conninfo(url), pool_config={"min_size": 1, "max_size": 4}
        ) as store:
            async with PostgresCommitLock(url).hold("migrate"):
                await store.setup()
            yield store
    except psycopg.OperationalError as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise StoreError(f"cannot use the database at {url.split('@')[-1]!r}: {first}") from None
