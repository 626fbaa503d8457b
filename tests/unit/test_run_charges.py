"""What a served run is charged when it ends without a settled `spend`: the model calls seen under
its root run.

The deploy test (tests/integration/test_tenant_budgets.py) cancels a real run mid-way on a real
deployment; this checks, offline, that the watch adds each call's usage to the run it belongs to,
priced, nested calls included, and keeps runs apart.
"""

from __future__ import annotations

import asyncio
import uuid

from langchain_core.runnables import RunnableLambda

from parallax.runtime import settings as settings_mod
from parallax.server import run_charges
from testkit.scripted_model import ScriptedChatModel


def test_each_call_is_added_to_its_own_run_priced_and_a_failed_run_keeps_what_it_spent(monkeypatch):
    monkeypatch.setenv("PARALLAX_MODEL", "priced-model")
    monkeypatch.setenv("PARALLAX_PRICES", '{"priced-model": {"input": 1000, "output": 2000}}')
    settings_mod.reload_settings()
    model = ScriptedChatModel(
        script=lambda prompt, temperature, index: "four words of reply", calls=[]
    )
    watch = run_charges.SpendWatch()

    async def node(
        question: str,
    ) -> str:  # a node calling the model twice, one call inside a nested runnable
        first = await model.ainvoke(question)
        nested = RunnableLambda(lambda text: text).pipe(model)
        second = await nested.ainvoke(f"again: {question}")
        return f"{first.content} {second.content}"

    async def failing(question: str) -> str:
        await model.ainvoke(question)
        raise RuntimeError("cancelled after one call")

    async def main() -> tuple[str, str]:
        ok, failed = str(uuid.uuid4()), str(uuid.uuid4())
        await asyncio.gather(
            RunnableLambda(node).ainvoke(
                "one two three", {"callbacks": [watch], "run_id": uuid.UUID(ok)}
            ),
            RunnableLambda(failing).ainvoke(
                "five six", {"callbacks": [watch], "run_id": uuid.UUID(failed)}
            ),
            return_exceptions=True,
        )
        return ok, failed

    ok, failed = asyncio.run(main())
    # prompts of 3 and 4 words, two replies of 4; the failed run: a prompt of 2, a reply of 4
    assert (run_charges._ended[ok].tokens, run_charges._ended[failed].tokens) == (15, 6)
    assert run_charges._ended[ok].cost_usd == (7 * 1000 + 8 * 2000) / 1e6
    assert run_charges._ended[failed].cost_usd == (2 * 1000 + 4 * 2000) / 1e6
    assert (
        not watch.root_of and not watch.model_of and ok not in run_charges._live
    )  # nothing left behind


def test_a_call_to_a_model_without_a_price_makes_the_run_cost_unknown(monkeypatch):
    monkeypatch.setenv("PARALLAX_MODEL", "unpriced-model")
    settings_mod.reload_settings()
    model = ScriptedChatModel(script=lambda prompt, temperature, index: "42", calls=[])
    run_id = uuid.uuid4()

    async def node(question: str) -> str:
        return str((await model.ainvoke(question)).content)

    asyncio.run(
        RunnableLambda(node).ainvoke(
            "x", {"callbacks": [run_charges.SpendWatch()], "run_id": run_id}
        )
    )
    observed = run_charges._ended[str(run_id)]
    assert observed.tokens == 2 and observed.cost_usd is None
