"""Records in a LangGraph store: versioned playbooks and prompts, traces, dead letters, their locks.

See docs/internals/storage.md.
"""
