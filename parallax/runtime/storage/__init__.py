"""Records in a LangGraph store: versioned playbooks, traces, dead letters, and their locks."""
