"""Where the benchmarks' data lives: small samples in the repository, or a full copy named with
`--data`.

Why: a clone has nothing beside it, so every bench runs on the samples under bench/data/samples/
(each folder's README.md says where its rows come from, under which licence and how they were
picked; bench/data/make_samples.py cuts them). A user with a full copy of a dataset points the
bench at it with `--data`; both may be gzipped JSONL.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from typing import Any

SAMPLES = Path(__file__).resolve().parent / "data" / "samples"


def read_lines(path: Path | str) -> list[str]:
    """The non-empty lines of a text file, gunzipped when its name ends in `.gz`."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"data file not found: {path}")
    opener: Any = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", encoding="utf-8") as handle:
        return [line for line in handle.read().splitlines() if line.strip()]


def read_jsonl(path: Path | str) -> list[Any]:
    """One JSON value per non-empty line."""
    return [json.loads(line) for line in read_lines(path)]
