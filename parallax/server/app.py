"""Aegra hook (`http.app`): the FastAPI app with Parallax's middleware, routes, mounts and lifespan.

HTTP errors keep their headers (Aegra's handler drops them, and a 429 needs `Retry-After`); the
body stays Aegra's. The server's map: docs/architecture.md#entry-points-the-server-parallaxserver.
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

# the changes to Aegra's internals (server/aegra_patches.py) are made in the lifespan, never on
# import; inside them, served mode (runtime/run_context.py, server/serving.py), then
# server/background_loops.py
app = FastAPI(lifespan=aegra_patches.with_patches(serving.lifespan))
app.add_middleware(
    Admission
)  # the one door (server/admission.py), inside Aegra's CORS and request ids
# Agent Protocol routes Aegra lacks or answers differently, matched before Aegra's own
# (docs/deploy.md, "Agent Protocol conformance")
app.include_router(protocol_routes.router)
app.include_router(protocol_routes.threads_router)
app.include_router(conformance_routes.router)  # POST /threads/count (server/conformance_routes.py)
app.include_router(store_views.router)
app.include_router(
    thread_ttl.router
)  # threads' ttl on update, POST /threads/prune (docs/retention.md)
app.include_router(store_ttl.router)  # store items' ttl (docs/retention.md)
app.include_router(event_socket.router)
app.mount("/v1", openai_face.app)  # the OpenAI-compatible face
app.mount("/timeline", timeline_face.app)  # a run's timeline (server/timeline_face.py)
app.add_route("/mcp", mcp_face.endpoint, methods=["GET", "POST", "DELETE"])
app.mount("/a2a", a2a_face.app)  # the assistants over the Agent2Agent protocol (server/a2a_face.py)


# fastapi is installed only in the server venv, not where mypy runs (.venv): its decorators are
# untyped here
@app.exception_handler(HTTPException)  # type: ignore[untyped-decorator]
async def error_with_headers(_request: Request, exc: HTTPException) -> JSONResponse:
    body = AgentProtocolError(
        error=get_error_type(exc.status_code),
        message=exc.detail,
        details=getattr(exc, "details", None),
    )
    return JSONResponse(body.model_dump(), status_code=exc.status_code, headers=exc.headers)


@app.exception_handler(InvalidNamespaceError)  # type: ignore[untyped-decorator]
async def bad_namespace(_request: Request, exc: InvalidNamespaceError) -> JSONResponse:
    """A store namespace LangGraph's store refuses (an empty label, a label with '.'): the caller's
    mistake, a 422."""
    body = AgentProtocolError(
        error=get_error_type(422),
        message=f"{exc}: a namespace label is non-empty text without '.'",
        details=None,
    )
    return JSONResponse(body.model_dump(), status_code=422)
