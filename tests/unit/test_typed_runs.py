"""Runs with the user's output schema, end to end against a scripted OpenAI-compatible server.

The server (testkit/fault_server.py) speaks HTTP like any endpoint; its replies come from
testkit/extraction_model.py, which answers whatever schema the request carries. So these
tests go through the product path: ChatOpenAI, the `response_format` Parallax builds from the
user's schema, reply validation, the field-wise merge, the CLI and the Python API.
"""

from __future__ import annotations

import json
import sys
from typing import TypedDict

import pytest
from langgraph.graph import END, START, StateGraph
from pydantic import BaseModel
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime import settings as settings_mod
from testkit.extraction_model import ExtractionModel, Fact
from testkit.fault_server import FaultConfig, chat_log
from testkit.scripted_model import scripted

runner = CliRunner()
FILING = {
    "type": "object",
    "properties": {
        "revenue": {"type": "number", "description": "total net revenue, in millions"},
        "currency": {"type": "string"},
        "segments": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["revenue", "currency"],
}
PAGES = [
    "ACME CORP ANNUAL REPORT\nTotal net revenue was 4,796 million for the year.",
    "Our segments are Digital Media and Digital Experience.\nAll amounts are in US dollars.",
    "Outlook\nWe expect growth in the Print segment next year.",
]


class Segment(BaseModel):
    name: str


class Report(BaseModel):
    revenue: float
    currency: str
    segments: list[str] = []


def filing_facts() -> list[Fact]:
    return [
        Fact("revenue", 4796, "Total net revenue was 4,796 million"),
        Fact("segments", "Digital Media", "segments are Digital Media", is_list=True),
        Fact(
            "segments", "Digital Experience", "Digital Media and Digital Experience", is_list=True
        ),
        Fact("currency", "USD", "All amounts are in US dollars"),
    ]


async def test_direct_returns_one_object_of_the_users_schema(scripted_endpoint):
    from parallax.graphs.solve import graph

    url = scripted_endpoint(
        FaultConfig(reply=ExtractionModel(answers=lambda i: {"revenue": 4796, "currency": "USD"}))
    )
    out = await graph.ainvoke(
        {
            "task": "ACME's revenue was 4,796 million US dollars.",
            "mode": "direct",
            "output_schema": FILING,
        }
    )
    assert (out["status"], out["data"], json.loads(out["answer"])) == (
        "ok",
        {"revenue": 4796, "currency": "USD"},
        {"revenue": 4796, "currency": "USD"},
    )
    assert {p["path"]: p["verified"] for p in out["provenance"]} == {
        "revenue": False,
        "currency": False,
    }
    sent = [e for e in chat_log(url)]
    assert len(sent) == 1


async def test_a_vote_counts_a_number_in_several_spellings_once_and_names_the_field_without_quorum(
    scripted_endpoint,
):
    from parallax.graphs.solve import graph

    spellings = [
        {"revenue": 4796, "currency": "USD"},
        {"revenue": "4,796", "currency": "EUR"},
        {"revenue": 4796.0, "currency": "GBP"},
        {"revenue": 4796, "currency": "usd"},
        {"revenue": 12, "currency": "JPY"},
    ]
    scripted_endpoint(FaultConfig(reply=ExtractionModel(answers=lambda i: spellings[i % 5])))
    schema = {
        **FILING,
        "properties": {**FILING["properties"], "revenue": {"type": ["number", "string"]}},
    }
    out = await graph.ainvoke(
        {
            "task": "What are ACME's revenue and currency?",
            "mode": "vote",
            "votes": 5,
            "output_schema": schema,
        }
    )
    assert out["status"] == "needs_review"
    assert "no quorum (3 of 5 votes) for required field(s): currency" in out["reason"]
    fields = {f["path"]: f for f in out["verification"]["rules"]["fields"]}
    assert fields["revenue"]["support"] == 4 and fields["revenue"]["settled"] is True
    assert fields["currency"]["counts"] == {'"usd"': 2, '"eur"': 1, '"gbp"': 1, '"jpy"': 1}
    assert out["data"] == {"revenue": 4796} and out["confidence"] == 0.4
    assert not any(
        b["kind"] == "judge" for b in out["branches"]
    )  # no judge may pick a field's value


async def test_a_vote_whose_required_fields_all_reach_their_quorum_is_ok(scripted_endpoint):
    from parallax.graphs.solve import graph

    scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(
                answers=lambda i: {
                    "revenue": [4796, "4796.0", 4796][i % 3],
                    "currency": "USD",
                    "segments": ["Print"] if i == 0 else [],
                }
            )
        )
    )
    schema = {
        **FILING,
        "properties": {**FILING["properties"], "revenue": {"type": ["number", "string"]}},
    }
    out = await graph.ainvoke(
        {
            "task": "What are ACME's revenue and currency?",
            "mode": "vote",
            "votes": 3,
            "output_schema": schema,
        }
    )
    assert (
        out["status"] == "ok"
        and out["data"]["currency"] == "USD"
        and out["data"]["revenue"] in (4796, "4796.0")
    )
    assert out["data"]["segments"] == []  # two of three gave no segments: that is the settled list
    assert out["confidence"] == 1.0


