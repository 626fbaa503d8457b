"""The `labels` record: `production` and `canary` labels, and the gray release that moves them.

See docs/internals/storage.md#labels.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any, Literal, cast

from langgraph.store.base import BaseStore

from parallax.runtime.storage.commit_locks import CommitLock
from parallax.runtime.storage.store_calls import call_store
from parallax.runtime.timestamps import now_iso
from parallax.state.release_record import LabelEvent, LabelsRecord

KEY = "labels"
UNCHANGED = object()
"""Returned by a change that found nothing to do: nothing is written."""


def empty_labels() -> LabelsRecord:
    return {"production": None, "canary": None, "release": None, "releases": [], "events": []}


def as_labels(value: Any) -> LabelsRecord:
    """A stored labels record read back, keys it lacks filled from `empty_labels`."""
    return cast(LabelsRecord, {**empty_labels(), **dict(value)})


def move_label(
    labels: LabelsRecord,
    label: Literal["production", "canary"],
    to: int | None,
    by: str,
    why: str,
    release_id: str | None = None,
    share: float | None = None,
    decision: str | None = None,
) -> None:
    """Point `label` at version `to` (None removes it), recording who, why and when (and the
    release, share or decision that moved it, when given)."""
    event: LabelEvent = {
        "at": now_iso(),
        "label": label,
        "from": labels.get(label),
        "to": to,
        "by": by,
        "why": why,
    }
    if release_id is not None:
        event["release_id"] = release_id
    if share is not None:
        event["share"] = share
    if decision is not None:
        event["decision"] = decision
    labels["events"].append(event)
    labels[label] = to


class LabelStore:
    """The labels of one versioned thing (`namespace`); `what` names it in messages ("playbook
    'fin'")."""

    def __init__(
        self, store: BaseStore, namespace: tuple[str, ...], lock: CommitLock, what: str
    ) -> None:
        self.store, self.namespace, self.lock, self.what = store, namespace, lock, what

    async def get(self) -> LabelsRecord:
        """A copy of the record (an in-memory store hands out its own dict: a change must not edit
        it in place)."""
        item = await call_store(self.store, "get", self.namespace, KEY)
        return as_labels(copy.deepcopy(dict(item.value))) if item is not None else empty_labels()

    async def change(self, change: Callable[[LabelsRecord], Any]) -> tuple[LabelsRecord, Any]:
        """(record after, what `change` returned): `change` edits the record in place under the
        lock. It may raise (a StoreError to refuse: nothing is written) or return UNCHANGED (nothing
        to write).
        """
        async with self.lock.hold("labels/" + "/".join(self.namespace)):
            labels = await self.get()
            result = change(labels)
            if result is UNCHANGED:
                return labels, None
            await call_store(self.store, "put", self.namespace, KEY, labels, index=False)
            return labels, result
