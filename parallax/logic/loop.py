"""One round of the closed loop: stored runs -> a candidate -> the offline gate -> a canary.

See docs/data-loop.md (the closed loop) and docs/internals/learning.md#a-round-of-the-closed-loop.
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any, cast

from langgraph.store.base import BaseStore

from parallax.logic.release_decision import Rule
from parallax.logic.releases import count_trial, end_release, start_release
from parallax.runtime.storage.labels import move_label
from parallax.runtime.storage.namespaces import StoreError, check_playbook_name, check_tenant
from parallax.runtime.storage.store_calls import call_store, scan
from parallax.runtime.storage.stores import lock_for, playbooks_in
from parallax.runtime.timestamps import now_iso
from parallax.state.loop import GateClaim
from parallax.state.release_record import CanaryState, LabelsRecord, Release

BY = "loop"
SLOT_S = 3600.0


def loop_namespace(tenant: str, playbook: str) -> tuple[str, str, str]:
    return ("loop", check_tenant(tenant), check_playbook_name(playbook))


async def take_slot(
    store: BaseStore, tenant: str, playbook: str, round_id: str, slot_s: float = SLOT_S
) -> str | None:
    """Take the playbook's round slot; None when taken, else the round holding it."""
    namespace = loop_namespace(tenant, playbook)
    async with lock_for(store).hold(f"loop/{tenant}/{playbook}"):
        item = await call_store(store, "get", namespace, "slot")
        now = datetime.now(UTC)
        if (
            item is not None
            and item.value.get("round")
            and datetime.fromisoformat(item.value["until"]) > now
        ):
            return str(item.value["round"])
        until = (now + timedelta(seconds=slot_s)).isoformat(timespec="microseconds")
        await call_store(
            store, "put", namespace, "slot", {"round": round_id, "until": until}, index=False
        )
        return None


async def free_slot(store: BaseStore, tenant: str, playbook: str, round_id: str) -> None:
    namespace = loop_namespace(tenant, playbook)
    async with lock_for(store).hold(f"loop/{tenant}/{playbook}"):
        item = await call_store(store, "get", namespace, "slot")
        if item is not None and item.value.get("round") == round_id:
            await call_store(
                store, "put", namespace, "slot", {"round": None, "until": now_iso()}, index=False
            )


async def advance(store: BaseStore, tenant: str, playbook: str) -> Release | None:
    """Let the rule look at a running canary's counts now (feedback may have corrected trials since
    the last run); the release it decided, or None."""
    labels = playbooks_in(store, tenant).labels(playbook)
    release = (await labels.get())["release"]
    if not release or release["manual"]:
        return None
    if release["status"] == "undecided" and release["started_by"] == BY:
        # the rule's last look passed without evidence either way: the loop's own candidate does not
        # stay on canary for ever (it would stop the loop); production stays, and the runs taught
        # what they could
        why = (
            "the loop rolled back its own candidate:"
            f" {release.get('undecided_reason') or 'undecided after the last look'}"
        )
        return await end_release(labels, "rollback", BY, why)
    return await count_trial(labels, release["id"], "canary", 0, 0)


def canary_state(labels: LabelsRecord) -> CanaryState:
    """The playbook's canary as a round reports it: running (with its counts), or the last
    decision."""
    release = labels.get("release")
    if release:
        return {
            "state": release["status"],
            "release_id": release["id"],
            "version": release["version"],
            "production": labels["production"],
            "share": release["share"],
            "arms": release["arms"],
            "started_by": release["started_by"],
        }
    last = labels["releases"][-1] if labels.get("releases") else None
    if last:
        return {
            "state": last["decision"],
            "release_id": last["id"],
            "version": last["version"],
            "production": labels["production"],
            "decided_by": last["decided_by"],
            "why": last["why"],
        }
    return {"state": "none", "production": labels.get("production")}


