"""The versioned playbook store: immutable versions, a head, rejected candidates, on any LangGraph store.

Records live in namespace ("playbooks", <tenant>, <name>); a `PlaybookStore` is bound to
one tenant and cannot name another's records:
  "head"            a copy of the current version (what the solve graph reads: `.value`
                    has "version" and "items"); absent = version 0, the empty playbook
  "v000001" ...     immutable versions, each naming its parent (history is linear)
  "candidate-<id>"  updates the gate rejected, kept with accepted=False and a reason
  "quarantine-<id>" lessons that failed screening (prompts/untrusted_lessons.py), never applied
Every text a commit or import would store is redacted and screened first.

Only the `BaseStore` API is used (aget / aput / asearch / alist_namespaces, always with an
explicit `limit`: search returns 10 items by default), so the same code runs on the
in-memory store under `langgraph dev`, SQLite from the CLI, and Postgres in a deployment.
A sync-only store (`SqliteStore` has no async batch) is driven through `asyncio.to_thread`.

Concurrency. `BaseStore` has no compare-and-swap, so `commit` serialises its
read-head -> write-version -> write-head section with a pluggable `CommitLock`:
- `LocalLock` (default): a process-wide lock per playbook. Enough for one process, e.g. the
  in-memory store under `langgraph dev`, whatever threads or event loops call it.
- `FileCommitLock(path)`: that plus an OS file lock (`filelock`), for several processes on
  one machine sharing a SQLite file (the CLI uses PARALLAX_HOME/playbooks.lock).
A writer commits against the head it read; if the head moved meanwhile, its operations are
re-applied to the new head (`apply_operations` folds duplicate adds and skips vanished
targets), and the version says so (`note`, `gate["rebased_from"]`). The gate's metrics were
measured on the old base; the re-applied result is not re-gated.
Neither lock spans machines. Several replicas writing one Postgres store need a lock
implementing `CommitLock` with `pg_advisory_lock(hashtext('playbooks/' || name))` held on
one connection for the critical section (or a unique-constrained version row written in
the same transaction); this module does not ship one, and without it two replicas can
write the same version number and the later head write wins.
Both locks are acquired by polling non-blocking attempts with `asyncio.sleep` between
them, so waiting never blocks the event loop and a cancelled waiter leaves nothing held.
"""

from __future__ import annotations

import asyncio
import json
import re
import threading
import time
import uuid
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any, Protocol

from langgraph.store.base import BaseStore
from pydantic import ValidationError

from parallax.store_io import call_store, now_iso, scan
from prompts.untrusted_lessons import screen_items, screen_operations
from state.playbook import Operation, PlaybookItem, PlaybookVersion, apply_operations, item_id_for

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
DIFF_FIELDS = ("text", "section", "helpful", "harmful", "status")
MD_META = re.compile(r"^  <!-- pb: (\{.*\}) -->$")
MD_HEAD = re.compile(r"^<!-- parallax-playbook: (\{.*\}) -->$")


class PlaybookError(ValueError):
    """A one-line, user-facing problem (unknown playbook or version, bad import file, lock timeout)."""


class Candidate(PlaybookVersion):
    """A rejected update: the playbook it would have made (version = the number it would have had)."""

    candidate_id: str
    reason: str = ""


def namespace(tenant: str, name: str) -> tuple[str, str, str]:
    return ("playbooks", tenant, name)


def check_tenant(tenant: str) -> str:
    """Tenant names share the playbook-name alphabet, so no tenant can spell another's namespace."""
    if not isinstance(tenant, str) or not NAME_RE.match(tenant):
        raise PlaybookError(f"bad tenant {tenant!r}: use 1-64 letters, digits, '-' or '_'")
    return tenant


def version_key(version: int) -> str:
    return f"v{version:06d}"


# --- locks ---------------------------------------------------------------------------

class CommitLock(Protocol):
    def hold(self, name: str) -> Any:
        """An async context manager that excludes other committers of playbook `name`."""


