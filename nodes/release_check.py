"""The solve graph's last node: count the run in the gray releases that served it.

The rule may promote or roll back a canary here, under the labels' lock
(docs/internals/learning.md#gray-release).
"""

from __future__ import annotations

import logging
from typing import Any

from langgraph.runtime import Runtime

from parallax.logic.releases import count_run
from parallax.logic.run_record import succeeded, used_subjects
from parallax.runtime.run_context import tenant_of
from parallax.state.context import Context
from parallax.state.solve import SolveState

log = logging.getLogger("parallax.release")


async def release_check(state: SolveState, runtime: Runtime[Context]) -> dict[str, Any]:
    served = used_subjects(state)
    if runtime.store is None or not any(choice.get("release_id") for choice in served.values()):
        return {}
    for done in await count_run(
        runtime.store, tenant_of(state.get("tenant")), served, succeeded(state)
    ):
        log.warning(
            "gray release of %s v%s: %s (%s)",
            done["subject"],
            done["version"],
            done["decision"],
            done["why"],
        )
    return {}
