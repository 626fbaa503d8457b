"""Parallax's part of the graph API's FastAPI app (aegra.json `http.app`): error headers and metrics.

Aegra adds its routes, lifespan and middleware to this app. Ours: the faces on it (/v1, the
OpenAI-compatible one: server/openai_face.py; /mcp, the MCP tools: server/mcp_face.py; langgraph dev
mounts the same in server/dev_app.py), and:
- HTTP errors keep their headers. Aegra's own handler writes the Agent Protocol error body but
  drops headers, and a 429 without `Retry-After` would leave clients guessing when to come back
  (parallax/server/auth.py raises it). The body stays Aegra's: {"error", "message", "details"}.
- waits (runs.wait, runs.join, the stateless wait) are woken by a Redis notification when the
  run ends, on whichever replica it ran (server/run_done.py, a patch of Aegra's executor).
- Every change to Aegra's internals is listed in server/aegra_patches.py and made in this app's lifespan
  (`parallax serve` makes them before Aegra starts), never when a module is imported.
- /mcp serves the MCP tools over Streamable HTTP, each call a run of this server (server/mcp_face.py);
  /a2a/{assistant_id} the assistants over the Agent2Agent protocol, each message a run (server/a2a_face.py).
- Every request passes admission first (server/admission.py, the one door): the key before the body,
  the body's size and depth, a run's fields against its graph's definitions, backpressure, the daily
  budget, double-texting and webhooks, all before anything is stored; and /metrics, which refreshes
  `parallax_pending_runs` and shows tenants' figures only to PARALLAX_METRICS_KEY (server/metrics.py).
  Runs that end without a settled spend are charged what their replica saw them spend (server/run_charges.py).
- The Agent Protocol as LangGraph's clients expect it, where Aegra differs: /ok, thread copy, the
  thread event stream over WebSocket, store namespaces as written (server/protocol_routes.py,
  event_socket.py, store_views.py), graph ids as assistant ids, crons that answer the cron,
  cancel answering the end state (server/protocol_requests.py, applied by admission), graphs with
  stream transformers of their own (server/stream_transformers.py), named custom events
  (server/custom_events.py), POST /threads/count (server/conformance_routes.py); what of the Agent Server's API
  Aegra would accept and not do is refused by name by admission (server/conformance.py). docs/deploy.md, "Agent
  Protocol conformance", and its feature table.
- What Aegra accepts on a run but does not do: double-texting (`multitask_strategy`) and
  webhooks, by admission with server/run_requests.py (server/cron_requests.py for crons) and the background loops of
  server/background_loops.py (this app's lifespan, which Aegra runs inside its own), with the triggers
  of runtime/storage/platform_schema.py; the retention sweep and the store items' ttl sweep run in the same
  lifespan. Threads' and store items' `ttl`, and `POST /threads/prune`: server/thread_ttl.py, store_ttl.py,
  docs/retention.md.
  Why here and not as a patch to Aegra: docs/deploy.md, "Double-texting, webhooks, retention".
"""

from __future__ import annotations

from aegra_api.models.errors import AgentProtocolError, get_error_type
from fastapi import FastAPI, HTTPException, Request
from fastapi.responses import JSONResponse
from langgraph.store.base import InvalidNamespaceError

from parallax.server import (
    a2a_face,
    aegra_patches,
    conformance_routes,
    event_socket,
    mcp_face,
    openai_face,
    protocol_routes,
    serving,
    store_ttl,
    store_views,
    thread_ttl,
    timeline_face,
)
from parallax.server.admission import Admission

# the changes to Aegra's internals (server/aegra_patches.py) are made in the lifespan, never on import;
# inside them, served mode (runtime/run_context.py, server/serving.py), then server/background_loops.py
app = FastAPI(lifespan=aegra_patches.with_patches(serving.lifespan))
app.add_middleware(Admission)  # the one door (server/admission.py), inside Aegra's CORS and request ids
# Agent Protocol routes Aegra lacks or answers differently, matched before Aegra's own (docs/deploy.md,
# "Agent Protocol conformance")
app.include_router(protocol_routes.router)
app.include_router(protocol_routes.threads_router)
app.include_router(conformance_routes.router)  # POST /threads/count (server/conformance_routes.py)
app.include_router(store_views.router)
app.include_router(thread_ttl.router)  # threads' ttl on update, POST /threads/prune (docs/retention.md)
app.include_router(store_ttl.router)  # store items' ttl (docs/retention.md)
app.include_router(event_socket.router)
app.mount("/v1", openai_face.app)  # the OpenAI-compatible face
app.mount("/timeline", timeline_face.app)  # a run's timeline (server/timeline_face.py)
app.add_route("/mcp", mcp_face.endpoint, methods=["GET", "POST", "DELETE"])
app.mount("/a2a", a2a_face.app)  # the assistants over the Agent2Agent protocol (server/a2a_face.py)


# fastapi is installed only in the server venv, not where mypy runs (.venv): its decorators are untyped here
@app.exception_handler(HTTPException)  # type: ignore[untyped-decorator]
async def error_with_headers(_request: Request, exc: HTTPException) -> JSONResponse:
    body = AgentProtocolError(error=get_error_type(exc.status_code), message=exc.detail,
                              details=getattr(exc, "details", None))
    return JSONResponse(body.model_dump(), status_code=exc.status_code, headers=exc.headers)


@app.exception_handler(InvalidNamespaceError)  # type: ignore[untyped-decorator]
async def bad_namespace(_request: Request, exc: InvalidNamespaceError) -> JSONResponse:
    """A store namespace LangGraph's store refuses (an empty label, a label with '.'): the caller's mistake, a 422."""
    body = AgentProtocolError(error=get_error_type(422), message=f"{exc}: a namespace label is non-empty text "
                                                                 "without '.'", details=None)
    return JSONResponse(body.model_dump(), status_code=422)

