"""Count the run in the gray releases that served it, and let the rule decide (the solve graph's last node).

A run served by a release (a canary of its playbook or of a prompt it used) is one trial
in its arm; after each trial the rule of logic/release_decision.py may promote or roll
back the canary, under the labels' lock, so two runs finishing at once never both decide.
Running here, in the graph, is what makes gray release work the same from the CLI and
under the graph API. Runs that no release served (pinned evaluations, no canary) cost
nothing here.
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
    for done in await count_run(runtime.store, tenant_of(state.get("tenant")), served, succeeded(state)):
        log.warning("gray release of %s v%s: %s (%s)", done["subject"], done["version"], done["decision"], done["why"])
    return {}
