"""Prompt templates, one module per graph: builders that take only what a branch may see."""
