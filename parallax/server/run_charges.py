"""Aegra patch: runs that end without a settled `spend` are charged to the tenant's day.

Cancelled and failed runs, and the other graphs' runs, are charged what this replica saw them spend.
See docs/internals/server.md#charges-of-runs-without-a-settled-spend-run_chargespy.
"""

from __future__ import annotations

import functools
import logging
import time
from collections import OrderedDict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from langchain_core.callbacks import BaseCallbackHandler

from parallax.runtime import settings as settings_mod
from parallax.runtime.prices import branch_cost, price_table
from parallax.runtime.storage.spend_ledger import CHARGE_ENDED_SQL
from parallax.runtime.structured_call import add_usage, no_tokens
from parallax.server.connections import connection

log = logging.getLogger("parallax.run_charges")

KEEP_ENDED = 10_000
"""Ended runs whose tally waits for their finalization (a run whose lease was lost is never
finalized here)."""


@dataclass
class Observed:
    """What one run was seen to spend in this process."""

    tokens: int = 0
    cost_usd: float | None = 0.0
    started: float = field(default_factory=time.monotonic)

    def add(self, tokens: int, cost: float | None) -> None:
        self.tokens += tokens
        self.cost_usd = None if cost is None or self.cost_usd is None else self.cost_usd + cost


_live: dict[str, Observed] = {}
_ended: OrderedDict[str, Observed] = OrderedDict()


def usage_of(response: Any) -> dict[str, int]:
    """{prompt, completion, total, cached_tokens} of one model response (all its choices), from the
    endpoint's `usage`, else from its first choice's message as a branch reads it
    (runtime/structured_call.py).
    """
    output = getattr(response, "llm_output", None) or {}
    usage = output.get("token_usage") if isinstance(output, dict) else None
    if isinstance(usage, dict):
        details = usage.get("prompt_tokens_details") or {}
        return {
            "prompt": int(usage.get("prompt_tokens") or 0),
            "completion": int(usage.get("completion_tokens") or 0),
            "total": int(usage.get("total_tokens") or 0),
            "cached_tokens": int(
                (details.get("cached_tokens") if isinstance(details, dict) else 0) or 0
            ),
        }
    total = no_tokens()
    for choices in getattr(response, "generations", None) or []:
        for generation in choices[:1]:  # every choice of one request carries the request's usage
            if (message := getattr(generation, "message", None)) is not None:
                add_usage(total, message)
    return total


class SpendWatch(BaseCallbackHandler):
    """Adds each model call's usage to the run (root) it belongs to."""

    run_inline = True

    def __init__(self) -> None:
        self.root_of: dict[UUID, UUID] = {}
        self.model_of: dict[UUID, str] = {}

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
            _live[str(run_id)] = Observed()
        else:
            self._join(run_id, parent_run_id)

    def _join(self, run_id: UUID, parent_run_id: UUID) -> None:
        root = self.root_of.get(parent_run_id, parent_run_id)
        if str(root) in _live:
            self.root_of[run_id] = root

    def on_chat_model_start(
        self,
        serialized: Any,
        messages: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model_start(run_id, parent_run_id, invocation_params)

    def on_llm_start(
        self,
        serialized: Any,
        prompts: Any,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        invocation_params: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        self._model_start(run_id, parent_run_id, invocation_params)

    def _model_start(
        self, run_id: UUID, parent_run_id: UUID | None, params: dict[str, Any] | None
    ) -> None:
        if parent_run_id is not None:
            self._join(run_id, parent_run_id)
        params = params or {}
        self.model_of[run_id] = str(params.get("model") or params.get("model_name") or "")

    def on_llm_end(
        self, response: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        model = self.model_of.pop(run_id, "")
        root = self.root_of.pop(run_id, None)
        observed = _live.get(str(root)) if root is not None else None
        if observed is None:
            return
        tokens = usage_of(response)
        settings = settings_mod.load()
        cost = branch_cost(price_table(settings), model or settings.chat_model_name, tokens)
        observed.add(tokens["prompt"] + tokens["completion"], cost)

    def on_llm_error(self, error: BaseException, *, run_id: UUID, **kwargs: Any) -> None:
        self.model_of.pop(run_id, None)
        self.root_of.pop(run_id, None)

    def _end(self, run_id: UUID, parent_run_id: UUID | None) -> None:
        if parent_run_id is not None:
            self.root_of.pop(run_id, None)
            return
        observed = _live.pop(str(run_id), None)
        if observed is not None:
            _ended[str(run_id)] = observed
            while len(_ended) > KEEP_ENDED:
                _ended.popitem(last=False)

    def on_chain_end(
        self, outputs: Any, *, run_id: UUID, parent_run_id: UUID | None = None, **kwargs: Any
    ) -> None:
        self._end(run_id, parent_run_id)

    def on_chain_error(
        self,
        error: BaseException,
        *,
        run_id: UUID,
        parent_run_id: UUID | None = None,
        **kwargs: Any,
    ) -> None:
        self._end(run_id, parent_run_id)


async def charge_observed(run_id: str) -> None:
    """Charge the ended run what this replica saw it spend, unless it was charged already (never
    raises)."""
    observed = _ended.pop(run_id, None) or _live.pop(run_id, None)
    if observed is None:
        return
    try:
        async with connection() as conn:
            await conn.execute(
                CHARGE_ENDED_SQL,
                {"run_id": run_id, "tokens": observed.tokens, "cost": observed.cost_usd},
            )
    except Exception as exc:  # noqa: BLE001 - the run's end is stored; a lost charge is logged, never raised
        log.warning(
            "could not charge run %s (%d tokens): %s: %s",
            run_id,
            observed.tokens,
            type(exc).__name__,
            exc,
        )


def install() -> None:
    """Wrap Aegra's `finalize_run` to charge the ended run; a second call changes nothing."""
    from aegra_api.services import run_executor

    original: Callable[..., Awaitable[bool]] = run_executor.finalize_run
    if getattr(original, "parallax_charges", False):
        return

    @functools.wraps(original)
    async def finalize_and_charge(run_id: str, *args: Any, **kwargs: Any) -> bool:
        finalized = await original(run_id, *args, **kwargs)
        await charge_observed(
            run_id
        )  # finalized or not: the run has ended (here, or by its cancel)
        return finalized

    finalize_and_charge.parallax_charges = True  # type: ignore[attr-defined]
    run_executor.finalize_run = finalize_and_charge
