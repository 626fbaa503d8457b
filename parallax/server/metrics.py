"""Parallax's Prometheus series on /metrics, next to Aegra's, and the graphs' metrics callback.

See docs/deploy.md#metrics (the series) and docs/internals/server.md#metrics.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any
from uuid import UUID

try:
    from prometheus_client import REGISTRY, Counter, Gauge, Histogram, generate_latest
    from prometheus_client.exposition import CONTENT_TYPE_LATEST
    from prometheus_client.metrics_core import Metric
except ImportError as exc:  # pragma: no cover - only without the server extra
    raise ImportError(
        "parallax.server needs the server extra: pip install -e '.[server]' (Python 3.12)"
    ) from exc
from langchain_core.callbacks import BaseCallbackHandler
from starlette.responses import Response

from parallax.runtime.services import process_services
from parallax.state.vocabulary import BUSINESS

RUNS = Counter(
    "parallax_runs_total",
    "Runs finished on this replica, by graph and status.",
    ["graph", "status"],
)
BRANCHES = Counter(
    "parallax_branches_total",
    "Branches of finished solve runs, by kind and status.",
    ["kind", "status"],
)
BRANCH_SECONDS = Histogram(
    "parallax_branch_duration_seconds",
    "Duration of the branches of finished solve runs.",
    ["kind"],
    buckets=(0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 180, 600),
)
DEAD_LETTERS = Counter(
    "parallax_dead_letters_total", "Branches that escalated and went to the dead-letter list."
)
PLAYBOOK_VERSION = Gauge(
    "parallax_playbook_version",
    "Highest version of the playbook this replica served or committed.",
    ["playbook"],
)
OPEN_CIRCUITS = Gauge("parallax_open_circuits", "Model endpoints whose circuit breaker is open.")
OPEN_CIRCUITS.set_function(lambda: float(process_services().open_circuits()))
PENDING_RUNS = Gauge(
    "parallax_pending_runs", "Runs pending or running on the deployment (every replica)."
)
DOUBLE_TEXTS = Counter(
    "parallax_double_texts_total",
    "Runs created on a thread with a run in flight, by the strategy "
    "that met them (reject, interrupt, rollback; enqueue is not counted).",
    ["strategy"],
)
WEBHOOKS = Counter(
    "parallax_webhooks_total",
    "Webhook delivery attempts of this replica, by outcome (delivered, retry, failed).",
    ["outcome"],
)
RUN_WAITS = Counter(
    "parallax_run_waits_total",
    "Waits for a run's end (runs.wait, runs.join) on this replica, by how "
    "the end was seen: already, notified, polled (the 2 s safety net), timeout.",
    ["ended"],
)
COST = Counter(
    "parallax_cost_usd_total",
    "USD spent by finished runs on this replica, at the price table.",
    ["graph"],
)
TOKENS = Counter(
    "parallax_tokens_total", "Tokens spent by finished runs on this replica.", ["graph"]
)
COST_UNKNOWN = Counter(
    "parallax_cost_unknown_runs_total",
    "Finished runs whose cost is unknown: a model they used has no price (PARALLAX_PRICES).",
    ["graph"],
)
BUDGET_STOPS = Counter(
    "parallax_budget_stops_total", "Finished runs their budget stopped (budget reached).", ["graph"]
)
BUDGET_REFUSALS = Counter(
    "parallax_daily_budget_refusals_total",
    "New runs refused (429) because their tenant's "
    "daily budget is reached, by face (graph_api, openai).",
    ["face"],
)
TENANT_SPEND_TOKENS = Gauge(
    "parallax_tenant_spend_tokens",
    "Tokens charged today (UTC) to a tenant with a daily budget "
    "(every replica: read from the spend ledger at each scrape).",
    ["tenant"],
)
TENANT_SPEND_USD = Gauge(
    "parallax_tenant_spend_usd",
    "USD charged today (UTC) to a tenant with a daily budget "
    "(every replica: read from the spend ledger at each scrape).",
    ["tenant"],
)
SWEPT = Counter(
    "parallax_swept_total", "Rows the retention sweeps of this replica deleted, by kind.", ["kind"]
)
PRIVATE = frozenset(
    {"parallax_playbook_version", "parallax_tenant_spend_tokens", "parallax_tenant_spend_usd"}
)
"""The series that name a tenant's data (a playbook, a tenant, its spend): shown only with the
metrics key."""


class PublicView:
    """The default registry without the PRIVATE series (a collector view for `generate_latest`)."""

    def collect(self) -> Iterator[Metric]:
        for family in REGISTRY.collect():
            if family.name not in PRIVATE:
                yield family


def public_exposition() -> Response:
    """/metrics as anyone may see it."""
    return Response(generate_latest(PublicView()), media_type=CONTENT_TYPE_LATEST)


def _interrupted(outputs: Any) -> bool:
    return isinstance(outputs, dict) and bool(outputs.get("__interrupt__"))


_highest: dict[str, int] = {}


def _raise_version(playbook: str | None, version: Any) -> None:
    if playbook and isinstance(version, int) and version >= _highest.get(playbook, 0):
        _highest[playbook] = version
        PLAYBOOK_VERSION.labels(playbook=playbook).set(version)


def count_solve(inputs: dict[str, Any], outputs: dict[str, Any]) -> str:
    """Count a finished solve run's branches and dead letters; its status."""
    for branch in outputs.get("branches") or []:
        kind, status = branch.get("kind", "unknown"), branch.get("status", "unknown")
        BRANCHES.labels(kind=kind, status=status).inc()
        if isinstance(branch.get("latency_ms"), int | float):
            BRANCH_SECONDS.labels(kind=kind).observe(branch["latency_ms"] / 1000)
        if branch.get("state") == "ESCALATED" and kind in BUSINESS:
            DEAD_LETTERS.inc()
    _raise_version(inputs.get("playbook", "default"), outputs.get("playbook_version"))
    return str(outputs.get("status") or "unknown")


