"""Where the model server starts: the embedded llama.cpp server on loopback, when nothing else is configured.

The server is llama.cpp's own, as built into the `xllamacpp` wheel. It decodes
`PARALLAX_MODEL_PARALLEL` requests side by side, so a vote's branches do not queue behind each
other. Three parts, one concept each:
- process.py: the child as a process (start, wait until it answers, stop, advertise with
  `parallax model serve`, peak memory);
- endpoint.py: which endpoint this process's model calls use, resolved once;
- child.py: the child itself (`python -m parallax.runtime.model_server`).
"""

from parallax.runtime.model_server.endpoint import endpoint, known_endpoint, server_process, shutdown, started_server
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

__all__ = ["GGUF_NAME", "LocalModelServer", "ModelServerError", "default_gguf_path", "default_threads", "endpoint",
           "known_endpoint", "peak_rss_mb", "serve_forever", "server_process", "shutdown", "started_server", "wait_for_200"]
