"""The runtime floor: what talks to the world, and knows no node or graph.

Model calls (chat_models, structured_call, retry, circuit_breaker, endpoint_limits, failure_cause,
branch_call), the embedded model server (model_server), settings and the run Context resolution
(settings, run_context), storage (storage/), screening and redaction of untrusted text, and embeddings.
"""
