"""A run's effective Context, its tenant, and served mode (what a run of the graph API may not do).

See docs/internals/process.md#a-runs-context-and-served-mode.
"""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.config import get_config
from langgraph.runtime import Runtime

from parallax.runtime import settings as settings_mod
from parallax.state.context import Context

FROM_SETTINGS = tuple(
    f.name
    for f in dataclasses.fields(Context)
    if f.name in settings_mod.Settings.model_fields and f.name != "straggler_factor"
)
"""The run settings a Context leaves unset and the process settings fill in: every Context field
that is also a setting (straggler_factor, whose default depends on the endpoint, is filled on its
own)."""


def resolved(ctx: Context | dict[str, Any] | None = None) -> Context:
    """`ctx` (a Context, the dict an API caller sent, or nothing) with every unset field filled
    in."""
    if isinstance(ctx, dict):
        ctx = Context(**ctx)
    ctx = ctx or Context()
    settings = settings_mod.load()
    values = {
        name: getattr(settings, name)
        for name in FROM_SETTINGS
        if getattr(ctx, name) is None and getattr(settings, name) is not None
    }
    if ctx.straggler_factor is None:
        values["straggler_factor"] = settings.straggler_factor_or_default
    return dataclasses.replace(ctx, **values) if values else ctx


def context_of(runtime: Runtime[Context]) -> Context:
    """The run's resolved Context, whether the caller passed one, a dict, or nothing."""
    return resolved(runtime.context)


AUTH_TENANT_FIELD = "parallax_tenant"
"""The attribute Parallax's authentication (parallax/server/auth.py) puts on the authenticated user.
"""
CRON_USER = "cron-scheduler"
"""The display name of the user Aegra's cron scheduler runs a cron as
(aegra_api/services/cron_scheduler.py)."""


class TenantMismatch(ValueError):
    """The input or the run's state names a tenant other than the one the caller authenticated
    as."""


class Unauthenticated(PermissionError):
    """A served run with no authenticated tenant: it touches no tenant's records."""


class NotServed(PermissionError):
    """What the served API never does for a caller: run a command, open a repository or name a path
    on its disk."""


_serving = 0
"""How many server lifespans this process is inside (`serving()`); above 0, every run here is
served."""


@contextmanager
def serving() -> Iterator[None]:
    """Mark this process as serving the graph API for as long as the block lasts (the server's
    lifespan)."""
    global _serving
    _serving += 1
    try:
        yield
    finally:
        _serving -= 1


def _run_configurable() -> Mapping[str, Any] | None:
    """The running graph's `configurable`, or None outside a graph run."""
    try:
        return get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph run
        return None


def authenticated_tenant() -> str | None:
    """The tenant of the caller who started this run on the graph API, from its authentication
    (`config["configurable"]["langgraph_auth_user"]`, set by the server), or None: no server
    authentication (the CLI, `langgraph dev`). Only Parallax's own authentication sets the field
    read here, so a server's default user never passes for a tenant."""
    user = (_run_configurable() or {}).get("langgraph_auth_user")
    if user is None:
        return None

    def field(name: str) -> Any:
        return user.get(name) if isinstance(user, Mapping) else getattr(user, name, None)

    tenant = field(AUTH_TENANT_FIELD)
    if tenant is None and field("display_name") == CRON_USER:
        # Aegra's scheduler fires a cron as a User it builds from the cron's owner (its identity,
        # which Parallax's authentication made the tenant) without our field: that identity is the
        # tenant, never the cron's input
        identity = field("identity")
        settings = settings_mod.load()
        if identity in settings.api_key_tenants.values() or (settings.jwt_jwks and identity):
            return str(identity)
    return None if tenant is None else str(tenant)


AUTH_USER_FIELD, AUTH_ROLE_FIELD = "parallax_user", "parallax_role"
"""The authenticated user's fields naming the user below the tenant and their role (server/auth.py
sets them)."""


def authenticated_user() -> tuple[str | None, bool]:
    """(the user below the tenant who started this run, whether they are the tenant's
    administrator): (None, True) for a static key, a cron, the CLI or `langgraph dev`, which act for
    the whole tenant."""
    user = (_run_configurable() or {}).get("langgraph_auth_user")
    if user is None:
        return None, True

    def field(name: str) -> Any:
        return user.get(name) if isinstance(user, Mapping) else getattr(user, name, None)

    name, role = field(AUTH_USER_FIELD), field(AUTH_ROLE_FIELD)
    return (None if name is None else str(name)), role in (None, "admin")


