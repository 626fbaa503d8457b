"""Parallax: run LLM agent work in parallel and learn from it.

One installed name, seven floors (docs/architecture.md): `parallax.state` (data),
`parallax.prompts` (templates), `parallax.runtime` (model calls, retries, the model server,
settings, storage, screening, embeddings), `parallax.logic` (decisions and steps that are not
nodes), `parallax.nodes`, `parallax.graphs` (wiring) and `parallax.cli`, `parallax.server` and `parallax.api` (the
command line, the served API and the Python API: `parallax.solve`, `parallax.asolve`).
The repository keeps graphs/, nodes/, prompts/ and state/ at its top (pyproject maps them).
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["solve", "asolve", "Result", "Provenance", "InvalidInput"]


def __getattr__(name: str) -> Any:
    """The Python API (parallax/api.py), imported on first use so `import parallax` and the CLI stay light."""
    if name in __all__:
        from parallax import api

        return getattr(api, name)
    raise AttributeError(f"module 'parallax' has no attribute {name!r}")
