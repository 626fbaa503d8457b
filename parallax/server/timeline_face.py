"""`GET /timeline/{trace_id}`: a run's timeline as SVG, or its lanes as JSON (`?format=json`).

Mounted by both servers' HTTP apps; it reads through the graph API, so its auth decides what a
caller sees. See docs/deploy.md#clients.
"""

from __future__ import annotations

import httpx
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from parallax.logic.timeline import timeline
from parallax.logic.timeline_svg import render_svg
from parallax.runtime import settings as settings_mod
from parallax.server.caller import MISSING_KEY, caller_of
from parallax.server.openai_face import credentials, loopback
from parallax.state.trace_record import as_trace


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse(
        {
            "error": (
                {404: "not_found", 401: "unauthorized", 422: "unprocessable_entity"}.get(
                    status, "error"
                )
            ),
            "message": message,
        },
        status_code=status,
    )


async def show(request: Request) -> Response:
    trace_id = request.path_params["trace_id"]
    form = request.query_params.get("format", "svg")
    if form not in ("svg", "json"):
        return _error(422, f"format must be svg or json, got {form!r}")
    if settings_mod.load().api_key_tenants or settings_mod.load().jwt_jwks:
        caller = caller_of(request.scope)
        if caller is None:
            return _error(401, MISSING_KEY)
        tenant = caller.tenant
    else:
        tenant = request.query_params.get("tenant") or "default"
    try:
        item = await loopback(request).store.get_item(
            ["traces", tenant], trace_id, headers=credentials(request)
        )
    except httpx.HTTPStatusError as exc:
        status = exc.response.status_code if getattr(exc, "response", None) is not None else 502
        if status != 404:
            return _error(status, f"the trace could not be read: {exc}")
        item = None
    if not item:
        return _error(
            404,
            f"no trace {trace_id!r} for tenant {tenant!r}: use the full trace id a run returned",
        )
    line = timeline(as_trace(item["value"], trace_id))
    if form == "json":
        return JSONResponse(line.as_dict())
    return Response(render_svg(line), media_type="image/svg+xml")


app = Starlette(routes=[Route("/{trace_id}", show, methods=["GET"])])
