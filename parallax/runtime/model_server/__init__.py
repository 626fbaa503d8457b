"""The embedded model server: llama.cpp's server on loopback, used when no endpoint is configured.

See docs/internals/process.md#the-embedded-model-server.
"""

from parallax.runtime.model_server.endpoint import (
    endpoint,
    known_endpoint,
    server_process,
    shutdown,
    started_server,
)
from parallax.runtime.model_server.process import (
    GGUF_NAME,
    LocalModelServer,
    ModelServerError,
    default_gguf_path,
    default_threads,
    peak_rss_mb,
    serve_forever,
    wait_for_200,
)

__all__ = [
    "GGUF_NAME",
    "LocalModelServer",
    "ModelServerError",
    "default_gguf_path",
    "default_threads",
    "endpoint",
    "known_endpoint",
    "peak_rss_mb",
    "serve_forever",
    "server_process",
    "shutdown",
    "started_server",
    "wait_for_200",
]
