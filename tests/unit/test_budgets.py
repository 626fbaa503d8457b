"""Run budgets (logic/budget.py, runtime/request_budget.py) against the scripted billing server of
testkit, over HTTP: every request is held at its worst case (its prompt counted by the server's own
/tokenize, `max_tokens` per choice) before it is sent, so what the server bills never passes the
budget; a request that does not fit is shrunk or not sent, and the run ends needs_review saying
which budget and with which figures."""

from __future__ import annotations

import asyncio
import itertools
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.graphs.plan import graph as plan_graph
from parallax.graphs.solve import graph as solve_graph
from parallax.runtime.prices import DEFAULT_PRICES
from parallax.runtime.settings import reload_settings
from parallax.state.context import Context
from testkit.billing_server import BillingServer, Pricing
from testkit.fault_server import _requested_schema, schema_instance
from testkit.word_counts import word_counts

runner = CliRunner()
WORDS = (
    "revenue",
    "margin",
    "growth",
    "segment",
    "cash",
    "debt",
    "risk",
    "guidance",
    "market",
    "cost",
)
PRICE = DEFAULT_PRICES["gpt-4o-mini"]
LESSON = "Add the two numbers of the sum before answering; state the total."


def reply(body: dict, k: int) -> str:
    """A valid reply of the schema asked for, with 20 words of reasoning; reflections and curations
    carry a lesson."""
    _, schema = _requested_schema(body)
    name = ((body.get("response_format") or {}).get("json_schema") or {}).get("name", "")
    if name == "Reflection":
        return json.dumps({"diagnosis": "did not add", "lessons": [LESSON], "item_tags": []})
    if name == "Curation":
        return json.dumps({"entries": [{"section": "sums", "text": LESSON, "about": ["sum"]}]})
    value = schema_instance(schema) if schema is not None else {"answer": "42"}
    if isinstance(value, dict) and "reasoning" in value:
        value["reasoning"] = " ".join(WORDS[(k + i) % len(WORDS)] for i in range(20))
    return json.dumps(value)


@pytest.fixture
def server(billing, monkeypatch, tmp_path) -> BillingServer:
    monkeypatch.setenv("PARALLAX_MODEL", "gpt-4o-mini")
    monkeypatch.setenv("PARALLAX_HOME", str(tmp_path))
    for bound in (
        "MIN",
        "MAX",
    ):  # the default: every vote at one temperature, so a wave is one request with `n`
        monkeypatch.setenv(f"PARALLAX_VOTE_TEMPERATURE_{bound}", "0.7")
    monkeypatch.delenv("PARALLAX_PRICES", raising=False)
    reload_settings()
    started: BillingServer = billing(reply, Pricing(base_ms=5, decode_ms_per_token=0.1))
    return started


def page(words: int) -> str:
    return " ".join(WORDS[i % len(WORDS)] for i in range(words))


def vote(votes: int, task: str = "What is 6 times 7? Give the number.", **budget) -> dict:
    return {"task": task, "mode": "vote", "votes": votes, **budget}


def run(graph, payload: dict, **context) -> dict:
    ctx = Context(straggler_factor=0.0, early_stop=False, **context)
    return asyncio.run(graph.ainvoke(payload, context=ctx))


def billed_tokens(server: BillingServer) -> int:
    bill = server.bill()
    return bill.prompt_tokens + bill.completion_tokens


def billed_cost(server: BillingServer) -> float:
    return sum(
        (
            (e["prompt_tokens"] - e["cached_tokens"]) * PRICE.input
            + e["cached_tokens"] * (PRICE.cached_input or 0)
            + e["completion_tokens"] * PRICE.output
        )
        / 1e6
        for e in server.log()
    )


def prompt_of(server: BillingServer, payload: dict, **context) -> int:
    """The prompt tokens one request of this run sends (measured by a run without a budget, then
    forgotten)."""
    run(solve_graph, payload, **context)
    tokens = server.log()[0]["prompt_tokens"]
    server.reset()
    return int(tokens)


