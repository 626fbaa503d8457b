"""Where records live in a LangGraph store, and who may name them.

See docs/internals/storage.md#namespaces-and-tenants.
"""

from __future__ import annotations

import re

from parallax.runtime.run_context import check_store_tenant

NAME_RE = re.compile(r"^[A-Za-z0-9_-]{1,64}\Z")  # \Z, not $: "acme\n" is no name
NAME_PATTERN = "^[A-Za-z0-9_-]{1,64}$"
"""The same rule as a JSON Schema `pattern` (where `$` ends the text: no "\\Z" there), for tool
signatures."""


class StoreError(ValueError):
    """A one-line, user-facing problem with stored records (unknown name or version, bad file, lock
    timeout)."""


class NotFound(StoreError):
    """A record the caller named is not in the store; the CLI adds which store it searched."""


def check_tenant(tenant: str) -> str:
    """The tenant name, or StoreError for one that could reach outside its namespaces
    (TenantMismatch for another tenant's, in a served run)."""
    if not isinstance(tenant, str) or not NAME_RE.match(tenant):
        raise StoreError(f"bad tenant {tenant!r}: use 1-64 letters, digits, '-' or '_'")
    check_store_tenant(tenant)
    return tenant


def check_playbook_name(name: str) -> str:
    if not isinstance(name, str) or not NAME_RE.match(name):
        raise StoreError(f"bad playbook name {name!r}: use 1-64 letters, digits, '-' or '_'")
    return name


def playbook_namespace(tenant: str, name: str) -> tuple[str, str, str]:
    return ("playbooks", tenant, name)


def traces_namespace(tenant: str) -> tuple[str, str]:
    return ("traces", tenant)


def dead_letters_namespace(tenant: str) -> tuple[str, str]:
    return ("dlq", tenant)


def plan_results_namespace(tenant: str, trace_id: str) -> tuple[str, str, str]:
    return ("plan_results", tenant, trace_id)


def candidates_namespace(tenant: str, trace_id: str) -> tuple[str, str, str]:
    return ("candidates", tenant, trace_id)


def edit_conversations_namespace(tenant: str, trace_id: str) -> tuple[str, str, str]:
    return ("edit_conversations", tenant, trace_id)
