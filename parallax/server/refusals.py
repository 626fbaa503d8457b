"""One shape for every refusal of the served API, answered in the form the asked route demands.

See docs/deploy.md#admission ("One error shape").
"""

from __future__ import annotations

from typing import Any

from starlette.responses import JSONResponse

KINDS = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    409: "conflict",
    413: "payload_too_large",
    422: "validation_error",
    429: "too_many_requests",
    503: "service_unavailable",
}
"""The body's `error` for a status: Aegra's names (aegra_api/models/errors.py), and 413 and 429,
which it lacks."""
PROTOCOL_CODES = {403: "permission_denied", 404: "no_such_run", 429: "unknown_error"}
"""The v2 protocol's error code for a status (Aegra's mapping in `handle_command`); every other
refusal is "invalid_argument". The protocol has no code for "come back later": a 429 is
"unknown_error" with the reason."""


class Refused(Exception):
    """A request refused: its status, the one-line reason, the field at fault (dotted, None: the
    whole request)."""

    def __init__(
        self,
        status: int,
        message: str,
        field: str | None = None,
        *,
        kind: str | None = None,
        headers: dict[str, str] | None = None,
        details: dict[str, Any] | None = None,
    ) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field
        self.kind = kind or KINDS.get(status, "error")
        self.headers = headers or {}
        self.details = details or {}

    def body(self) -> dict[str, Any]:
        """Aegra's error body."""
        details = {**({"field": self.field} if self.field is not None else {}), **self.details}
        return {"error": self.kind, "message": self.message, "details": details or None}

    def response(self) -> JSONResponse:
        return JSONResponse(self.body(), status_code=self.status, headers=self.headers)

    def envelope(self, command_id: Any) -> dict[str, Any]:
        """The v2 protocol's error envelope for the command `command_id`."""
        code = (
            self.kind
            if self.kind == "insufficient_quota"
            else PROTOCOL_CODES.get(self.status, "invalid_argument")
        )
        return {"type": "error", "id": command_id, "error": code, "message": self.message}


def invalid(message: str, field: str | None = None) -> Refused:
    """A 422: the request cannot run as sent."""
    return Refused(422, message, field)