async def test_section_values_are_placed_on_their_page_and_unquoted_ones_dropped(scripted_endpoint):
    from parallax.graphs.solve import graph

    def made_up(part: str) -> list[Fact]:
        return (
            [Fact("segments", "Cloud", "a quote that is nowhere", is_list=True)]
            if "Outlook" in part
            else []
        )

    scripted_endpoint(FaultConfig(reply=ExtractionModel(facts=filing_facts(), wrong=made_up)))
    out = await graph.ainvoke(
        {
            "pages": PAGES,
            "question": "revenue, currency, segments?",
            "mode": "section",
            "output_schema": FILING,
        },
        context={"slice_chars": 120},
    )
    assert out["status"] == "ok", out["reason"]
    assert out["data"] == {
        "revenue": 4796,
        "segments": ["Digital Media", "Digital Experience"],
        "currency": "USD",
    }
    placed = {(p["path"], p["page"]) for p in out["provenance"] if p["verified"]}
    assert placed == {("revenue", 1), ("segments[0]", 2), ("segments[1]", 2), ("currency", 2)}
    assert out["verification"]["facts"]["dropped"] == 1 and "1 of 5 values dropped" in out["reason"]
    assert [p["value"] for p in out["provenance"] if not p["verified"]] == ["Cloud"]


async def test_two_slices_with_different_verified_values_for_one_field_are_a_reported_conflict(
    scripted_endpoint,
):
    from parallax.graphs.solve import graph

    pages = [*PAGES, "Restatement\nTotal net revenue was 4,800 million after the restatement."]
    facts = [*filing_facts(), Fact("revenue", 4800, "Total net revenue was 4,800 million")]
    scripted_endpoint(FaultConfig(reply=ExtractionModel(facts=facts)))
    out = await graph.ainvoke(
        {"pages": pages, "question": "revenue?", "mode": "section", "output_schema": FILING},
        context={"slice_chars": 120},
    )
    assert out["status"] == "needs_review"
    assert "conflicting values on revenue: 4796 (page 1) vs 4800 (page 4)" in out["reason"]
    (conflict,) = out["verification"]["facts"]["conflicts"]
    assert [(v["value"], v["pages"]) for v in conflict["values"]] == [(4796, [1]), (4800, [4])]
    assert {p["value"] for p in out["provenance"] if p.get("conflict")} == {4796, 4800}
    # the field is left out of the data (neither value is picked), the rest of the object is kept,
    # and the reason does not call the disputed required field missing
    assert out["data"] == {"segments": ["Digital Media", "Digital Experience"], "currency": "USD"}
    assert "required field" not in out["reason"]


async def test_a_digit_inside_a_name_does_not_verify_a_number(scripted_endpoint):
    """Over a 10-K, the quote "3M Company and Subsidiaries" verified 3 for capital expenditure: the
    3 of 3M is no printed figure. The value is dropped and counted; its provenance record says it
    did not verify.
    """
    from parallax.graphs.solve import graph

    schema = {
        "type": "object",
        "properties": {"capex": {"type": "number"}, "company": {"type": "string"}},
    }
    pages = [
        "3M Company and Subsidiaries\nConsolidated Statement of Cash Flows",
        "Purchases of property, plant and equipment (PP&E) were $1,749 million.",
    ]
    facts = [
        Fact("capex", 3, "3M Company and Subsidiaries"),
        Fact("company", "3M", "3M Company and Subsidiaries"),
    ]
    scripted_endpoint(FaultConfig(reply=ExtractionModel(facts=facts)))
    out = await graph.ainvoke(
        {
            "pages": pages,
            "question": "capital expenditure?",
            "mode": "section",
            "output_schema": schema,
        },
        context={"slice_chars": 80},
    )
    assert out["data"] == {"company": "3M"}
    (capex,) = [p for p in out["provenance"] if p["path"] == "capex"]
    assert (
        capex["value"] == 3
        and capex["verified"] is False
        and capex["quote"] == "3M Company and Subsidiaries"
    )
    assert "1 of 2 values dropped" in out["reason"]