def count_spend(graph: str, outputs: dict[str, Any]) -> None:
    """Count what a finished run spent (its `spend`, settled by its last node) and whether its
    budget stopped it."""
    spend = outputs.get("spend")
    if not isinstance(spend, dict):
        return
    TOKENS.labels(graph=graph).inc(max(0, int(spend.get("tokens") or 0)))
    cost = spend.get("cost_usd")
    if isinstance(cost, int | float):
        COST.labels(graph=graph).inc(max(0.0, float(cost)))
    else:
        COST_UNKNOWN.labels(graph=graph).inc()
    if str(outputs.get("reason") or "").startswith("budget reached"):
        BUDGET_STOPS.labels(graph=graph).inc()


class RunMetrics(BaseCallbackHandler):
    """Counts the root runs of one graph. Inner runs (nodes, subgraphs) only tell their root that it
    was interrupted: a node that calls `interrupt()` ends with GraphInterrupt, while the root run
    then ends normally, its output saying nothing of it."""

    run_inline = True  # prometheus_client is thread-safe and cheap: no executor hop per event

    def __init__(self, graph: str) -> None:
        self.graph = graph
        self.inputs: dict[UUID, dict[str, Any]] = {}
        self.root_of: dict[UUID, UUID] = {}
        self.children: dict[UUID, list[UUID]] = {}
        self.interrupted: set[UUID] = set()

    def on_chain_start(
        self,
        serialized: Any,
        inputs: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        if parent_run_id is None:
            self.inputs[run_id] = inputs if isinstance(inputs, dict) else {}
            self.children[run_id] = []
            return
        root = self.root_of.get(parent_run_id, parent_run_id)
        if root in self.children:
            self.root_of[run_id] = root
            self.children[root].append(run_id)

    def _finish(self, run_id: UUID) -> tuple[dict[str, Any], bool]:
        for child in self.children.pop(run_id, []):
            self.root_of.pop(child, None)
        interrupted = run_id in self.interrupted
        self.interrupted.discard(run_id)
        return self.inputs.pop(run_id, {}), interrupted

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        if parent_run_id is not None:
            return
        inputs, interrupted = self._finish(run_id)
        if isinstance(outputs, dict) and self.graph in ("solve", "plan") and not interrupted:
            count_spend(self.graph, outputs)
        if interrupted or _interrupted(outputs):
            status = "interrupted"
        elif self.graph == "solve" and isinstance(outputs, dict):
            status = count_solve(inputs, outputs)
        else:
            status = "success"
            if self.graph == "learn" and isinstance(outputs, dict):
                _raise_version(outputs.get("playbook"), outputs.get("to_version"))
        RUNS.labels(graph=self.graph, status=status).inc()

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        is_interrupt = type(error).__name__ in ("GraphInterrupt", "NodeInterrupt")
        if parent_run_id is not None:
            if is_interrupt and (root := self.root_of.get(run_id)) is not None:
                self.interrupted.add(root)
            return
        _, interrupted = self._finish(run_id)
        RUNS.labels(
            graph=self.graph, status="interrupted" if is_interrupt or interrupted else "error"
        ).inc()


def with_metrics(graph: Any, name: str) -> Any:
    """The compiled graph, counting its runs (a copy: the original graph is untouched) and adding up
    what each spends for the tenant's day (server/run_charges.py), with an empty fence record in its
    config that Aegra copies for each execution (server/lease_fence.py)."""
    from parallax.server.lease_fence import FENCE_KEY
    from parallax.server.run_charges import SpendWatch

    return graph.with_config(
        {"callbacks": [RunMetrics(name), SpendWatch()], "configurable": {FENCE_KEY: {}}}
    )
