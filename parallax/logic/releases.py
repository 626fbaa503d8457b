"""Gray release steps: what a run is served, starting and ending a canary, counting a run's trial.

See docs/internals/learning.md#gray-release.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any, cast

from langgraph.store.base import BaseStore

from parallax.logic.release_decision import (
    Arm,
    Rule,
    decide,
    difference,
    explain,
    run_success,
    served_version,
    wilson,
)
from parallax.logic.run_stats import summarize
from parallax.prompts.templates import DEFAULTS
from parallax.runtime.storage.labels import UNCHANGED, LabelStore, move_label
from parallax.runtime.storage.namespaces import StoreError
from parallax.runtime.storage.stores import playbooks_in, prompts_in, traces_in
from parallax.runtime.timestamps import now_iso
from parallax.state.playbook import PlaybookVersion
from parallax.state.records import PromptVersion, ServedVersion
from parallax.state.release_record import (
    ArmCounts,
    DecidedRelease,
    LabelsRecord,
    LookFigures,
    Release,
)
from parallax.state.trace_record import TraceRecord

AUTO = "auto"
KEEP_RELEASES = 20


def labels_of(store: BaseStore, tenant: str, subject: str) -> LabelStore:
    """The labels record of "playbook/<name>" or "prompt/<name>"."""
    kind, _, name = subject.partition("/")
    if kind == "playbook":
        return playbooks_in(store, tenant).labels(name)
    if kind == "prompt":
        return prompts_in(store, tenant).labels(name)
    raise StoreError(f"unknown subject {subject!r}")


# --- serving --------------------------------------------------------------------------


async def serve_playbook(
    store: BaseStore, tenant: str, name: str, thread_key: str
) -> tuple[PlaybookVersion, ServedVersion]:
    """The playbook version a run on `thread_key` gets, and how it was chosen."""
    playbooks = playbooks_in(store, tenant)
    head = await playbooks.head(name)
    served = served_version(
        await playbooks.labels(name).get(), head.version, f"playbook/{name}", thread_key
    )
    version = (
        head if served["version"] == head.version else await playbooks.get(name, served["version"])
    )
    return version, served


async def serve_prompts(
    store: BaseStore | None,
    tenant: str,
    names: tuple[str, ...],
    thread_key: str,
    allow_canary: bool = True,
) -> dict[str, PromptVersion]:
    """name -> {"name", "version", "system", "user", "arm", "release_id"} for each prompt a run may
    use. Without a store, the defaults (version 0). `allow_canary=False` (evaluations) never serves
    a canary.
    """
    if store is None:
        return {n: _default_prompt(n) for n in names}
    prompts = prompts_in(store, tenant)
    out: dict[str, PromptVersion] = {}
    for name, (head, labels) in (await prompts.heads_and_labels(names)).items():
        served = served_version(labels, head["version"], f"prompt/{name}", thread_key, allow_canary)
        record = (
            head
            if served["version"] == head["version"]
            else await prompts.get(name, served["version"])
        )
        out[name] = {
            "name": name,
            "version": record["version"],
            "system": record["system"],
            "user": record["user"],
            "arm": served["arm"],
            "release_id": served["release_id"],
        }
    return out


def _default_prompt(name: str) -> PromptVersion:
    text = DEFAULTS[name].text()
    return {
        "name": name,
        "version": 0,
        "system": text["system"],
        "user": text["user"],
        "arm": "head",
        "release_id": None,
    }


# --- moving labels ---------------------------------------------------------------------


def _finish(
    labels: LabelsRecord, decision: str, by: str, why: str, figures: LookFigures | None = None
) -> Release:
    release = labels["release"]
    assert release is not None  # every caller checked there is one
    if decision == "promote":
        move_label(labels, "production", release["version"], by, why, release_id=release["id"])
    move_label(labels, "canary", None, by, why, release_id=release["id"], decision=decision)
    done: Release = {
        **release,
        "decision": decision,
        "decided_by": by,
        "decided_at": now_iso(),
        "why": why,
        "figures": figures or {},
    }
    labels["releases"] = [*labels["releases"], done][-KEEP_RELEASES:]
    labels["release"] = None
    return done


async def start_release(
    labels: LabelStore,
    version: int,
    share: float,
    by: str,
    why: str,
    rule: Rule,
    manual: bool,
    production: int,
) -> Release:
    """Put `version` on canary for `share` percent of threads. `production` is pinned as the
    production version when none is set yet (the version runs were getting before)."""

    def change(record: LabelsRecord) -> Release:
        if record["release"]:
            raise StoreError(
                f"{labels.what} already has v{record['release']['version']} on canary: "
                "promote or roll it back first (`canary --promote` or `--rollback`)"
            )
        if record["production"] is None:
            move_label(
                record, "production", production, by, f"pinned when v{version} went on canary"
            )
        if record["production"] == version:
            raise StoreError(f"v{version} is already the production version of {labels.what}")
        release: Release = {
            "id": uuid.uuid4().hex[:12],
            "version": version,
            "base": record["production"],
            "share": share,
            "manual": manual,
            "rule": rule.as_dict(),
            "started_at": now_iso(),
            "started_by": by,
            "reason": why,
            "next_look": 0,
            "looks": [],
            "status": "collecting",
            "arms": {
                "production": {"runs": 0, "successes": 0},
                "canary": {"runs": 0, "successes": 0},
            },
        }
        move_label(record, "canary", version, by, why, release_id=release["id"], share=share)
        record["release"] = release
        return release

    started: Release = (await labels.change(change))[1]
    return started


async def set_production(labels: LabelStore, version: int, by: str, why: str) -> LabelsRecord:
    """Serve `version` to every run; a running canary ends (promoted if it was `version`, else
    rolled back)."""

    def change(record: LabelsRecord) -> None:
        if record["release"]:
            _finish(
                record,
                "promote" if record["release"]["version"] == version else "rollback",
                by,
                why,
            )
        if record["production"] != version:
            move_label(record, "production", version, by, why)

    labels_now: LabelsRecord = (await labels.change(change))[0]
    return labels_now


async def end_release(labels: LabelStore, decision: str, by: str, why: str) -> Release:
    """A person's decision on the running canary: "promote" or "rollback"."""

    def change(record: LabelsRecord) -> Release:
        if not record["release"]:
            raise StoreError(
                f"{labels.what} has no canary running: start one with `release V --canary PERCENT`"
            )
        return _finish(record, decision, by, why)

    ended: Release = (await labels.change(change))[1]
    return ended


