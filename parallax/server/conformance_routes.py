"""`POST /threads/count`, which Aegra lacks: how many threads `POST /threads/search` would list."""

from __future__ import annotations

from typing import Annotated, Any

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.core.orm import get_session
from aegra_api.models import User
from fastapi import APIRouter, Body, Depends, HTTPException
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncSession

router = APIRouter(dependencies=auth_dependency)
STATUSES = ("idle", "busy", "interrupted", "error")


@router.post("/threads/count")  # type: ignore[untyped-decorator]
async def count_threads(
    user: Annotated[User, Depends(get_current_user)],
    session: Annotated[AsyncSession, Depends(get_session)],
    body: Annotated[dict[str, Any] | None, Body()] = None,
) -> int:
    from aegra_api.core.auth_filters import build_metadata_filter
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import Thread as ThreadORM

    request = body or {}
    metadata, status = request.get("metadata"), request.get("status")
    if metadata is not None and not isinstance(metadata, dict):
        raise HTTPException(422, "metadata must be an object of the keys and values to match")
    if status is not None and status not in STATUSES:
        raise HTTPException(422, f"status must be one of {', '.join(STATUSES)}, not {status!r}")
    filters = await handle_event(
        build_auth_context(user, "threads", "search"), {"metadata": metadata, "status": status}
    )
    stmt = select(func.count()).select_from(ThreadORM).where(ThreadORM.user_id == user.identity)
    auth_filter = build_metadata_filter(ThreadORM.metadata_json, filters)
    if auth_filter is not None:
        stmt = stmt.where(auth_filter)
    if status:
        stmt = stmt.where(ThreadORM.status == status)
    if metadata:
        stmt = stmt.where(ThreadORM.metadata_json.op("@>")(metadata))
    return int(await session.scalar(stmt) or 0)
