"""Calls to any LangGraph `BaseStore`, sync or async, read page by page.

See docs/internals/storage.md#calling-any-store.
"""

from __future__ import annotations

import asyncio
from typing import Any

from langgraph.store.base import BaseStore

PAGE = 100


async def call_store(store: BaseStore, method: str, *args: Any, **kwargs: Any) -> Any:
    """`store.a<method>(...)`, or `store.<method>(...)` in a thread when the store is sync-only."""
    try:
        return await getattr(store, "a" + method)(*args, **kwargs)
    except NotImplementedError:
        return await asyncio.to_thread(getattr(store, method), *args, **kwargs)


async def scan(
    store: BaseStore, namespace: tuple[str, ...], page_size: int = PAGE
) -> dict[str, dict[str, Any]]:
    """Every record directly in `namespace` (not in namespaces below it), key -> value."""
    found: dict[str, dict[str, Any]] = {}
    offset = 0
    while True:
        page = await call_store(store, "search", namespace, limit=page_size, offset=offset)
        for item in page:
            if tuple(item.namespace) == namespace:
                found[item.key] = dict(item.value)
        if len(page) < page_size:
            return found
        offset += page_size