async def count_trial(
    labels: LabelStore, release_id: str, arm: str, runs: int, successes: int
) -> Release | None:
    """Add one run's trial (runs=1) or correct one after feedback (runs=0, successes=+-1), then
    apply the rule unless the release is manual. Returns the finished release when this call decided
    it. A trial for a release that has ended is ignored."""

    def change(record: LabelsRecord) -> object:
        release = record["release"]
        if not release or release["id"] != release_id:
            return UNCHANGED
        counts = release["arms"][cast(Arm, arm)]
        counts["runs"] += runs
        counts["successes"] = min(counts["runs"], max(0, counts["successes"] + successes))
        if release["manual"] or release["status"] == "undecided":
            return None
        rule = Rule(**release["rule"])
        verdict, release["next_look"], figures = decide(release["arms"], rule, release["next_look"])
        if figures:
            release["looks"] = [*release["looks"], figures]
        if verdict in ("promote", "rollback"):
            return _finish(record, verdict, AUTO, explain(verdict, figures, rule), figures)
        if verdict == "undecided":
            release["status"] = "undecided"
            release["undecided_reason"] = explain(verdict, figures, rule)
        return None

    decided: Release | None = (await labels.change(change))[1]
    return decided


async def count_run(
    store: BaseStore, tenant: str, served: Mapping[str, ServedVersion], success: bool
) -> list[DecidedRelease]:
    """Count a finished run in every release that served it; the releases this run decided."""
    decided: list[DecidedRelease] = []
    for subject, choice in sorted(served.items()):
        if release_id := choice.get("release_id"):
            done = await count_trial(
                labels_of(store, tenant, subject), release_id, choice["arm"], 1, int(success)
            )
            if done:
                decided.append(
                    {
                        "subject": subject,
                        "id": done["id"],
                        "version": done["version"],
                        "decision": done["decision"],
                        "why": done["why"],
                    }
                )
    return decided


