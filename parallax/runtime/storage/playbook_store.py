"""The versioned playbook store: immutable versions, a head, rejected candidates, quarantine.

See docs/internals/storage.md#playbooks.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from typing import Any

from langgraph.store.base import BaseStore

from parallax.runtime import lease_check
from parallax.runtime.lesson_screening import screen_items, screen_operations
from parallax.runtime.storage.commit_locks import CommitLock, LocalLock
from parallax.runtime.storage.labels import LabelStore
from parallax.runtime.storage.namespaces import (
    NotFound,
    StoreError,
    check_playbook_name,
    check_tenant,
    playbook_namespace,
)
from parallax.runtime.storage.playbook_files import diff_items, parse_playbook, to_markdown
from parallax.runtime.storage.store_calls import call_store, scan
from parallax.runtime.timestamps import now_iso
from parallax.state.playbook import Operation, PlaybookVersion, apply_operations


class PlaybookError(StoreError):
    """A one-line, user-facing problem with a playbook (unknown playbook or version, bad import
    file)."""


class PlaybookNotFound(PlaybookError, NotFound):
    """No such playbook, or no such version of it."""


class CommitVoided(PlaybookError):
    """The commit key was given up (`PlaybookStore.settle`): its writer lost its runs to another
    round."""


class Candidate(PlaybookVersion):
    """A rejected update: the playbook it would have made (version = the number it would have
    had)."""

    candidate_id: str
    reason: str = ""


def version_key(version: int) -> str:
    return f"v{version:06d}"


VERSION_KEY = re.compile(r"v\d{6,}")
"""What `version_key` makes: a version record's key among the playbook's other records."""


def candidate_id(key: str) -> str:
    """The id of the candidate rejected under commit key `key`: the same on every write, so a
    retried rejection overwrites its record and `PlaybookStore.committed` finds it."""
    return uuid.uuid5(uuid.NAMESPACE_URL, f"parallax-candidate/{key}").hex[:12]


class PlaybookStore:
    """Versioned playbooks over a LangGraph `BaseStore`. All methods are async."""

    def __init__(
        self,
        store: BaseStore,
        lock: CommitLock | None = None,
        page_size: int = 100,
        tenant: str = "default",
    ) -> None:
        self.tenant = check_tenant(tenant)
        self.store = store
        self.lock = lock or LocalLock()
        self.page_size = page_size

    async def _call(self, method: str, *args: Any, **kwargs: Any) -> Any:
        return await call_store(self.store, method, *args, **kwargs)

    async def _get(self, name: str, key: str) -> dict[str, Any] | None:
        item = await self._call("get", playbook_namespace(self.tenant, name), key)
        return None if item is None else lease_check.unstamped(dict(item.value))

    async def _put(self, name: str, key: str, value: dict[str, Any]) -> None:
        """Every record is stamped with the writing run's lease (runtime/lease_check.py), for the
        database to fence."""
        await self._call(
            "put",
            playbook_namespace(self.tenant, name),
            key,
            lease_check.stamped(value),
            index=False,
        )

    async def _scan(self, name: str) -> dict[str, dict[str, Any]]:
        """Every record of a playbook (paged: see runtime/storage/store_calls.py)."""
        found = await scan(self.store, playbook_namespace(self.tenant, name), self.page_size)
        return {key: lease_check.unstamped(value) for key, value in found.items()}

    @staticmethod
    def _check_name(name: str) -> None:
        check_playbook_name(name)

    def labels(self, name: str) -> LabelStore:
        """The `production` / `canary` labels of playbook `name` (runtime/storage/labels.py)."""
        self._check_name(name)
        return LabelStore(
            self.store, playbook_namespace(self.tenant, name), self.lock, f"playbook {name!r}"
        )

    # --- reading ---------------------------------------------------------------------

    async def head(self, name: str) -> PlaybookVersion:
        """The current version; version 0 (no items) for a playbook nobody has written yet."""
        self._check_name(name)
        value = await self._get(name, "head")
        return (
            PlaybookVersion.model_validate(value)
            if value
            else PlaybookVersion(name=name, version=0, parent=None, items=[])
        )

    async def names(self) -> list[str]:
        found: set[str] = set()
        offset = 0
        while True:
            page = await self._call(
                "list_namespaces",
                prefix=("playbooks", self.tenant),
                max_depth=3,
                limit=self.page_size,
                offset=offset,
            )
            found.update(ns[2] for ns in page if len(ns) >= 3)
            if len(page) < self.page_size:
                break
            offset += self.page_size
        # InMemoryStore lists a namespace once anyone has merely read it; keep those with records.
        return [
            n
            for n in sorted(found)
            if await self._call("search", playbook_namespace(self.tenant, n), limit=1)
        ]

    async def get(self, name: str, version: int) -> PlaybookVersion:
        head = await self.head(name)
        if version == 0:
            return PlaybookVersion(name=name, version=0, parent=None, items=[])
        if version == head.version:
            return head
        if head.version == 0 and version > 0:
            known = ", ".join(await self.names()) or "none"
            raise PlaybookNotFound(
                f"playbook {name!r} has no versions yet (playbooks with data: {known}): "
                "learn or import one, or pick another with --playbook"
            )
        if not 0 < version <= head.version:
            raise PlaybookNotFound(
                f"playbook {name!r} has no version {version} (latest is {head.version}): "
                f"see `parallax playbook history --playbook {name}`"
            )
        value = await self._get(name, version_key(version))
        if value is None:
            raise PlaybookError(
                f"playbook {name!r} is missing the record of version {version} (latest is"
                f" {head.version}): the store was edited by hand; restore it or roll back to"
                " another version"
            )
        return PlaybookVersion.model_validate(value)

    async def history(self, name: str) -> list[PlaybookVersion]:
        """Every stored version, oldest first (version 0, the implicit empty one, is not listed)."""
        self._check_name(name)
        records = await self._scan(name)
        versions = {
            v.version: v
            for v in (
                PlaybookVersion.model_validate(value)
                for key, value in records.items()
                if VERSION_KEY.fullmatch(key)
            )
        }
        head = records.get("head")
        for missing in range(
            1, (head or {}).get("version", 0) + 1
        ):  # belt and braces against paging races
            if missing not in versions and (value := await self._get(name, version_key(missing))):
                versions[missing] = PlaybookVersion.model_validate(value)
        return [versions[v] for v in sorted(versions)]

    async def quarantined(self, name: str) -> list[dict[str, Any]]:
        """Lessons held back by screening, oldest first."""
        self._check_name(name)
        records = await self._scan(name)
        return sorted(
            (v for k, v in records.items() if k.startswith("quarantine-")),
            key=lambda q: (q["created_at"], q["id"]),
        )

    async def quarantine(self, name: str, entries: list[dict[str, Any]]) -> None:
        """Keep screened-out lessons for inspection (they never reach a version)."""
        self._check_name(name)
        for entry in entries:
            await self._put(name, f"quarantine-{entry['id']}", entry)

    async def committed(self, name: str, key: str) -> bool:
        """Whether a version (`commit`) or a rejected candidate (`reject`) was written under `key`.

        A version whose writer died before its `commit-<key>` record counts too (the next commit
        adopts it); it is found by a scan, which only a key not found at once costs.
        """
        self._check_name(name)
        if await self._get(name, f"commit-{key}") is not None or await self._get(
            name, f"candidate-{candidate_id(key)}"
        ):
            return True
        return any(
            VERSION_KEY.fullmatch(k) and v.get("gate", {}).get("commit_key") == key
            for k, v in (await self._scan(name)).items()
        )

    async def settle(self, name: str, key: str) -> bool:
        """Whether `key` was committed (`committed`); if not, give it up for good, so a commit or
        rejection under it is refused (CommitVoided). Why: a learning round whose claims expired
        after it named `key` on them may still be about to commit; the round that takes its runs
        over settles the key first, under the lock the commit takes, so exactly one of the two
        learns from them (runtime/storage/consumed.py)."""
        async with self.lock.hold(f"{self.tenant}/{name}"):
            if await self.committed(name, key):
                return True
            await self._put(name, f"void-{key}", {"key": key, "at": now_iso()})
            return False

    async def _refuse_void(self, name: str, key: str | None) -> None:
        """Under the lock: CommitVoided when `key` was given up."""
        if key is not None and await self._get(name, f"void-{key}") is not None:
            raise CommitVoided(
                f"commit key {key!r} of playbook {name!r} was given up: another round took its runs"
            )

    async def candidates(self, name: str) -> list[Candidate]:
        self._check_name(name)
        records = await self._scan(name)
        found = [
            Candidate.model_validate(v) for k, v in records.items() if k.startswith("candidate-")
        ]
        return sorted(found, key=lambda c: (c.created_at, c.candidate_id))

    # --- writing ---------------------------------------------------------------------

    async def _append(
        self, name: str, build: Callable[[PlaybookVersion], dict[str, Any]], key: str | None = None
    ) -> PlaybookVersion:
        """The critical section: read the real head, build the next version from it, write
        the immutable version record, then move the head. A version record found beyond the
        head (a writer died between the two writes) is adopted as the head first, so an
        immutable version is never overwritten.

        `key` makes the write idempotent: a version already committed under the same key (by a
        run taken over after its commit, or retried) is returned instead of a second version.
        The key goes into the version's `gate["commit_key"]` (written first) and a `commit-<key>`
        record (written next), so a writer that died between any two writes is found either way."""
        self._check_name(name)
        async with self.lock.hold(f"{self.tenant}/{name}"):
            stored_head = head = await self.head(name)
            ahead_keyed = None
            while (ahead := await self._get(name, version_key(head.version + 1))) is not None:
                head = PlaybookVersion.model_validate(ahead)
                if key is not None and head.gate.get("commit_key") == key:
                    ahead_keyed = head
            if key is not None:
                done = await self._get(name, f"commit-{key}")
                if done is not None or ahead_keyed is not None:
                    if (
                        head.version != stored_head.version
                    ):  # finish the move of the head a dead writer left
                        await self._put(name, "head", head.model_dump(mode="json"))
                    return ahead_keyed or await self.get(name, int(done["version"]))  # type: ignore[index]
            await self._refuse_void(name, key)
            await lease_check.check_lease("playbook commit")
            fields = build(head)
            if key is not None:
                fields["gate"] = {**fields.get("gate", {}), "commit_key": key}
            new = PlaybookVersion(
                name=name,
                version=head.version + 1,
                parent=head.version,
                created_at=now_iso(),
                **fields,
            )
            record = new.model_dump(mode="json")
            await self._put(name, version_key(new.version), record)
            if key is not None:
                await self._put(
                    name, f"commit-{key}", {"version": new.version, "created_at": new.created_at}
                )
            await self._put(name, "head", record)
            return new

    async def commit(
        self,
        name: str,
        base_version: int,
        operations: list[Operation],
        created_by: str,
        gate: dict[str, Any] | None = None,
        note: str = "",
        key: str | None = None,
    ) -> PlaybookVersion:
        """Apply `operations` to version `base_version` and make the result the new head. If the
        head has moved past `base_version`, the operations are re-applied to the new head. With
        `key`, a second commit under the same key returns the first one's version (see `_append`).
        """
        if base_version < 0:
            raise PlaybookError(f"base version must be 0 or more, got {base_version}")
        operations, held = screen_operations(
            [Operation.model_validate(op) for op in operations], f"commit by {created_by}"
        )
        await self.quarantine(name, held)

        def build(head: PlaybookVersion) -> dict[str, Any]:
            if base_version > head.version:
                raise PlaybookError(
                    f"playbook {name!r} has no version {base_version} (latest is {head.version}): "
                    "commit against a version you read from the store"
                )
            gate_record, text = dict(gate or {}), note
            if base_version != head.version:
                gate_record["rebased_from"] = base_version
                text = f"{note}; " if note else ""
                text += f"re-applied on v{head.version} (read v{base_version})"
            return dict(
                items=apply_operations(head.items, operations, head.version + 1),
                operations=operations,
                created_by=created_by,
                gate=gate_record,
                note=text,
            )

        return await self._append(name, build, key)

    async def reject(
        self,
        name: str,
        base_version: int,
        operations: list[Operation],
        created_by: str,
        gate: dict[str, Any] | None,
        reason: str,
        key: str | None = None,
    ) -> str:
        """Keep a candidate the gate turned down, for inspection; the head does not move. With
        `key`, the candidate's id comes from it, so writing it again overwrites the same record; a
        key given up (`settle`) is refused, under the lock `settle` takes."""
        base = await self.get(name, base_version)
        operations, held = screen_operations(
            [Operation.model_validate(op) for op in operations], f"candidate by {created_by}"
        )
        await self.quarantine(name, held)
        cid = candidate_id(key) if key else uuid.uuid4().hex[:12]
        candidate = Candidate(
            name=name,
            version=base.version + 1,
            parent=base.version,
            items=apply_operations(base.items, operations, base.version + 1),
            operations=operations,
            created_by=created_by,
            created_at=now_iso(),
            gate=dict(gate or {}),
            accepted=False,
            note=reason,
            candidate_id=cid,
            reason=reason,
        )
        async with self.lock.hold(f"{self.tenant}/{name}"):
            await self._refuse_void(name, key)
            await lease_check.check_lease("playbook candidate")
            await self._put(name, f"candidate-{cid}", candidate.model_dump(mode="json"))
        return cid

    async def rollback(self, name: str, version: int, created_by: str) -> PlaybookVersion:
        """A new head whose items equal version `version`'s; nothing is deleted."""
        target = await self.get(name, version)
        return await self._append(
            name,
            lambda head: dict(
                items=[i.model_copy(deep=True) for i in target.items],
                operations=[],
                created_by=created_by,
                gate={"rollback_to": version},
                note=f"rollback to v{version}",
            ),
        )

    # --- comparing, export, import ---------------------------------------------------

    async def diff(self, name: str, a: int, b: int) -> dict[str, Any]:
        """Items added in b, changed between a and b, and archived (see `diff_items`)."""
        va, vb = await self.get(name, a), await self.get(name, b)
        return {"playbook": name, "from": a, "to": b, **diff_items(va.items, vb.items)}

    async def export(self, name: str, version: int | None = None, fmt: str = "json") -> str:
        pv = await (self.head(name) if version is None else self.get(name, version))
        if fmt == "json":
            return json.dumps(pv.model_dump(mode="json"), indent=2, ensure_ascii=False) + "\n"
        if fmt == "markdown":
            return to_markdown(pv)
        raise PlaybookError(f"unknown export format {fmt!r}: use json or markdown")

    async def import_(self, name: str, text: str, created_by: str) -> PlaybookVersion:
        """A new version whose items are exactly the file's (JSON export, a JSON list of items,
        or the Markdown export, possibly hand-edited)."""
        items, held = screen_items(parse_playbook(text), f"import by {created_by}")
        await self.quarantine(name, held)
        note = f"import of {len(items)} items" + (f" ({len(held)} quarantined)" if held else "")
        return await self._append(
            name,
            lambda head: dict(
                items=items,
                operations=[],
                created_by=created_by,
                gate={"imported": True, "quarantined": len(held)},
                note=note,
            ),
        )
