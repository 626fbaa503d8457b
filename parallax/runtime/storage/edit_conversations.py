"""Speculative edit candidates' conversations, kept in the store for `parallax export`.

See docs/internals/storage.md#records-kept-for-a-resume.
"""

from __future__ import annotations

import json
from typing import Any, cast

from langgraph.store.base import BaseStore

from parallax.runtime.redaction import redact_value
from parallax.runtime.storage.namespaces import check_tenant, edit_conversations_namespace
from parallax.runtime.storage.store_calls import call_store
from parallax.state.trace_record import EditConversation


class EditConversations:
    """One plan run's edit candidates' conversations; without a store, nothing is kept (and nothing
    exported)."""

    def __init__(self, store: BaseStore | None, tenant: str, trace_id: str) -> None:
        self.store, self.namespace = (
            store,
            edit_conversations_namespace(check_tenant(tenant), trace_id),
        )

    async def save(self, key: str, conversation: dict[str, Any], limit_chars: int) -> str | None:
        """Keep `conversation` under `key`; the key, or None when there is no store to keep it in or
        it is longer than `limit_chars` (as JSON)."""
        if self.store is None or len(json.dumps(conversation, ensure_ascii=False)) > limit_chars:
            return None
        await call_store(
            self.store, "put", self.namespace, key, redact_value(conversation), index=False
        )
        return key

    async def load(self, key: str) -> EditConversation | None:
        if self.store is None:
            return None
        item = await call_store(self.store, "get", self.namespace, key)
        return cast(EditConversation, dict(item.value)) if item is not None else None
