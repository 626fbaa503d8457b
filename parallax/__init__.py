"""Parallax: run LLM agent work in parallel and learn from it.

`solve`, `asolve` and their types load from parallax.api on first use; the layout is in
docs/architecture.md.
"""

from typing import Any

__version__ = "0.1.0"
__all__ = ["solve", "asolve", "Result", "Provenance", "InvalidInput"]


def __getattr__(name: str) -> Any:
    """The Python API (parallax/api.py), imported on first use so `import parallax` and the CLI stay
    light."""
    if name in __all__:
        from parallax import api

        return getattr(api, name)
    raise AttributeError(f"module 'parallax' has no attribute {name!r}")
