"""Versioned node prompts: immutable versions of each template, a head, rejected edits, labels.

See docs/internals/storage.md#prompts.
"""

from __future__ import annotations

import uuid
from typing import Any

from langgraph.store.base import BaseStore, GetOp

from parallax.prompts.templates import DEFAULTS, problems
from parallax.runtime.storage.commit_locks import CommitLock, LocalLock
from parallax.runtime.storage.labels import KEY as LABELS_KEY
from parallax.runtime.storage.labels import LabelStore, as_labels, empty_labels
from parallax.runtime.storage.namespaces import NotFound, StoreError, check_tenant
from parallax.runtime.storage.store_calls import call_store, scan
from parallax.runtime.timestamps import now_iso
from parallax.state.release_record import LabelsRecord


def prompt_namespace(tenant: str, name: str) -> tuple[str, str, str]:
    return ("prompts", tenant, name)


def check_prompt_name(name: str) -> str:
    if name not in DEFAULTS:
        raise StoreError(f"unknown prompt {name!r}: use one of {', '.join(DEFAULTS)}")
    return name


def default_version(name: str) -> dict[str, Any]:
    """Version 0: the template in prompts/templates.py."""
    return {
        "name": name,
        "version": 0,
        "parent": None,
        **DEFAULTS[name].text(),
        "created_by": "code",
        "created_at": "",
        "gate": {},
        "note": "default template (prompts/templates.py)",
    }


def _key(version: int) -> str:
    return f"v{version:06d}"


class PromptStore:
    """One tenant's prompt versions over a LangGraph `BaseStore`. All methods are async."""

    def __init__(
        self, store: BaseStore, lock: CommitLock | None = None, tenant: str = "default"
    ) -> None:
        self.store, self.lock, self.tenant = store, lock or LocalLock(), check_tenant(tenant)

    def _ns(self, name: str) -> tuple[str, str, str]:
        return prompt_namespace(self.tenant, check_prompt_name(name))

    def labels(self, name: str) -> LabelStore:
        return LabelStore(self.store, self._ns(name), self.lock, f"prompt {name!r}")

    async def head(self, name: str) -> dict[str, Any]:
        item = await call_store(self.store, "get", self._ns(name), "head")
        return dict(item.value) if item is not None else default_version(name)

    async def get(self, name: str, version: int) -> dict[str, Any]:
        if version == 0:
            return default_version(name)
        item = await call_store(self.store, "get", self._ns(name), _key(version))
        if item is None:
            latest = (await self.head(name))["version"]
            raise NotFound(
                f"prompt {name!r} has no version {version} (latest is {latest}): "
                f"see `parallax prompts history {name}`"
            )
        return dict(item.value)

    async def heads_and_labels(
        self, names: tuple[str, ...]
    ) -> dict[str, tuple[dict[str, Any], LabelsRecord]]:
        """For each name, (head, labels) in one batched read (a solve run reads four prompts per
        run)."""
        ops = [GetOp(self._ns(n), key) for n in names for key in ("head", LABELS_KEY)]
        found = await call_store(self.store, "batch", ops)
        out = {}
        for i, name in enumerate(names):
            head, labels = found[2 * i], found[2 * i + 1]
            out[name] = (
                dict(head.value) if head else default_version(name),
                as_labels(labels.value) if labels else empty_labels(),
            )
        return out

    async def history(self, name: str) -> list[dict[str, Any]]:
        """Every version, oldest first, version 0 (the default) included."""
        records = await scan(self.store, self._ns(name))
        versions = [v for k, v in records.items() if k.startswith("v") and k[1:].isdigit()]
        return [default_version(name), *sorted(versions, key=lambda v: v["version"])]

    async def candidates(self, name: str) -> list[dict[str, Any]]:
        records = await scan(self.store, self._ns(name))
        return sorted(
            (v for k, v in records.items() if k.startswith("candidate-")),
            key=lambda c: c["created_at"],
        )

    @staticmethod
    def check_text(name: str, system: str, user: str) -> None:
        found = problems(check_prompt_name(name), system, user)
        if found:
            raise StoreError(f"prompt {name!r}: " + "; ".join(found))

    async def commit(
        self,
        name: str,
        system: str,
        user: str,
        created_by: str,
        gate: dict[str, Any] | None = None,
        note: str = "",
    ) -> dict[str, Any]:
        """A new head version with these texts (checked first: a bad template is refused, nothing
        written)."""
        self.check_text(name, system, user)
        async with self.lock.hold(f"prompt/{self.tenant}/{name}"):
            head = await self.head(name)
            record = {
                "name": name,
                "version": head["version"] + 1,
                "parent": head["version"],
                "system": system,
                "user": user,
                "created_by": created_by,
                "created_at": now_iso(),
                "gate": dict(gate or {}),
                "note": note,
            }
            await call_store(
                self.store, "put", self._ns(name), _key(record["version"]), record, index=False
            )
            await call_store(self.store, "put", self._ns(name), "head", record, index=False)
            return record

    async def reject(
        self, name: str, system: str, user: str, created_by: str, gate: dict[str, Any], reason: str
    ) -> dict[str, Any]:
        """Keep an edit the gate turned down, for inspection; the head does not move."""
        head = await self.head(name)
        record = {
            "name": name,
            "candidate_id": uuid.uuid4().hex[:12],
            "parent": head["version"],
            "system": system,
            "user": user,
            "created_by": created_by,
            "created_at": now_iso(),
            "gate": gate,
            "reason": reason,
        }
        await call_store(
            self.store,
            "put",
            self._ns(name),
            f"candidate-{record['candidate_id']}",
            record,
            index=False,
        )
        return record

    async def rollback(self, name: str, version: int, created_by: str) -> dict[str, Any]:
        """A new head whose texts equal version `version`'s; nothing is deleted."""
        target = await self.get(name, version)
        return await self.commit(
            name,
            target["system"],
            target["user"],
            created_by,
            {"rollback_to": version},
            f"rollback to v{version}",
        )