async def correct_trial(
    store: BaseStore, tenant: str, trace: TraceRecord, before: float | None, after: float | None
) -> None:
    """Feedback changed a run's verdict (from `before` to `after`): correct its trial in the
    releases that served it."""
    old = run_success(trace.get("status"), trace.get("correct"), before)
    new = run_success(trace.get("status"), trace.get("correct"), after)
    if old == new:
        return
    for subject, choice in sorted((trace.get("served") or {}).items()):
        if release_id := choice.get("release_id"):
            await count_trial(
                labels_of(store, tenant, subject), release_id, choice["arm"], 0, 1 if new else -1
            )


# --- starting and looking ------------------------------------------------------------------


async def release(
    store: BaseStore,
    tenant: str,
    subject: str,
    version: int,
    share: float | None,
    by: str,
    why: str,
    rule: Rule,
    manual: bool,
) -> Release | LabelsRecord:
    """Check the version exists, then start the canary (or set production)."""
    kind, _, name = subject.partition("/")
    if kind == "playbook":
        playbooks = playbooks_in(store, tenant)
        head = (await playbooks.head(name)).version
        parent = (await playbooks.get(name, version)).parent
    else:
        prompts = prompts_in(store, tenant)
        head = (await prompts.head(name))["version"]
        parent = (await prompts.get(name, version))["parent"]
    labels = labels_of(store, tenant, subject)
    if share is None or share >= 100:
        return await set_production(labels, version, by, why or f"v{version} released to every run")
    before = head if version != head else (parent or 0)
    return await start_release(
        labels,
        version,
        share,
        by,
        why or f"v{version} on canary for {share:g}%",
        rule,
        manual,
        production=before,
    )


def arm_view(counts: ArmCounts, traces: list[TraceRecord]) -> dict[str, Any]:
    """One arm's counts with its success rate, interval and run metrics (shown, not stored)."""
    low, high = wilson(counts["successes"], counts["runs"])
    rate = round(counts["successes"] / counts["runs"], 4) if counts["runs"] else None
    stats = summarize(traces)
    return {
        **counts,
        "success_rate": rate,
        "ci95": [round(low, 4), round(high, 4)],
        **{
            k: stats[k]
            for k in (
                "ok_rate",
                "accuracy",
                "accuracy_runs",
                "feedback_mean",
                "feedback_runs",
                "latency_ms_p50",
                "latency_ms_p95",
                "mean_model_calls",
            )
        },
    }


async def canary_view(store: BaseStore, tenant: str, subject: str) -> dict[str, Any]:
    """The labels, the running (or last) release with both arms' metrics and intervals."""
    labels = await labels_of(store, tenant, subject).get()
    release = labels["release"] or (labels["releases"][-1] if labels["releases"] else None)
    view: dict[str, Any] = {
        "subject": subject,
        "production": labels["production"],
        "canary": labels["canary"],
        "running": bool(labels["release"]),
        "release": None,
        "events": labels["events"][-10:],
    }
    if release is None:
        return view
    traces = [
        t
        for t in await traces_in(store, tenant).traces()
        if (t.get("served") or {}).get(subject, {}).get("release_id") == release["id"]
    ]
    arms = {
        arm: arm_view(
            release["arms"][arm], [t for t in traces if t["served"][subject]["arm"] == arm]
        )
        for arm in ("production", "canary")
    }
    d, se = difference(release["arms"]["canary"], release["arms"]["production"])
    rule = Rule(**release["rule"])
    looks = rule.looks()
    view["release"] = {
        **{
            k: release.get(k)
            for k in (
                "id",
                "version",
                "base",
                "share",
                "manual",
                "status",
                "started_at",
                "started_by",
                "reason",
                "decision",
                "decided_by",
                "why",
                "undecided_reason",
            )
        },
        "rule": {**release["rule"], "looks_at_runs_per_arm": looks},
        "next_look_at": looks[release["next_look"]] if release["next_look"] < len(looks) else None,
        "arms": arms,
        "difference": round(d, 4),
        "difference_ci95": [round(d - 1.96 * se, 4), round(d + 1.96 * se, 4)],
        "looks": release["looks"],
    }
    return view