async def test_a_section_run_missing_a_required_field_is_not_ok(scripted_endpoint):
    from parallax.graphs.solve import graph

    scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(facts=[f for f in filing_facts() if f.path != "currency"])
        )
    )
    out = await graph.ainvoke(
        {"pages": PAGES, "question": "revenue?", "mode": "section", "output_schema": FILING},
        context={"slice_chars": 120},
    )
    assert (
        out["status"] == "needs_review"
        and "no verified value for required field(s): currency" in out["reason"]
    )
    assert (
        out["confidence"] == 1.0 and out["data"]["revenue"] == 4796
    )  # what verified is kept, and said


@pytest.mark.parametrize(
    ("schema", "says"),
    [
        (
            {"type": "object", "properties": {"x": {"type": "nope"}}},
            "output_schema is not a valid JSON Schema",
        ),
        (
            {"type": "object", "properties": {"m": {"type": "object"}}},
            "field 'm' is an object without named properties",
        ),
    ],
)
async def test_a_bad_schema_is_refused_before_any_model_call(schema, says):
    from parallax.graphs.solve import graph
    from parallax.logic.routing import InvalidInput

    ctx, calls = scripted(lambda p, t, i: "{}")
    with pytest.raises(InvalidInput, match=says):
        await graph.ainvoke({"task": "x", "mode": "vote", "output_schema": schema}, context=ctx)
    assert calls == []


def test_cli_schema_file_and_pydantic_model_give_data_and_provenance(
    scripted_endpoint, tmp_path, monkeypatch
):
    scripted_endpoint(
        FaultConfig(reply=ExtractionModel(answers=lambda i: {"revenue": 4796, "currency": "USD"}))
    )
    schema_file = tmp_path / "filing.json"
    schema_file.write_text(json.dumps(FILING))
    result = runner.invoke(
        app, ["run", "ACME's revenue?", "--mode", "direct", "--schema", str(schema_file), "--json"]
    )
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (
        out["data"] == {"revenue": 4796, "currency": "USD"}
        and out["provenance"][0]["path"] == "revenue"
    )

    (tmp_path / "my_models.py").write_text(
        "from pydantic import BaseModel\n\n"
        "class Filing(BaseModel):\n    revenue: float\n    currency: str\n"
    )
    monkeypatch.chdir(tmp_path)
    monkeypatch.delitem(sys.modules, "my_models", raising=False)
    result = runner.invoke(
        app,
        ["run", "ACME's revenue?", "--mode", "direct", "--schema", "my_models:Filing", "--json"],
    )
    assert result.exit_code == 0, result.output
    assert json.loads(result.stdout)["data"] == {"revenue": 4796, "currency": "USD"}


@pytest.mark.parametrize(
    ("content", "spec", "says"),
    [
        (
            '{"type": "object", "properties": {"a": {"type": "strnig"}}}',
            "FILE",
            "output_schema is not a valid JSON Schema",
        ),
        ("{not json", "FILE", "not JSON (line 1, column 2"),
        ('["a list"]', "FILE", "a JSON Schema is an object, this file holds list"),
        (None, "no_such_module_xyz:Model", "cannot import no_such_module_xyz"),
        (None, "missing.json", "no such file; give a JSON Schema file or package.module:Model"),
        (None, "json:JSONDecoder", "JSONDecoder is not a pydantic model class"),
    ],
)
def test_cli_refuses_a_bad_schema_in_one_line_and_writes_nothing(tmp_path, content, spec, says):
    ctx, calls = scripted(lambda p, t, i: "{}")
    if content is not None:
        spec = str(tmp_path / "schema.json")
        (tmp_path / "schema.json").write_text(content)
    result = runner.invoke(app, ["run", "What is revenue?", "--schema", spec, "--json"], obj=ctx)
    assert result.exit_code == 2
    assert (
        says in result.stderr
        and len(result.stderr.strip().splitlines()) == 1
        and "Traceback" not in result.output
    )
    assert calls == [] and not settings_mod.load().home.exists()


