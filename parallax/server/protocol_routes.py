"""Routes Aegra does not serve, as langgraph-api answers them: `GET /ok`, `POST /threads/{id}/copy`.

See docs/internals/server.md#agent-protocol-fix-ups.
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.core.orm import get_session
from aegra_api.models import User
from fastapi import APIRouter, Depends
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from parallax.runtime.model_note import model_in_use

router = APIRouter()
threads_router = APIRouter(dependencies=auth_dependency)

CHECKPOINT_TABLES = ("checkpoints", "checkpoint_blobs", "checkpoint_writes")


@router.get("/ok")  # type: ignore[untyped-decorator]
async def ok() -> dict[str, Any]:
    """`ok`, as langgraph-api answers, and what runs answer with (`model.embedded`: the toy default,
    said in `note`)."""
    return {"ok": True, "model": model_in_use()}


async def copy_checkpoints(session: AsyncSession, source: str, target: str) -> int:
    """Copy a thread's rows of LangGraph's checkpoint tables to `target` (in the caller's
    transaction); how many checkpoints were copied. Columns are read from the catalogue, so a newer
    checkpointer schema (another column) is copied whole as well."""
    copied = 0
    for table in CHECKPOINT_TABLES:
        columns = [
            row[0]
            for row in await session.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = :table "
                    "AND table_schema = current_schema() ORDER BY ordinal_position"
                ),
                {"table": table},
            )
        ]
        if "thread_id" not in columns:
            continue
        values = ", ".join(":target" if c == "thread_id" else f'"{c}"' for c in columns)
        names = ", ".join(f'"{c}"' for c in columns)
        result = await session.execute(
            text(
                f'INSERT INTO "{table}" ({names}) SELECT {values} FROM "{table}" '  # nosec B608
                "WHERE thread_id = :source"  # names: a fixed list and the catalogue's columns
            ),
            {"source": source, "target": target},
        )
        if table == "checkpoints":
            copied = result.rowcount or 0
    return copied


@threads_router.post("/threads/{thread_id}/copy")  # type: ignore[untyped-decorator]
async def copy_thread(
    thread_id: str,
    user: Annotated[User, Depends(get_current_user)],
    session: Annotated[AsyncSession, Depends(get_session)],
) -> Any:
    from aegra_api.api.threads import _serialize_thread, get_thread
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import Thread as ThreadORM

    source = await get_thread(
        thread_id, user=user, session=session
    )  # threads.read; 404 if not the caller's
    new_id = str(uuid.uuid4())
    metadata: dict[str, Any] = dict(source.metadata or {})
    value = {"thread_id": new_id, "metadata": metadata}
    await handle_event(build_auth_context(user, "threads", "create"), value)
    copy = ThreadORM(
        thread_id=new_id, status="idle", metadata_json=value["metadata"], user_id=user.identity
    )
    session.add(copy)
    await session.flush()
    await copy_checkpoints(session, thread_id, new_id)
    await session.commit()
    await session.refresh(copy)
    return _serialize_thread(copy)