_REGISTRY_GUARD = threading.Lock()
_THREAD_LOCKS: dict[tuple, threading.Lock] = {}
_FILE_LOCKS: dict[str, Any] = {}


def _thread_lock(key: tuple) -> threading.Lock:
    """One lock per key for the whole process, shared by every thread and event loop."""
    with _REGISTRY_GUARD:
        return _THREAD_LOCKS.setdefault(key, threading.Lock())


async def _poll(try_once: Callable[[], bool], timeout: float, what: str) -> None:
    deadline, delay = time.monotonic() + timeout, 0.002
    while not try_once():
        if time.monotonic() >= deadline:
            raise PlaybookError(f"timed out after {timeout:g}s waiting for {what}: another writer holds it; retry when it is done")
        await asyncio.sleep(delay)
        delay = min(delay * 2, 0.05)


class LocalLock:
    """Process-local: excludes threads, tasks and event loops of this process only."""

    def __init__(self, timeout: float = 120.0) -> None:
        self.timeout = timeout

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        lock = _thread_lock(("local", name))
        await _poll(lambda: lock.acquire(blocking=False), self.timeout, f"the playbook lock for {name!r}")
        try:
            yield
        finally:
            lock.release()


class FileCommitLock:
    """Cross-process on one machine: an in-process lock first (a filelock object is reentrant
    within a process, so it cannot tell two threads apart), then the OS file lock."""

    def __init__(self, path: str | Path, timeout: float = 120.0) -> None:
        self.path = str(Path(path).resolve())
        self.timeout = timeout

    def _file_lock(self):
        from filelock import FileLock

        with _REGISTRY_GUARD:
            if self.path not in _FILE_LOCKS:
                _FILE_LOCKS[self.path] = FileLock(self.path, thread_local=False)
            return _FILE_LOCKS[self.path]

    @asynccontextmanager
    async def hold(self, name: str) -> AsyncIterator[None]:
        from filelock import Timeout

        Path(self.path).parent.mkdir(parents=True, exist_ok=True)
        inner, flock = _thread_lock(("file", self.path)), self._file_lock()

        def try_file() -> bool:
            try:
                flock.acquire(blocking=False)
                return True
            except Timeout:
                return False

        await _poll(lambda: inner.acquire(blocking=False), self.timeout, f"the playbook lock {self.path}")
        try:
            await _poll(try_file, self.timeout, f"the playbook lock {self.path}")
            try:
                yield
            finally:
                flock.release()
        finally:
            inner.release()


# --- the store -----------------------------------------------------------------------

