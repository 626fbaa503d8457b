"""Parallax: run LLM agent work in parallel and learn from it.

One installed name, seven floors (README, "Architecture"): `parallax.state` (data),
`parallax.prompts` (templates), `parallax.runtime` (model calls, retries, the model server,
settings, storage, screening, embeddings), `parallax.logic` (decisions and steps that are not
nodes), `parallax.nodes`, `parallax.graphs` (wiring) and `parallax.cli` (the command line).
The repository keeps graphs/, nodes/, prompts/ and state/ at its top (pyproject maps them).
"""

__version__ = "0.1.0"
