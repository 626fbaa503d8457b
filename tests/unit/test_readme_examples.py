"""docs/python.md's subgraph example, run as written against the scripted OpenAI-compatible server.
The README's commands and Python examples run from examples/ in tests/integration/test_examples.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from pathlib import Path

from testkit.extraction_model import ExtractionModel
from testkit.fault_server import FaultConfig, FaultServer

ROOT = Path(__file__).parents[2]


def block(text: str, language: str, containing: str) -> str:
    found = [b for b in re.findall(rf"```{language}\n(.*?)```", text, re.S) if containing in b]
    assert len(found) == 1, f"one {language} block with {containing!r} expected, found {len(found)}"
    return found[0]


def test_the_subgraph_example_of_docs_python_runs_as_written(monkeypatch):
    from parallax.runtime.chat_models import forget_clients

    code = block(
        (ROOT / "docs" / "python.md").read_text(), "python", 'builder.add_node("solve", solve)'
    )
    replies = ExtractionModel(answers=lambda i: {})
    with FaultServer(
        FaultConfig(
            reply=lambda body: (
                json.dumps({"reasoning": "12 twelves", "answer": "144"})
                if "relevant" not in json.dumps(body.get("response_format"))
                else replies(body)
            )
        )
    ) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        forget_clients()
        printed = io.StringIO()
        with contextlib.redirect_stdout(printed):
            exec(compile(code, "docs/python.md", "exec"), {"__name__": "docs_example"})
    forget_clients()
    out = eval(printed.getvalue())  # the example prints the parent graph's final state, a dict
    assert out["note"] == "parallax said 144 (ok)" and out["vote_counts"] == {"144": 3}