class PlaybookStore:
    """Versioned playbooks over a LangGraph `BaseStore`. All methods are async."""

    def __init__(self, store: BaseStore, lock: CommitLock | None = None, page_size: int = 100,
                 tenant: str = "default") -> None:
        self.tenant = check_tenant(tenant)
        self.store = store
        self.lock = lock or LocalLock()
        self.page_size = page_size

    async def _call(self, method: str, *args, **kwargs):
        return await call_store(self.store, method, *args, **kwargs)

    async def _get(self, name: str, key: str) -> dict | None:
        item = await self._call("get", namespace(self.tenant, name), key)
        return None if item is None else dict(item.value)

    async def _put(self, name: str, key: str, value: dict) -> None:
        await self._call("put", namespace(self.tenant, name), key, value, index=False)

    async def _scan(self, name: str) -> dict[str, dict]:
        """Every record of a playbook (paged: see parallax/store_io.py)."""
        return await scan(self.store, namespace(self.tenant, name), self.page_size)

    @staticmethod
    def _check_name(name: str) -> None:
        if not NAME_RE.match(name or ""):
            raise PlaybookError(f"bad playbook name {name!r}: use 1-64 letters, digits, '-' or '_'")

    # --- reading ---------------------------------------------------------------------

    async def head(self, name: str) -> PlaybookVersion:
        """The current version; version 0 (no items) for a playbook nobody has written yet."""
        self._check_name(name)
        value = await self._get(name, "head")
        return PlaybookVersion.model_validate(value) if value else PlaybookVersion(name=name, version=0, parent=None, items=[])

    async def names(self) -> list[str]:
        found, offset = set(), 0
        while True:
            page = await self._call("list_namespaces", prefix=("playbooks", self.tenant), max_depth=3, limit=self.page_size, offset=offset)
            found.update(ns[2] for ns in page if len(ns) >= 3)
            if len(page) < self.page_size:
                break
            offset += self.page_size
        # InMemoryStore lists a namespace once anyone has merely read it; keep those with records.
        return [n for n in sorted(found) if await self._call("search", namespace(self.tenant, n), limit=1)]

    async def get(self, name: str, version: int) -> PlaybookVersion:
        head = await self.head(name)
        if version == 0:
            return PlaybookVersion(name=name, version=0, parent=None, items=[])
        if version == head.version:
            return head
        if head.version == 0 and version > 0:
            known = ", ".join(await self.names()) or "none"
            raise PlaybookError(f"playbook {name!r} has no versions yet (playbooks with data: {known}): "
                                f"learn or import one, or pick another with --playbook")
        if not 0 < version <= head.version:
            raise PlaybookError(f"playbook {name!r} has no version {version} (latest is {head.version}): "
                                f"see `parallax playbook history --playbook {name}`")
        value = await self._get(name, version_key(version))
        if value is None:
            raise PlaybookError(f"playbook {name!r} is missing the record of version {version} (latest is {head.version}): "
                                f"the store was edited by hand; restore it or roll back to another version")
        return PlaybookVersion.model_validate(value)

    async def history(self, name: str) -> list[PlaybookVersion]:
        """Every stored version, oldest first (version 0, the implicit empty one, is not listed)."""
        self._check_name(name)
        records = await self._scan(name)
        versions = {v.version: v for v in (PlaybookVersion.model_validate(value) for key, value in records.items()
                                           if re.fullmatch(r"v\d{6,}", key))}
        head = records.get("head")
        for missing in range(1, (head or {}).get("version", 0) + 1):  # belt and braces against paging races
            if missing not in versions and (value := await self._get(name, version_key(missing))):
                versions[missing] = PlaybookVersion.model_validate(value)
        return [versions[v] for v in sorted(versions)]

    async def quarantined(self, name: str) -> list[dict]:
        """Lessons held back by screening, oldest first."""
        self._check_name(name)
        records = await self._scan(name)
        return sorted((v for k, v in records.items() if k.startswith("quarantine-")), key=lambda q: (q["created_at"], q["id"]))

    async def quarantine(self, name: str, entries: list[dict]) -> None:
        """Keep screened-out lessons for inspection (they never reach a version)."""
        self._check_name(name)
        for entry in entries:
            await self._put(name, f"quarantine-{entry['id']}", entry)

    async def candidates(self, name: str) -> list[Candidate]:
        self._check_name(name)
        records = await self._scan(name)
        found = [Candidate.model_validate(v) for k, v in records.items() if k.startswith("candidate-")]
        return sorted(found, key=lambda c: (c.created_at, c.candidate_id))

    # --- writing ---------------------------------------------------------------------

    async def _append(self, name: str, build: Callable[[PlaybookVersion], dict]) -> PlaybookVersion:
        """The critical section: read the real head, build the next version from it, write
        the immutable version record, then move the head. A version record found beyond the
        head (a writer died between the two writes) is adopted as the head first, so an
        immutable version is never overwritten."""
        self._check_name(name)
        async with self.lock.hold(f"{self.tenant}/{name}"):
            head = await self.head(name)
            while (ahead := await self._get(name, version_key(head.version + 1))) is not None:
                head = PlaybookVersion.model_validate(ahead)
            fields = build(head)
            new = PlaybookVersion(name=name, version=head.version + 1, parent=head.version, created_at=now_iso(), **fields)
            record = new.model_dump(mode="json")
            await self._put(name, version_key(new.version), record)
            await self._put(name, "head", record)
            return new

    async def commit(self, name: str, base_version: int, operations: list[Operation], created_by: str,
                     gate: dict | None = None, note: str = "") -> PlaybookVersion:
        """Apply `operations` to version `base_version` and make the result the new head.
        If the head has moved past `base_version`, the operations are re-applied to the new head."""
        if base_version < 0:
            raise PlaybookError(f"base version must be 0 or more, got {base_version}")
        operations, held = screen_operations([Operation.model_validate(op) for op in operations], f"commit by {created_by}")
        await self.quarantine(name, held)

        def build(head: PlaybookVersion) -> dict:
            if base_version > head.version:
                raise PlaybookError(f"playbook {name!r} has no version {base_version} (latest is {head.version}): "
                                    f"commit against a version you read from the store")
            gate_record, text = dict(gate or {}), note
            if base_version != head.version:
                gate_record["rebased_from"] = base_version
                text = f"{note}; " if note else ""
                text += f"re-applied on v{head.version} (read v{base_version})"
            return dict(items=apply_operations(head.items, operations, head.version + 1), operations=operations,
                        created_by=created_by, gate=gate_record, note=text)

        return await self._append(name, build)

    async def reject(self, name: str, base_version: int, operations: list[Operation], created_by: str,
                     gate: dict | None, reason: str) -> str:
        """Keep a candidate the gate turned down, for inspection; the head does not move."""
        base = await self.get(name, base_version)
        operations, held = screen_operations([Operation.model_validate(op) for op in operations], f"candidate by {created_by}")
        await self.quarantine(name, held)
        cid = uuid.uuid4().hex[:12]
        candidate = Candidate(
            name=name, version=base.version + 1, parent=base.version,
            items=apply_operations(base.items, operations, base.version + 1), operations=operations,
            created_by=created_by, created_at=now_iso(), gate=dict(gate or {}), accepted=False, note=reason,
            candidate_id=cid, reason=reason)
        await self._put(name, f"candidate-{cid}", candidate.model_dump(mode="json"))
        return cid

    async def rollback(self, name: str, version: int, created_by: str) -> PlaybookVersion:
        """A new head whose items equal version `version`'s; nothing is deleted."""
        target = await self.get(name, version)
        return await self._append(name, lambda head: dict(
            items=[i.model_copy(deep=True) for i in target.items], operations=[], created_by=created_by,
            gate={"rollback_to": version}, note=f"rollback to v{version}"))

    # --- comparing, export, import ---------------------------------------------------

    async def diff(self, name: str, a: int, b: int) -> dict:
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
        return await self._append(name, lambda head: dict(
            items=items, operations=[], created_by=created_by, gate={"imported": True, "quarantined": len(held)},
            note=note))


