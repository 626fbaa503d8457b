"""docs/limits.md is the one table of what a run may ask for: a run setting or an input field with
no row there, or a row that does not state the bound its definition has, fails here (so the table
stays complete and true).
"""

from __future__ import annotations

import re
from pathlib import Path

from pydantic import TypeAdapter

from parallax.logic.run_input import DEFINITIONS
from parallax.state.context import CODE_ONLY, RUN_SETTINGS, bounds

PAGE = (Path(__file__).resolve().parents[2] / "docs" / "limits.md").read_text()
BOUND_KEYS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "maxLength", "maxItems")


def sections() -> dict[str, str]:
    """Each `###` section of the page's "Run inputs and run settings" part, by its heading."""
    part = PAGE.split("## Run inputs and run settings", 1)[1].split("\n## ", 1)[0]
    return {
        heading: body
        for heading, body in re.findall(r"^### ([^\n]+)\n(.*?)(?=^### |\Z)", part, re.M | re.S)
    }


def rows(section: str) -> dict[str, str]:
    """Field name -> the text of its row (a row may name several fields), its numbers without
    thousands separators."""
    found: dict[str, str] = {}
    for line in section.splitlines():
        if not line.startswith("| `") and not re.match(r"^\| `?\w+`? \| `", line):
            continue
        cells = [c.strip() for c in line.strip("|").split("|")]
        graph = re.fullmatch(
            r"`(stats|feedback|release)`", cells[0]
        )  # a table of several graphs: graph, field, ...
        for name in re.findall(r"`(\w+)`", cells[1] if graph else cells[0]):
            found[f"{graph[1]}:{name}" if graph else name] = line.replace(",", "")
    return found


def states(value: float, row: str) -> bool:
    """Whether the row states the number `value` (as itself: 1 is not in 10 or 0.1)."""
    text = str(int(value)) if float(value).is_integer() else str(value)
    return re.search(rf"(?<![\w.]){re.escape(text)}(?![\w.])", row) is not None


def test_every_run_setting_has_a_row_with_its_bounds():
    table = rows(sections()["Run settings (`context`)"])
    assert set(RUN_SETTINGS) <= set(table), set(RUN_SETTINGS) - set(table)
    for name in RUN_SETTINGS:
        for bound in bounds(name).values():
            assert states(bound, table[name]), (name, bound, table[name])
    assert all(
        f"`{name}`" in PAGE for name in CODE_ONLY
    )  # and the page says no caller may send them


def test_every_input_field_of_every_graph_has_a_row_with_its_bounds():
    found = sections()
    for graph, definition in DEFINITIONS.items():
        table: dict[str, str] = {}
        for heading, body in found.items():
            if f"`{graph}`" in heading:
                table.update({k.removeprefix(f"{graph}:"): v for k, v in rows(body).items()})
        solve = rows(found["`solve` and `plan`"])
        schema = TypeAdapter(definition).json_schema()
        for name, node in schema["properties"].items():
            assert name in table, f"{graph}.{name} has no row in docs/limits.md"
            row = solve[name] if "as `solve`" in table[name] else table[name]
            for option in node.get("anyOf", [node]):
                for key in BOUND_KEYS:
                    if key in option:
                        assert states(option[key], row), (graph, name, key, row)


def test_the_other_pages_link_the_table():
    root = Path(__file__).resolve().parents[2]
    for page in ("docs/deploy.md", "docs/configuration.md", "README.md"):
        assert "limits.md" in (root / page).read_text(), page
