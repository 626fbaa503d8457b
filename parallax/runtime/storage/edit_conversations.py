"""Speculative edit candidates' conversations, kept in the store when each candidate ends.

Why in the store and not in the plan's state: a conversation holds every file the agent read and
wrote, and the plan's state rides in every checkpoint and every API result. The plan trace's task
records name them instead (`edit.candidates[].conversation`, a key here), and `parallax export`
reads them (logic/exports.py). Namespace ("edit_conversations", tenant, plan trace id), key
"<round>.<candidate id>" (a task run again in a later round makes candidates of the same ids).
Redacted before they are stored, like the trace that names them (runtime/redaction.py), and kept
whole or not at all, as a trace keeps its prompts: a conversation longer than
PARALLAX_TRACE_PROMPT_CHARS (the files an agent read and wrote are in it) is not kept, and its
candidate exports nothing (counted: "edit conversation not kept").
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
    """One plan run's edit candidates' conversations; without a store, nothing is kept (and nothing exported)."""

    def __init__(self, store: BaseStore | None, tenant: str, trace_id: str) -> None:
        self.store, self.namespace = store, edit_conversations_namespace(check_tenant(tenant), trace_id)

    async def save(self, key: str, conversation: dict[str, Any], limit_chars: int) -> str | None:
        """Keep `conversation` under `key`; the key, or None when there is no store to keep it in or it is longer
        than `limit_chars` (as JSON)."""
        if self.store is None or len(json.dumps(conversation, ensure_ascii=False)) > limit_chars:
            return None
        await call_store(self.store, "put", self.namespace, key, redact_value(conversation), index=False)
        return key

    async def load(self, key: str) -> EditConversation | None:
        if self.store is None:
            return None
        item = await call_store(self.store, "get", self.namespace, key)
        return cast(EditConversation, dict(item.value)) if item is not None else None