async def prepare(store: BaseStore, tenant: str, playbook: str) -> dict[str, Any]:
    """Steps of `open_round` after the slot: {"advanced", "skip" (why nothing is learned) or
    "reset", "production"}."""
    playbooks = playbooks_in(store, tenant)
    labels = playbooks.labels(playbook)
    decided = await advance(store, tenant, playbook)
    record = await labels.get()
    out: dict[str, Any] = {
        "advanced": decided and {k: decided[k] for k in ("id", "version", "decision", "why")}
    }
    if record["release"]:
        out["skip"] = (
            f"v{record['release']['version']} is still on canary ({record['release']['status']}): "
            "one canary per playbook at a time"
        )
        return out
    head = await playbooks.head(playbook)

    def pin(current: LabelsRecord) -> None:
        if current["production"] is None:
            move_label(
                current,
                "production",
                head.version,
                BY,
                "pinned by the loop: a new version is served only once it is released",
            )

    record = (await labels.change(pin))[0]
    production = cast(int, record["production"])  # pin set it
    out["production"] = production
    if head.version != production:
        served = await playbooks.get(playbook, production)
        if [i.model_dump() for i in served.items] != [i.model_dump() for i in head.items]:
            reset = await playbooks.rollback(playbook, production, BY)
            out["reset"] = {
                "from": head.version,
                "to": reset.version,
                "items_of": production,
                "why": (
                    f"v{head.version} was never released (rolled back or not released): the next "
                    f"candidate starts from production v{production}"
                ),
            }
    return out


async def release_candidate(
    store: BaseStore, tenant: str, playbook: str, learned: dict[str, Any], share: float, rule: Rule
) -> CanaryState:
    """Put the round's accepted candidate on canary; the playbook's canary state after."""
    labels = playbooks_in(store, tenant).labels(playbook)
    if learned.get("accepted") and learned.get("to_version", 0) > learned.get("from_version", 0):
        gate = gate_of(learned)
        found = learned.get("traces") or {}
        why = (
            f"learned from {found.get('consumed', 0)} runs ({found.get('by_signal', {})}); gate: "
            + (
                f"validation {gate['before']} -> {gate['after']} on {gate['val_size']} replayed"
                " runs"
                if gate["claimed"]
                else "none claimed (no run carried a target)"
            )
        )
        try:
            production = (await labels.get())["production"]
            await start_release(
                labels,
                learned["to_version"],
                share,
                BY,
                why,
                rule,
                manual=False,
                production=production if production is not None else learned["from_version"],
            )
        except StoreError as exc:  # a person started a canary meanwhile: theirs stands
            return {**canary_state(await labels.get()), "not_started": str(exc)}
    return canary_state(await labels.get())


def gate_of(learned: dict[str, Any]) -> GateClaim:
    """What the offline gate of a learn run claimed: replayed runs with targets, or nothing."""
    batches = learned.get("batches") or []
    last = batches[-1] if batches else {}
    found = learned.get("traces") or {}
    claimed = bool(found.get("replayed_in_gate")) and last.get("val_accuracy") is not None
    return {
        "claimed": claimed,
        "val_size": found.get("replayed_in_gate", 0),
        "before": learned.get("val_accuracy_before"),
        "after": learned.get("val_accuracy_after"),
        "accepted": bool(learned.get("accepted")),
        "reason": last.get("reason", ""),
    }


def new_round_id() -> str:
    return f"round-{datetime.now(UTC).strftime('%Y%m%dT%H%M%S')}-{uuid.uuid4().hex[:6]}"


async def save_round(store: BaseStore, tenant: str, playbook: str, record: dict[str, Any]) -> None:
    await call_store(
        store, "put", loop_namespace(tenant, playbook), record["round"], record, index=False
    )


async def rounds(
    store: BaseStore, tenant: str, playbook: str, last: int = 10
) -> list[dict[str, Any]]:
    """The playbook's last rounds, newest last."""
    found = await scan(store, loop_namespace(tenant, playbook))
    records = sorted(
        (v for k, v in found.items() if k.startswith("round-")), key=lambda r: r["started_at"]
    )
    return records[-last:]
