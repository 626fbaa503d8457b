"""The README's schema-over-a-PDF example (shell and Python) and docs/python.md's subgraph example, run as
written against the scripted OpenAI-compatible server: the README cannot promise what the code does not do."""

from __future__ import annotations

import contextlib
import io
import json
import re
import shlex
from pathlib import Path

import pytest
from reportlab.pdfgen.canvas import Canvas
from typer.testing import CliRunner

from parallax.cli import app
from tests.support.extraction_model import ExtractionModel, Fact
from tests.support.fault_server import FaultConfig, FaultServer

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()
PAGES = ["ANNUAL REPORT 2025\nTotal net revenue was 4,796 million for the year.",
         "INCOME STATEMENT\nNet income was 629 million, up from 268 million."]
FACTS = [Fact("revenue", 4796, "Total net revenue was 4,796 million"), Fact("net_income", 629, "Net income was 629 million")]


def block(text: str, language: str, containing: str) -> str:
    found = [b for b in re.findall(rf"```{language}\n(.*?)```", text, re.S) if containing in b]
    assert len(found) == 1, f"one {language} block with {containing!r} expected, found {len(found)}"
    return found[0]


@pytest.fixture
def in_a_folder_with_the_report(tmp_path, monkeypatch):
    from parallax.runtime.chat_models import forget_clients

    canvas = Canvas(str(tmp_path / "annual_report.pdf"))
    for text in PAGES:
        for i, line in enumerate(text.splitlines()):
            canvas.drawString(72, 720 - 14 * i, line)
        canvas.showPage()
    canvas.save()
    monkeypatch.chdir(tmp_path)
    with FaultServer(FaultConfig(reply=ExtractionModel(facts=FACTS, answers=lambda i: {"revenue": 1}))) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        forget_clients()
        yield tmp_path
    forget_clients()


def test_the_readme_schema_over_a_pdf_runs_as_written(in_a_folder_with_the_report):
    schema = block(README, "json", '"net_income"')
    (in_a_folder_with_the_report / "filing.json").write_text(schema)
    command, = [line for line in block(README, "bash", "--schema filing.json").splitlines() if line.strip()]
    args = shlex.split(command)
    assert args[0] == "parallax"
    result = CliRunner().invoke(app, args[1:])
    assert result.exit_code == 0, result.output
    out = json.loads(result.stdout)
    assert (out["status"], out["data"]) == ("ok", {"revenue": 4796, "net_income": 629})
    assert {(p["path"], p["page"], p["verified"]) for p in out["provenance"]} == {("revenue", 1, True),
                                                                                  ("net_income", 2, True)}


def test_the_readme_python_example_runs_as_written(in_a_folder_with_the_report):
    code = block(README, "python", "class Filing")
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})
    lines = printed.getvalue().splitlines()
    assert lines[0].startswith("ok revenue=4796.0 net_income=629.0 ")
    assert lines[1:] == ["revenue 4796 page 1 'Total net revenue was 4,796 million'",
                         "net_income 629 page 2 'Net income was 629 million'"]
    trace_id = lines[0].split()[-1]
    shown = CliRunner().invoke(app, ["trace", trace_id, "--json"])
    assert shown.exit_code == 0 and json.loads(shown.stdout)["data"] == {"revenue": 4796, "net_income": 629}


def test_the_subgraph_example_of_docs_python_runs_as_written(monkeypatch):
    from parallax.runtime.chat_models import forget_clients

    code = block((ROOT / "docs" / "python.md").read_text(), "python", "builder.add_node(\"solve\", solve)")
    replies = ExtractionModel(answers=lambda i: {})
    with FaultServer(FaultConfig(reply=lambda body: json.dumps({"reasoning": "12 twelves", "answer": "144"})
                                 if "relevant" not in json.dumps(body.get("response_format")) else replies(body))) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        forget_clients()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/python.md", "exec"), {"__name__": "docs_example"})
    forget_clients()
    out = eval(printed.getvalue())  # the example prints the parent graph's final state, a dict
    assert out["note"] == "parallax said 144 (ok)" and out["vote_counts"] == {"144": 3}
