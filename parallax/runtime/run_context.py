"""A run's effective Context: what the caller set, the process settings for the rest.

Nodes call `context_of(runtime)` once per node run; the result has no unset fields (except
`dedupe_threshold`, where None means the merge's own default, and the two code-only
injection points). Resolving twice changes nothing, so a node may pass its Context on to a
subgraph as it is.

`tenant_of` is the one place a node learns whose data a run may touch: on the graph API the
authenticated tenant, elsewhere the input's.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from langgraph.config import get_config
from langgraph.runtime import Runtime

from parallax.runtime import settings as settings_mod
from parallax.state.context import Context

FROM_SETTINGS = tuple(f.name for f in dataclasses.fields(Context)
                      if f.name in settings_mod.Settings.model_fields and f.name != "straggler_factor")
"""The run settings a Context leaves unset and the process settings fill in: every Context field that is also a
setting (straggler_factor, whose default depends on the endpoint, is filled on its own)."""


def resolved(ctx: Context | dict[str, Any] | None = None) -> Context:
    """`ctx` (a Context, the dict an API caller sent, or nothing) with every unset field filled in."""
    if isinstance(ctx, dict):
        ctx = Context(**ctx)
    ctx = ctx or Context()
    settings = settings_mod.load()
    values = {name: getattr(settings, name) for name in FROM_SETTINGS
              if getattr(ctx, name) is None and getattr(settings, name) is not None}
    if ctx.straggler_factor is None:
        values["straggler_factor"] = settings.straggler_factor_or_default
    return dataclasses.replace(ctx, **values) if values else ctx


def context_of(runtime: Runtime[Context]) -> Context:
    """The run's resolved Context, whether the caller passed one, a dict, or nothing."""
    return resolved(runtime.context)


AUTH_TENANT_FIELD = "parallax_tenant"
"""The attribute Parallax's authentication (parallax/server/auth.py) puts on the authenticated user."""


class TenantMismatch(ValueError):
    """The input names a tenant other than the one the caller authenticated as."""


def authenticated_tenant() -> str | None:
    """The tenant of the caller who started this run on the graph API, from its authentication
    (`config["configurable"]["langgraph_auth_user"]`, set by the server), or None: no server
    authentication (the CLI, `langgraph dev`). Only Parallax's own authentication sets the field
    read here, so a server's default user never passes for a tenant."""
    try:
        configurable = get_config().get("configurable") or {}
    except RuntimeError:  # outside a graph run
        return None
    user = configurable.get("langgraph_auth_user")
    if user is None:
        return None
    if isinstance(user, Mapping):
        return user.get(AUTH_TENANT_FIELD)
    return getattr(user, AUTH_TENANT_FIELD, None)


def tenant_of(requested: str | None) -> str:
    """The run's tenant. On a server with Parallax's authentication it is the authenticated tenant,
    never the request body's: an input naming another tenant is refused (TenantMismatch), one naming
    the same tenant or none is fine. Without authentication it is the input's, else "default"."""
    tenant = authenticated_tenant()
    if tenant is None:
        return requested or "default"
    if requested is not None and requested != tenant:
        raise TenantMismatch(f"the input names tenant {requested!r}, but your API key belongs to tenant {tenant!r}: "
                             "leave `tenant` out (the server takes it from your key)")
    return tenant
