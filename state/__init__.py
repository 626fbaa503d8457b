"""Graph state (TypedDicts with reducers), run context and pydantic payload models."""