# --- file formats --------------------------------------------------------------------

def diff_items(before: list[PlaybookItem], after: list[PlaybookItem]) -> dict:
    """Added items, changed ones (before/after of the fields that differ) and archived ones
    (active before, archived or gone after). Used for version diffs and the approval prompt."""
    old, new = {i.id: i for i in before}, {i.id: i for i in after}
    added = [i.model_dump(mode="json") for i in after if i.id not in old]
    archived = [i.model_dump(mode="json") for i in before
                if i.status == "active" and (i.id not in new or new[i.id].status == "archived")]
    archived_ids = {i["id"] for i in archived}
    changed = []
    for item in after:
        if item.id in old and item.id not in archived_ids:
            fields = [f for f in DIFF_FIELDS if getattr(old[item.id], f) != getattr(item, f)]
            if fields:
                changed.append({"id": item.id, "fields": fields,
                                "before": {f: getattr(old[item.id], f) for f in fields},
                                "after": {f: getattr(item, f) for f in fields}})
    return {"added": added, "changed": changed, "archived": archived}


def to_markdown(pv: PlaybookVersion) -> str:
    """The Markdown export, readable and importable:

        # Playbook `default`, version 3
        <!-- parallax-playbook: {"name": "default", "version": 3, "parent": 2} -->

        ## general

        - Net margin is net income divided by revenue.
          <!-- pb: {"id": "pb-…", "helpful": 2, "harmful": 0, ...} -->

    Items keep their order; a `## section` heading starts wherever the section changes.
    A bullet is `- ` plus the text; further text lines are indented two spaces; the
    `<!-- pb: {...} -->` line holds every other field as JSON. Archived items start with
    `[archived] `. Hand-written bullets without the comment get the heading's section, a
    content-derived id and zero counts.
    """
    meta = {"name": pv.name, "version": pv.version, "parent": pv.parent, "created_at": pv.created_at}
    lines = [f"# Playbook `{pv.name}`, version {pv.version}", f"<!-- parallax-playbook: {json.dumps(meta)} -->"]
    section = None
    for item in pv.items:
        if item.section != section:
            section = item.section
            lines += ["", f"## {section}", ""]
        text = ("[archived] " if item.status == "archived" else "") + item.text
        first, *rest = text.split("\n")
        lines.append(f"- {first}")
        lines += [f"  {line}" for line in rest]
        fields = item.model_dump(mode="json", exclude={"text"})
        lines.append(f"  <!-- pb: {json.dumps(fields, ensure_ascii=False)} -->")
    return "\n".join(lines) + "\n"