def test_cli_refuses_a_schema_with_plan_mode(tmp_path):
    (tmp_path / "s.json").write_text(json.dumps(FILING))
    result = runner.invoke(
        app, ["run", "Plan this", "--mode", "plan", "--schema", str(tmp_path / "s.json")]
    )
    assert result.exit_code == 2 and "not plan" in result.stderr


def test_the_compiled_graph_runs_with_a_plain_sync_invoke_and_stream():
    from parallax.graphs.solve import graph

    ctx, calls = scripted(lambda p, t, i: json.dumps({"reasoning": "2 and 2", "answer": "4"}))
    out = graph.invoke({"task": "What is 2 + 2?", "mode": "vote", "votes": 3}, context=ctx)
    assert (out["status"], out["vote_counts"], len(calls)) == ("ok", {"4": 3}, 3)
    nodes = [
        next(iter(chunk))
        for chunk in graph.stream(
            {"task": "Say hi.", "mode": "direct"}, context=ctx, stream_mode="updates"
        )
    ]
    assert nodes[0] == "route" and nodes[-1] == "release_check" and "merge" in nodes


def test_the_solve_graph_is_a_subgraph_of_a_users_sync_state_graph():
    from parallax.graphs.solve import graph as solve

    class Mine(TypedDict, total=False):
        task: str
        mode: str
        votes: int
        answer: str
        status: str
        vote_counts: dict
        note: str

    def note(state: Mine) -> dict:
        return {"note": f"parallax said {state['answer']} ({state['status']})"}

    builder = StateGraph(Mine)
    builder.add_node("solve", solve)
    builder.add_node("note", note)
    builder.add_edge(START, "solve")
    builder.add_edge("solve", "note")
    builder.add_edge("note", END)
    ctx, _ = scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "4"}))
    out = builder.compile().invoke(
        {"task": "What is 2 + 2?", "mode": "vote", "votes": 3}, context=ctx
    )
    assert (
        out["note"] == "parallax said 4 (ok)"
        and out["vote_counts"] == {"4": 3}
        and out["votes"] == 3
    )


def test_the_python_api_returns_the_users_model_and_its_trace_is_found_by_the_cli(
    scripted_endpoint,
):
    import parallax

    scripted_endpoint(FaultConfig(reply=ExtractionModel(facts=filing_facts())))
    result = parallax.solve(
        question="revenue, currency, segments?",
        document=None,
        task="\n\n".join(PAGES),
        mode="section",
        schema=Report,
        context=parallax_context(slice_chars=120),
    )
    assert result.ok and isinstance(result.data, Report)
    assert result.data == Report(
        revenue=4796, currency="USD", segments=["Digital Media", "Digital Experience"]
    )
    assert {p.path for p in result.provenance if p.verified} == {
        "revenue",
        "segments[0]",
        "segments[1]",
        "currency",
    }
    shown = runner.invoke(app, ["trace", result.trace_id, "--json"])
    assert shown.exit_code == 0, shown.output
    trace = json.loads(shown.stdout)
    assert trace["trace_id"] == result.trace_id and trace["data"] == result.raw_data
    assert len(trace["provenance"]) == len(result.provenance)


async def test_the_async_python_api_refuses_bad_input_in_one_line():
    import parallax

    with pytest.raises(parallax.InvalidInput, match="task is empty"):
        await parallax.asolve("   ")
    with pytest.raises(
        parallax.InvalidInput, match="schema must be a pydantic model class or a JSON Schema dict"
    ):
        await parallax.asolve("What?", schema=42)
    assert not settings_mod.load().home.exists()


def parallax_context(**fields):
    from parallax.state.context import Context

    return Context(**fields)