def test_the_issues_vote_of_eight_over_a_page_is_refused_before_it_is_sent(server, tmp_path):
    """`parallax run --input-file task.txt --mode vote --votes 8 --no-early-stop --max-tokens 300
    --json` over about 1,550 prompt tokens: before, one request with n = 8 went out and spent 5.4x
    the budget, ending ok.
    """
    task = tmp_path / "task.txt"
    task.write_text(page(1530) + "\n\nBy how much did revenue grow?")
    result = runner.invoke(
        app,
        [
            "run",
            "--input-file",
            str(task),
            "--mode",
            "vote",
            "--votes",
            "8",
            "--no-early-stop",
            "--max-tokens",
            "300",
            "--json",
        ],
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["status"] == "needs_review"
    assert (
        out["reason"].startswith("budget reached: a request of 15")
        and "counted by endpoint" in out["reason"]
    )
    assert (
        "reply tokens x" in out["reason"]
    )  # x 8 (the wave), or x 1 (a straggler's backup, asking alone)
    assert (
        "does not fit in what is left of max_tokens 300 (0 spent, 0 in flight, 300 left)"
        in out["reason"]
    )
    assert server.bill().requests == 0 and billed_tokens(server) <= 1.05 * 300
    assert out["spend"]["tokens"] == 0


def test_a_budget_smaller_than_the_prompt_is_refused_before_any_request(server):
    out = run(solve_graph, {"task": page(400) + " What grew?", "mode": "direct", "max_tokens": 200})
    assert server.bill().requests == 0 and server.arrivals() == 0
    assert out["status"] == "needs_review" and out["reason"].startswith(
        "budget reached: a request of 4"
    )
    assert "max_tokens 200 (0 spent" in out["reason"]
    refused = [b for b in out["branches"] if b["kind"] == "direct"]
    assert refused[0]["status"] == "cancelled" and refused[0]["cause"] == "budget"


def test_a_wave_is_shrunk_to_the_choices_its_budget_fits(server):
    payload = vote(8, task=page(200) + " What is 6 times 7?")
    prompt = prompt_of(server, payload, max_tokens=50)
    budget = prompt + 3 * 50 + 10  # the prompt once and three replies of at most 50 tokens
    out = run(solve_graph, {**payload, "max_tokens": budget}, max_tokens=50)
    assert [(e["n"], e["choices"]) for e in server.log()] == [(3, 3)]  # one request, three choices
    assert billed_tokens(server) <= budget and out["spend"]["tokens"] == billed_tokens(server)
    refused = [b for b in out["branches"] if b.get("cause") == "budget"]
    assert len(refused) == 5 and all(b["status"] == "cancelled" for b in refused)
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached")


def test_a_request_that_fits_only_with_a_shorter_reply_is_sent_with_a_lower_cap(server):
    payload = {"task": page(100) + " What grew?", "mode": "direct"}
    prompt = prompt_of(server, payload)
    out = run(solve_graph, {**payload, "max_tokens": prompt + 120})  # the reply cap is 384: 120 fit
    assert [e["max_tokens"] for e in server.log()] == [120]
    assert billed_tokens(server) <= prompt + 120 and out["status"] == "ok"


def test_a_cost_budget_holds_the_same_way(server):
    payload = vote(8, task=page(300) + " What is 6 times 7?")
    prompt = prompt_of(server, payload, max_tokens=40)
    budget = (
        prompt * PRICE.input + 2 * 40 * PRICE.output
    ) / 1e6  # the prompt at full price and two replies
    out = run(solve_graph, {**payload, "max_cost": budget}, max_tokens=40)
    assert [e["choices"] for e in server.log()] == [2]
    assert billed_cost(server) <= budget and out["status"] == "needs_review"
    assert "max_cost $" in out["reason"]


def test_without_a_tokenizer_the_estimate_holds_and_says_so(server):
    server.reset(Pricing(base_ms=5, decode_ms_per_token=0.1, tokenize=False))
    payload = vote(8, task=page(200) + " What is 6 times 7?")
    prompt = prompt_of(server, payload, max_tokens=50)
    out = run(solve_graph, {**payload, "max_tokens": prompt + 4 * 50}, max_tokens=50)
    assert billed_tokens(server) <= prompt + 4 * 50
    assert "counted by estimate" in out["reason"] and out["status"] == "needs_review"


def test_without_a_budget_the_same_vote_asks_every_vote_in_one_request(server):
    out = run(solve_graph, vote(8), max_concurrency=2)
    assert (
        [e["choices"] for e in server.log()] == [8]
        and out["status"] == "ok"
        and "budget" not in out["reason"]
    )
    assert server.state.tokenized == 0  # a run without a budget counts nothing before it asks
    assert out["spend"]["cost_usd"] > 0  # gpt-4o-mini has a default price


def test_an_adaptive_vote_asks_no_further_wave_past_its_budget(server):
    answers = itertools.count()
    server.state.reply = lambda body, k: json.dumps(
        {"reasoning": "r", "answer": str(next(answers) % 3)}
    )  # no settling
    payload = vote(16, task=page(100) + " What is 6 times 7?")
    prompt = prompt_of(server, {**payload, "votes": 1}, max_tokens=30)
    out = asyncio.run(
        solve_graph.ainvoke(
            {**payload, "max_tokens": prompt + 3 * 30 + 5},
            context=Context(
                straggler_factor=0.0, early_stop=True, vote_first_wave=3, max_tokens=30
            ),
        )
    )
    assert [e["choices"] for e in server.log()] == [3]  # the first wave, then no other
    assert out["votes_asked"] == 3 and "the next wave was not asked" in out["stop_reason"]
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached")


def test_a_cost_budget_with_a_model_that_has_no_price_sends_nothing_and_says_why(
    server, monkeypatch
):
    monkeypatch.setenv("PARALLAX_MODEL", "my-llama")
    reload_settings()
    out = run(solve_graph, vote(6, max_cost=1.0))
    assert server.arrivals() == 0  # its cost could not be known, so the budget could not be held
    assert out["reason"].startswith(
        "budget reached: cost unknown (no price for the model), so max_cost $1"
    )


def test_a_plan_holds_its_budget_across_its_tasks(server):
    plan = {
        "tasks": [
            {
                "id": i,
                "goal": f"What is {i} times 7?",
                "kind": "solve",
                "deps": [i - 1] if i > 1 else [],
            }
            for i in range(1, 7)
        ],
        "synthesis": "concat",
    }
    payload = {"task": "Six steps.", "mode": "plan", "plan": plan, "max_replans": 0}
    one_task = run(
        plan_graph, {**payload, "plan": {**plan, "tasks": plan["tasks"][:1]}}, max_tokens=60
    )
    server.reset()
    budget = int(2.5 * one_task["spend"]["tokens"]) + 2 * 60
    out = run(plan_graph, {**payload, "max_tokens": budget}, max_tokens=60)
    statuses = [t["status"] for t in out["tasks"]]
    assert statuses[:2] == ["DONE", "DONE"] and statuses[-1] != "DONE"
    assert billed_tokens(server) <= budget
    assert out["status"] == "needs_review" and out["reason"].startswith("budget reached")


def test_the_cli_refuses_a_bad_budget_in_one_line(server):
    bad = runner.invoke(app, ["run", "What is 6 times 7?", "--max-cost", "0"])
    assert (
        bad.exit_code == 2
        and "--max-cost must be a number above 0 and at most 100000, got 0" in bad.output
    )
    assert "Traceback" not in bad.output and server.arrivals() == 0


def test_the_python_api_takes_a_budget_and_reports_the_cost(server):
    import parallax

    result = parallax.solve(
        page(50) + " What is 6 times 7?",
        mode="vote",
        votes=8,
        max_tokens=400,
        context=Context(early_stop=False, max_concurrency=1, straggler_factor=0.0, max_tokens=100),
    )
    assert result.status == "needs_review" and result.reason.startswith("budget reached")
    assert 0 < result.tokens <= 400 and result.cost_usd is not None and result.cost_usd > 0
    with pytest.raises(parallax.InvalidInput, match="max_tokens"):
        parallax.solve("What is 6 times 7?", max_tokens=0)


# --- the other graphs that call a model
# ------------------------------------------------------------


def test_a_chat_turn_holds_its_budget_over_its_rewrite_and_its_run(server):
    from langgraph.checkpoint.memory import InMemorySaver

    from parallax.graphs.chat import builder as chat_builder

    chat = chat_builder.compile(checkpointer=InMemorySaver())
    ctx = Context(straggler_factor=0.0, early_stop=False, max_tokens=60)
    thread = {"configurable": {"thread_id": "budgeted"}}
    asyncio.run(
        chat.ainvoke(
            {"messages": [{"role": "user", "content": page(80) + " What grew?"}], "mode": "direct"},
            thread,
            context=ctx,
        )
    )
    first = server.log()[0]["prompt_tokens"]
    server.reset()
    # a follow-up: its rewrite (condense) and its run's vote of 8 share a budget of two prompts and
    # four replies
    budget = 2 * first + 4 * 60
    out = asyncio.run(
        chat.ainvoke(
            {
                "messages": [{"role": "user", "content": "And by how much?"}],
                "mode": "vote",
                "votes": 8,
                "max_tokens": budget,
            },
            thread,
            context=ctx,
        )
    )
    kinds = [e["schema"] for e in server.log()]
    assert kinds[0] == "CondensedTask" and billed_tokens(server) <= budget
    assert out["last_run"]["status"] == "needs_review" and out["last_run"]["reason"].startswith(
        "budget reached"
    )


def learn_tasks(n: int) -> list[dict]:
    return [
        {
            "id": f"t{i}",
            "input": f"Add the two numbers {i} and {i + 1}: state the sum total.",
            "target": str(2 * i + 1),
        }
        for i in range(n)
    ]


def test_a_learn_run_holds_its_budget_and_starts_no_batch_past_it(server):
    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.learn import builder as learn_builder

    ctx = Context(
        straggler_factor=0.0, max_tokens=60, embedder=word_counts(LESSON.lower().split() + ["what"])
    )
    learn = learn_builder.compile(store=InMemoryStore())
    whole = asyncio.run(
        learn.ainvoke({"tasks": learn_tasks(6), "batch": 2, "approve": False}, context=ctx)
    )
    spent = billed_tokens(server)
    assert whole["spend"]["tokens"] == spent and len(whole["batches"]) == 3
    server.reset()
    budget = spent // 2
    out = asyncio.run(
        learn_builder.compile(store=InMemoryStore()).ainvoke(
            {"tasks": learn_tasks(6), "batch": 2, "max_tokens": budget}, context=ctx
        )
    )
    assert billed_tokens(server) <= budget and out["spend"]["tokens"] <= budget
    assert out["budget_stop"].startswith("budget reached") and len(out["batches"]) < 3


def test_a_loop_round_passes_its_budget_to_its_learn_run(server):
    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.loop import builder as loop_builder
    from parallax.graphs.solve import builder as solve_builder

    store = InMemoryStore()
    ctx = Context(
        straggler_factor=0.0, max_tokens=60, embedder=word_counts(LESSON.lower().split() + ["what"])
    )
    solve = solve_builder.compile(store=store)

    async def production() -> None:
        for i in range(6):
            await solve.ainvoke(
                {
                    "task": f"Add the two numbers {i} and {i + 1}: state the sum total.",
                    "mode": "direct",
                },
                {"configurable": {"thread_id": f"thread-{i}"}},
                context=ctx,
            )

    asyncio.run(production())
    server.reset()
    out = asyncio.run(
        loop_builder.compile(store=store).ainvoke({"share": 50, "max_tokens": 400}, context=ctx)
    )
    assert billed_tokens(server) <= 400
    assert "budget reached: max_tokens 400" in out["why"]


def test_learn_chat_and_loop_refuse_a_bad_budget():
    from langgraph.store.memory import InMemoryStore

    from parallax.graphs.learn import builder as learn_builder
    from parallax.logic.graph_inputs import validate_loop_input
    from parallax.logic.input_rules import InvalidInput

    with pytest.raises(InvalidInput, match="max_cost must be a number above 0"):
        asyncio.run(
            learn_builder.compile(store=InMemoryStore()).ainvoke(
                {"tasks": learn_tasks(1), "max_cost": -1}
            )
        )
    with pytest.raises(InvalidInput, match="max_tokens must be a whole number from 1 to"):
        validate_loop_input({"max_tokens": 0})


def test_the_daily_budget_caps_every_graph_that_calls_a_model():
    from parallax.runtime.storage.spend_ledger import BUDGETED_GRAPHS, DDL

    assert set(BUDGETED_GRAPHS) == {"solve", "plan", "chat", "learn", "loop"}
    assert "graph NOT IN ('solve', 'plan', 'chat', 'learn', 'loop')" in DDL
    assert Path  # the served walk-through is tests/integration/test_tenant_budgets.py


def test_parallax_learn_takes_a_budget_and_refuses_a_bad_one(server, tmp_path):
    tasks = tmp_path / "tasks.jsonl"
    tasks.write_text("".join(json.dumps(t) + "\n" for t in learn_tasks(4)))
    bad = runner.invoke(app, ["learn", str(tasks), "--max-tokens", "0"])
    assert bad.exit_code == 2 and "max_tokens must be a whole number from 1 to" in bad.output
    assert "Traceback" not in bad.output and server.arrivals() == 0
    result = runner.invoke(
        app, ["learn", str(tasks), "--batch", "2", "--max-tokens", "500", "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert out["budget_stop"].startswith("budget reached") and billed_tokens(server) <= 500


def test_a_reply_cut_at_the_cap_its_budget_lowered_ends_the_run_saying_so(server):
    server.state.reply = lambda body, k: json.dumps(
        {"reasoning": " ".join(["because"] * 80), "answer": "42"}
    )
    payload = {"task": page(100) + " What grew?", "mode": "direct"}
    prompt = prompt_of(server, payload, max_tokens=120)
    out = run(
        solve_graph, {**payload, "max_tokens": prompt + 40}, max_tokens=120
    )  # room for 40 of its 83 tokens
    assert [e["max_tokens"] for e in server.log()] == [40] and billed_tokens(server) <= prompt + 40
    assert out["status"] == "needs_review" and out["reason"].startswith(
        "budget reached: the reply was cut at 40 tokens"
    )
