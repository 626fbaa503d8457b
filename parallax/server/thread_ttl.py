"""Threads' `ttl` on update, and `POST /threads/prune` as LangGraph Platform answers it.

See docs/retention.md#threads-ttl and docs/retention.md#post-threadsprune.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal, TypeVar

from aegra_api.core.auth_deps import auth_dependency, get_current_user
from aegra_api.core.orm import get_session
from aegra_api.models import User
from fastapi import APIRouter, Body, Depends, HTTPException
from pydantic import AliasChoices, BaseModel, ConfigDict, Field, StringConstraints, ValidationError
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncSession

from parallax.runtime.ttl_config import NEVER_MIN

router = APIRouter(dependencies=auth_dependency)
CurrentUser = Annotated[User, Depends(get_current_user)]
Session = Annotated[AsyncSession, Depends(get_session)]

PRUNE_MAX_IDS = 1000
"""Most thread ids one `POST /threads/prune` names (each is its own delete)."""
ThreadId = Annotated[str, StringConstraints(min_length=1, max_length=255)]


class ThreadTTL(BaseModel):
    """A thread's `ttl` as langgraph-sdk sends it (Aegra's `default_ttl` accepted too)."""

    model_config = ConfigDict(extra="forbid")

    ttl: float = Field(gt=0, le=NEVER_MIN, validation_alias=AliasChoices("ttl", "default_ttl"))
    strategy: Literal["delete", "keep_latest"] = "delete"


class ThreadPatch(BaseModel):
    """LangGraph Platform's ThreadPatch: metadata to merge, and a new `ttl` from now."""

    model_config = ConfigDict(extra="forbid")

    metadata: dict[str, Any] | None = None
    ttl: ThreadTTL | None = None


class PruneRequest(BaseModel):
    """LangGraph Platform's ThreadPruneRequest."""

    model_config = ConfigDict(extra="forbid")

    thread_ids: list[ThreadId] = Field(max_length=PRUNE_MAX_IDS)
    strategy: Literal["delete", "keep_latest"] = "delete"


M = TypeVar("M", bound=BaseModel)


def parsed(model: type[M], body: Any, what: str) -> M:
    """`body` as `model`, or a 422 whose one line names the field and what is wrong with it."""
    try:
        return model.model_validate(body)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "body"
        raise HTTPException(422, f"{what}: {where}: {first['msg']}") from None


SET_TTL = text("""
INSERT INTO thread_ttl (thread_id, strategy, ttl_minutes, created_at, expires_at)
VALUES (:thread_id, :strategy, CAST(:minutes AS float8), now(),
        now() + make_interval(secs => CAST(:minutes AS float8) * 60))
ON CONFLICT (thread_id) DO UPDATE
SET strategy = EXCLUDED.strategy, ttl_minutes = EXCLUDED.ttl_minutes,
    expires_at = EXCLUDED.expires_at
""")


@router.patch("/threads/{thread_id}")  # type: ignore[untyped-decorator]
async def update_thread(
    thread_id: str, user: CurrentUser, session: Session, body: Annotated[Any, Body()] = None
) -> Any:
    from aegra_api.api.threads import update_thread as aegra_update
    from aegra_api.models import ThreadUpdate

    patch = parsed(ThreadPatch, body if body is not None else {}, "PATCH /threads")
    thread = await aegra_update(
        thread_id, ThreadUpdate(metadata=patch.metadata), user=user, session=session
    )
    if patch.ttl is not None:  # Aegra's update answered 404 for a thread not the caller's
        await session.execute(
            SET_TTL,
            {"thread_id": thread_id, "strategy": patch.ttl.strategy, "minutes": patch.ttl.ttl},
        )
        await session.commit()
    return thread


ACTIVE = text(
    "SELECT EXISTS (SELECT 1 FROM runs WHERE thread_id = :thread_id AND status IN ('pending',"
    " 'running'))"
)


async def owned(session: AsyncSession, user: User, thread_ids: list[str]) -> list[str]:
    """Those of `thread_ids` the caller may delete (its tenant's, through the auth handler's
    filter), in order."""
    from aegra_api.core.auth_filters import build_metadata_filter
    from aegra_api.core.auth_handlers import build_auth_context, handle_event
    from aegra_api.core.orm import Thread as ThreadORM
    from sqlalchemy import select

    filters = await handle_event(
        build_auth_context(user, "threads", "delete"), {"thread_ids": thread_ids}
    )
    stmt = select(ThreadORM.thread_id).where(
        ThreadORM.thread_id.in_(thread_ids), ThreadORM.user_id == user.identity
    )
    if (auth_filter := build_metadata_filter(ThreadORM.metadata_json, filters)) is not None:
        stmt = stmt.where(auth_filter)
    found = set((await session.scalars(stmt)).all())
    return [thread_id for thread_id in dict.fromkeys(thread_ids) if thread_id in found]


@router.post("/threads/prune")  # type: ignore[untyped-decorator]
async def prune_threads(
    user: CurrentUser, session: Session, body: Annotated[Any, Body()] = None
) -> dict[str, int]:
    from aegra_api.api.threads import delete_thread
    from aegra_api.api.threads import prune_threads as aegra_prune
    from aegra_api.services.thread_ttl import _prune_checkpoint_history

    if (
        body is None
    ):  # Aegra's own call (no body): the caller's expired threads, now; {"deleted", "pruned"}
        answer: dict[str, int] = (await aegra_prune(user=user, session=session)).model_dump()
        return answer
    request = parsed(PruneRequest, body, "POST /threads/prune")
    pruned = 0
    for thread_id in await owned(session, user, request.thread_ids) if request.thread_ids else []:
        if request.strategy == "delete":
            try:
                await delete_thread(thread_id, user=user, session=session)
            except HTTPException as exc:
                if exc.status_code != 404:  # deleted meanwhile: not counted
                    raise
                continue
        else:
            if (await session.execute(ACTIVE, {"thread_id": thread_id})).scalar_one():
                continue
            await _prune_checkpoint_history(thread_id)
        pruned += 1
    return {"pruned_count": pruned}