async def test_the_graph_reads_a_document_given_as_base64_and_keeps_its_pages(
    tmp_path, scripted_endpoint
):
    import base64

    from reportlab.pdfgen.canvas import Canvas

    from parallax.graphs.solve import graph

    pdf = tmp_path / "report.pdf"
    canvas = Canvas(str(pdf))
    for text in PAGES:
        for i, line in enumerate(text.splitlines()):
            canvas.drawString(72, 720 - 14 * i, line)
        canvas.showPage()
    canvas.save()
    scripted_endpoint(FaultConfig(reply=ExtractionModel(facts=filing_facts())))
    document = {"name": "report.pdf", "base64": base64.b64encode(pdf.read_bytes()).decode()}
    out = await graph.ainvoke(
        {"document": document, "question": "figures?", "mode": "section", "output_schema": FILING},
        context={"slice_chars": 120},
    )
    assert out["status"] == "ok", out["reason"]
    assert {(p["path"], p["page"]) for p in out["provenance"] if p["verified"]} == {
        ("revenue", 1),
        ("segments[0]", 2),
        ("segments[1]", 2),
        ("currency", 2),
    }


async def test_the_authenticated_graph_api_reads_no_path_on_its_own_disk():
    from parallax.graphs.solve import graph
    from parallax.logic.routing import InvalidInput
    from parallax.runtime.run_context import AUTH_TENANT_FIELD

    ctx, calls = scripted(lambda p, t, i: "{}")
    config = {"configurable": {"langgraph_auth_user": {AUTH_TENANT_FIELD: "acme"}}}
    with pytest.raises(InvalidInput, match="not as a path"):
        await graph.ainvoke({"document": "/etc/passwd", "question": "users?"}, config, context=ctx)
    assert calls == []


def test_a_sync_stream_closed_early_cancels_the_run_and_a_finished_one_leaves_nothing_running():
    import threading

    from parallax.graphs.solve import graph

    ctx, calls = scripted(lambda p, t, i: (0.5, json.dumps({"reasoning": "r", "answer": "4"})))
    stream = graph.stream(
        {"task": "What is 2 + 2?", "mode": "vote", "votes": 3}, context=ctx, stream_mode="updates"
    )
    assert next(iter(next(stream))) == "route"
    # stop while the votes are in flight: the run is cancelled, the worker thread ends
    stream.close()
    assert not [t for t in threading.enumerate() if t.name == "parallax-sync-graph"]
    for _ in range(20):  # finishing runs never race the closing of their private loop
        assert (
            graph.invoke(
                {"task": "Say hi.", "mode": "direct"},
                context=scripted(lambda p, t, i: json.dumps({"reasoning": "r", "answer": "hi"}))[0],
            )["status"]
            == "ok"
        )


async def test_a_vote_on_an_object_stops_once_every_required_field_has_settled(scripted_endpoint):
    """Adaptive votes on the user's object: three votes that agree on every required field settle it
    (the optional list may differ); a field still split asks another wave, and only the votes it
    needs.
    """
    from parallax.graphs.solve import graph

    url = scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(
                answers=lambda i: {
                    "revenue": 4796,
                    "currency": "USD",
                    "segments": [["Print"], [], ["Media"]][i % 3],
                }
            )
        )
    )
    out = await graph.ainvoke(
        {
            "task": "What are ACME's revenue and currency?",
            "mode": "vote",
            "votes": 8,
            "output_schema": FILING,
        }
    )
    assert (out["status"], out["votes_asked"], len(chat_log(url))) == ("ok", 3, 3)
    assert out["stop_reason"].startswith("settled") and out["data"]["revenue"] == 4796


async def test_a_split_field_of_an_object_asks_more_votes_until_it_settles(scripted_endpoint):
    from parallax.graphs.solve import graph

    currencies = ["USD", "EUR", "USD", "USD", "USD", "USD", "USD", "USD"]
    url = scripted_endpoint(
        FaultConfig(
            reply=ExtractionModel(
                answers=lambda i: {"revenue": 4796, "currency": currencies[i % 8]}
            )
        )
    )
    out = await graph.ainvoke(
        {
            "task": "What are ACME's revenue and currency?",
            "mode": "vote",
            "votes": 8,
            "output_schema": FILING,
        }
    )
    # 2-1 after the first wave; 5-1 is the first count that settles it (P = 0.9375), so one wave of
    # 3 more
    assert (out["votes_asked"], len(chat_log(url)), out["status"], out["data"]["currency"]) == (
        6,
        6,
        "ok",
        "USD",
    )
    fields = {f["path"]: f for f in out["verification"]["rules"]["fields"]}
    assert fields["currency"]["counts"] == {'"usd"': 5, '"eur"': 1}