def _from_markdown(text: str) -> list[dict]:
    items, section, lines, n = [], "general", text.split("\n"), 0
    while n < len(lines):
        line = lines[n]
        n += 1
        if line.startswith("## "):
            section = line[3:].strip() or "general"
        elif line.startswith("- "):
            body, meta = [line[2:]], None
            while n < len(lines) and lines[n].startswith("  "):
                if m := MD_META.match(lines[n]):
                    try:
                        meta = json.loads(m.group(1))
                    except json.JSONDecodeError as exc:
                        raise PlaybookError(f"line {n + 1}: the item comment is not valid JSON ({exc.msg}): fix or delete it")
                else:
                    body.append(lines[n][2:])
                n += 1
            item_text = "\n".join(body)
            meta = meta or {"section": section}
            if meta.get("status") == "archived" and item_text.startswith("[archived] "):
                item_text = item_text[len("[archived] "):]
            meta.setdefault("id", item_id_for(item_text, meta.get("section", section)))
            items.append({**meta, "text": item_text})
    return items


def parse_playbook(text: str) -> list[PlaybookItem]:
    stripped = text.lstrip()
    if stripped.startswith(("{", "[")):
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            raise PlaybookError(f"not valid JSON (line {exc.lineno}: {exc.msg}): import a `parallax playbook export` file")
        raw = data.get("items") if isinstance(data, dict) else data
        if not isinstance(raw, list):
            raise PlaybookError("the JSON has no \"items\" list: import a `parallax playbook export` file")
    elif stripped.startswith("#") or stripped.startswith("- ") or MD_HEAD.search(stripped):
        raw = _from_markdown(text)
    else:
        raise PlaybookError("neither JSON nor the playbook Markdown: import a `parallax playbook export` file")
    items = []
    for n, raw_item in enumerate(raw, start=1):
        try:
            items.append(PlaybookItem.model_validate(raw_item))
        except ValidationError as exc:
            first = exc.errors()[0]
            raise PlaybookError(f"item {n}: {'.'.join(map(str, first['loc'])) or 'item'}: {first['msg']}: fix the file and import again")
    seen: set[str] = set()
    for item in items:
        if item.id in seen:
            raise PlaybookError(f"item id {item.id!r} appears twice: give each item its own id")
        seen.add(item.id)
    return items