def served() -> bool:
    """Whether the running code serves a caller of the deployed graph API: the process is serving
    (`serving()`), or the run carries Parallax's authenticated user."""
    return _serving > 0 or authenticated_tenant() is not None


def tenant_of(requested: str | None) -> str:
    """The run's tenant: the only way a node learns it. Served, it is the authenticated tenant,
    never the input's or the state's: one naming another tenant is refused (TenantMismatch), one
    naming the same tenant or none is fine, and a served run with no authenticated tenant is refused
    (Unauthenticated). Not served, it is `requested` (the input's), else "default"."""
    tenant = authenticated_tenant()
    if tenant is None:
        if served():
            raise Unauthenticated(
                "this run has no authenticated tenant: the server touches no tenant's records"
                " for it"
            )
        return requested or "default"
    if requested is not None and requested != tenant:
        raise TenantMismatch(
            f"the input names tenant {requested!r}, but your API key belongs to tenant {tenant!r}: "
            "leave `tenant` out (the server takes it from your key)"
        )
    return tenant


def check_store_tenant(tenant: str) -> None:
    """Refuse a served run's store namespace of any tenant but the authenticated one (every store
    calls this with the tenant it is opened for). Outside a graph run (the CLI's commands, the
    server's own sweeps) it passes.
    """
    if _run_configurable() is None or not served():
        return
    if tenant_of(None) != tenant:
        raise TenantMismatch(
            f"a served run of tenant {tenant_of(None)!r} may not touch tenant {tenant!r}'s records"
        )


def refuse_when_served(what: str) -> None:
    """NotServed when served: `what` (running a command, opening a repository, reading a path) is
    done only where the caller owns the machine (the CLI, the Python API, `langgraph dev`)."""
    if served():
        raise NotServed(
            f"{what} is not served over the graph API: the server runs no command and opens no path"
            " for a caller; run it with the `parallax` CLI on your own machine"
        )


_IDS = uuid.UUID("6f1c2a7e-5b8d-4c11-9a3e-2f0d8b7c4e51")


SCOPE = "parallax_call_scope"
"""The configurable key `subgraph_config` keeps the calling tasks' places under."""


def subgraph_config(config: RunnableConfig | None = None) -> RunnableConfig:
    """`config` for a graph a node calls, naming the calling task by its place in the run: the node,
    the step it runs in and its path (which `Send` of that step), all of which a replica that takes
    the run over finds again, unlike the task id in the checkpoint namespace, which derives from the
    checkpoint the task ran from and changes when a takeover finds no checkpoint and runs the step
    again. Give it to every graph called from a node (`solve.ainvoke(input, subgraph_config(),
    ...)`), so that the `task_scoped_id` of a node inside it survives a takeover too. Outside a
    graph: `config` as it is.
    """
    given: RunnableConfig = config or {}
    try:
        outer = get_config()
    except RuntimeError:
        return given
    meta, configurable = outer.get("metadata") or {}, outer.get("configurable") or {}
    path = ",".join(str(p) for p in meta.get("langgraph_path", ()))
    place = (
        f"{configurable.get(SCOPE, '')}{meta.get('langgraph_node')}"
        f"@{meta.get('langgraph_step')}({path})/"
    )
    return {**given, "configurable": {**(given.get("configurable") or {}), SCOPE: place}}


def task_scoped_id() -> str:
    """A new id (32 hex digits) that is the same each time this task runs again for the same server
    run.

    On the graph API (a `run_id` in the config) it is derived from the run and the task's place: for
    a node of the run's own graph (run once per run: `route`, a learn run's `start`), the node's
    name; inside a graph called from a node, the calling tasks' places (`subgraph_config`), then the
    node names and call counts of the checkpoint namespace (the node's first, second, ... call of a
    graph). A replica that takes a run over and runs the task again, from the same checkpoint or
    from an earlier one, gets the same id, so the records keyed by it (a trace) are overwritten,
    never written twice. Elsewhere (the CLI, no run id) it is random."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:
        configurable = {}
    run_id, namespace, scope = (
        configurable.get("run_id"),
        configurable.get("checkpoint_ns"),
        configurable.get(SCOPE),
    )
    if not run_id or not namespace:
        return uuid.uuid4().hex
    if (
        "|" in namespace and not scope
    ):  # called without subgraph_config: the namespace's task ids tell calls apart,
        return uuid.uuid5(
            _IDS, f"{run_id}/{namespace}"
        ).hex  # but change if a takeover runs the step again
    places = "|".join(part.split(":")[0] for part in namespace.split("|"))
    return uuid.uuid5(_IDS, f"{run_id}/{scope or ''}{places}").hex
