"""The embedded server's child process: llama.cpp's server (the `xllamacpp` wheel) on 127.0.0.1.

Started by model_server/process.py; by hand, use `parallax model serve`.
"""

from __future__ import annotations

import os
import signal
import threading

from parallax.runtime.model_server.process import default_threads


def main(argv: list[str] | None = None) -> None:
    """The child: load the GGUF into llama.cpp's server, serve until SIGTERM/SIGINT or until its
    parent is gone."""
    import argparse

    import xllamacpp

    parser = argparse.ArgumentParser(
        prog="python -m parallax.runtime.model_server",
        description=(
            "llama.cpp's server on 127.0.0.1 (started by Parallax, not by hand: "
            "use `parallax model serve`)."
        ),
    )
    parser.add_argument("--model", required=True)
    parser.add_argument("--alias", required=True)
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--parallel", type=int, default=5)
    parser.add_argument(
        "--context", type=int, default=8192, help="KV cache tokens, shared by the slots"
    )
    parser.add_argument(
        "--threads", type=int, default=default_threads(), help="threads of a one-token decode step"
    )
    parser.add_argument(
        "--batch-threads",
        type=int,
        default=default_threads(),
        help="threads of a step with several tokens: a prompt, or several slots decoding at once",
    )
    args = parser.parse_args(argv)
    params = xllamacpp.CommonParams()
    params.model.path = args.model
    params.model_alias = {args.alias}
    params.hostnames = ["127.0.0.1"]
    params.port = args.port
    params.n_parallel = args.parallel
    params.cont_batching = True
    params.n_ctx = args.context
    params.kv_unified = (
        True  # one cache shared by the slots: a long prompt may use what idle slots do not
    )
    params.cpuparams.n_threads = args.threads
    params.cpuparams_batch.n_threads = args.batch_threads
    params.warmup = False
    params.endpoint_slots = (
        True  # GET /slots shows which slots are busy (tests watch requests run side by side)
    )
    stop = threading.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, lambda *_: stop.set())
    parent = os.getppid()
    server = xllamacpp.Server(
        params
    )  # returns once the model is loaded and the HTTP listener is up
    print(
        f"serving {args.alias} on {server.listening_address} with {args.parallel} slots", flush=True
    )
    # A parent that dies without stopping us (SIGKILL, or SIGTERM, which skips Python's atexit;
    # `timeout` sends it) leaves us to init: then we stop too, instead of holding the model's memory
    # for ever.
    while not stop.wait(0.5) and os.getppid() == parent:
        pass
    del server  # stops the HTTP thread and frees the model
