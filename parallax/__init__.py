"""Parallax: run LLM agent work in parallel and learn from it.

This package holds what is neither graph wiring nor a graph node: settings, the model
layer (endpoint resolution, structured calls), the local model server and the CLI.
"""

__version__ = "0.1.0"
