"""The README's promises that code can check: its two set-up commands (CI runs them), and the solve
graph's drawing in docs/how-it-works.md. Every `parallax ...` command of the README and docs/:
tests/unit/test_docs.py.
"""

from __future__ import annotations

import re
from pathlib import Path

from parallax.graphs.solve import graph

ROOT = Path(__file__).parents[2]
README = (ROOT / "README.md").read_text()


def test_docs_draw_the_solve_graph_as_the_code_does():
    drawn = re.search(
        r"```mermaid\n(.*?)```", (ROOT / "docs" / "how-it-works.md").read_text(), re.S
    ).group(1)
    assert drawn == graph.get_graph().draw_mermaid()


def test_readme_has_exactly_two_setup_commands_and_they_use_the_cli():
    setup = README.split("## Set up", 1)[1].split("## Examples", 1)[0]
    commands = re.findall(r"```bash\n(.*?)\n```", setup, re.S)
    assert len(commands) == 2
    assert "parallax run" in commands[0] and "pytest" in commands[1]


def test_ci_runs_the_readme_setup_commands_as_written():
    setup = README.split("## Set up", 1)[1].split("## Examples", 1)[0]
    install = re.findall(r"```bash\n(.*?)\n```", setup, re.S)[0]
    ci = (ROOT / ".ci" / "run").read_text()
    assert (
        install.split(" && ./.venv/bin/parallax run")[0].replace("pip install", "pip install -q")
        in ci
    )


def test_readme_links_every_docs_page_and_every_link_resolves():
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    linked = set(re.findall(r"\]\(docs/([\w-]+\.md)", README))
    assert pages == linked
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for target in re.findall(r"\]\(([\w./-]+\.md)(?:#[\w-]+)?\)", page.read_text()):
            assert (page.parent / target).is_file(), (page.name, target)


def test_the_studio_block_installs_what_it_runs_and_the_test_extra_has_it():
    import tomllib

    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"][
        "optional-dependencies"
    ]
    assert any(d.startswith("langgraph-cli[inmem]") for d in extras["studio"])  # `langgraph dev`
    assert "parallax-graph[studio]" in extras["test"]
    studio = next(b for b in re.findall(r"```bash\n(.*?)```", README, re.S) if "langgraph dev" in b)
    assert studio.index("pip install -e '.[studio]'") < studio.index("langgraph dev")
    assert studio.startswith(
        "cd ..\n"
    )  # the examples run from examples/; langgraph.json is at the root


def test_ci_makes_the_server_venv_with_deploy_mds_line_and_no_page_needs_pyenv():
    deploy = (ROOT / "docs" / "deploy.md").read_text()
    block = re.findall(r"```bash\n(.*?)```", deploy, re.S)[0]
    venv = block.splitlines()[0].split("#")[0].strip()
    assert venv == "python3.12 -m venv .venv-server"
    assert (
        f"PYENV_VERSION=3.12.1 {venv} && " in (ROOT / ".ci" / "run").read_text()
    )  # pyenv's shim needs the version
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        for code in re.findall(r"```(?:bash|sh)\n(.*?)```", page.read_text(), re.S):
            assert "PYENV_VERSION" not in code, page.name


def test_every_install_line_names_our_distribution_not_another_projects():
    import tomllib

    assert (
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["name"] == "parallax-graph"
    )
    for page in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")]:
        text = page.read_text()
        assert not re.search(r"pip install [^`\n]*'parallax\[", text), (
            page.name
        )  # PyPI's `parallax` is an SSH tool
        assert "parallax-0.1.0-py3" not in text and "pip install parallax-" not in text, page.name
