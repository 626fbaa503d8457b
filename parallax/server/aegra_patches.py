"""Every change Parallax makes to Aegra's and LangGraph's internals, listed as data, and installed.

`PATCHES` gives each change's targets and signatures, why, and its tests; `CALLED` the private Aegra
functions called unchanged. Nothing changes on import: `install` runs from `parallax serve`'s app
factory and again from the app's lifespan. See docs/deploy.md#aegra-patches.
"""

from __future__ import annotations

import importlib
import inspect
import logging
import sys
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from dataclasses import dataclass, field
from typing import Any

from parallax.runtime import served_versions
from parallax.runtime import settings as settings_mod
from parallax.server import (
    custom_events,
    db_pool,
    lease_fence,
    run_charges,
    run_done,
    stream_transformers,
)

log = logging.getLogger("parallax.aegra_patches")

WRITTEN_FOR = "aegra-api 0.11.0, langgraph 1.2.24"
"""The versions every patch below was written and tested against."""
CONTRACT_TESTS = "tests/integration/test_aegra_patches.py"


@dataclass(frozen=True)
class Patch:
    """One change to Aegra's (or LangGraph's) internals."""

    name: str
    change: str
    """What it does to its targets: wraps, replaces, relies on."""
    targets: Mapping[str, str]
    """Dotted path -> the signature it had when the patch was written (names, kinds and defaults; no
    annotations)."""
    why: str
    apply: Callable[[], None]
    callers: Mapping[str, str] = field(default_factory=dict)
    """Aegra function -> the name it must look up at call time for a rebinding to reach it."""
    behaviour_test: str = ""
    """The deploy test that shows what the patch does, end to end (its contract: CONTRACT_TESTS)."""
    written_for: str = WRITTEN_FOR


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="run_done",
        change="wraps, replaces",
        targets={
            "aegra_api.services.run_executor._signal_run_done": "(run_id)",
            "aegra_api.services.worker_executor.WorkerExecutor.wait_for_completion": (
                "(self, run_id, *, timeout=300.0)"
            ),
        },
        why=(
            "runs.wait / runs.join return when the run ends (a Redis notification), not at Aegra's"
            " next 2 s poll"
        ),
        apply=run_done.install,
        behaviour_test="tests/integration/test_deploy_waits.py",
        callers={
            "aegra_api.services.run_executor.execute_run": "_signal_run_done",
            "aegra_api.services.run_waiters.heartbeat_wait_body": "wait_for_completion",
        },
    ),
    Patch(
        name="run_charges",
        change="wraps",
        targets={
            "aegra_api.services.run_executor.finalize_run": (
                "(run_id, thread_id, *, user_id, status, thread_status, output=None, error=None)"
            )
        },
        why=(
            "a run that ends without a settled spend (cancelled, failed, other graphs) is charged"
            " to its tenant's day"
        ),
        apply=run_charges.install,
        behaviour_test=(
            "tests/integration/test_tenant_budgets.py (a cancelled run and a chat run are charged)"
        ),
        callers={"aegra_api.services.run_executor.execute_run": "finalize_run"},
    ),
    Patch(
        name="stream_transformers",
        change="replaces",
        targets={
            "aegra_api.services.run_executor.stream_native_v3_events": (
                "(*, graph, input_data, config, context=None, durability=None)"
            ),
            "aegra_api.services.event_streaming.native_stream.stream_native_v3_events": (
                "(*, graph, input_data, config, context=None, durability=None)"
            ),
            "langgraph.pregel.main.Pregel.astream_events": (
                "(self, input, config=None, *, version='v2', transformers=None, **kwargs)"
            ),
        },
        why=(
            "a graph that registers its own stream transformers runs on the v2 event stream (no"
            " duplicate projection)"
        ),
        apply=stream_transformers.install,
        behaviour_test=(
            "tests/integration/test_agent_protocol.py (the protocol graph's own transformers)"
        ),
        callers={
            "aegra_api.services.run_executor._stream_native_v2": "stream_native_v3_events",
            "aegra_api.services.event_streaming.native_stream.stream_native_v3_events": (
                "astream_events"
            ),
        },
    ),
    Patch(
        name="custom_events",
        change="wraps",
        targets={
            "aegra_api.services.event_streaming.session._custom_events": "(method, data, namespace)"
        },
        why="a named custom event reaches thread.extensions[name] as the graph wrote it",
        apply=custom_events.install,
        behaviour_test="tests/integration/test_agent_protocol.py (thread.extensions)",
        callers={
            "aegra_api.services.event_streaming.session.ThreadEventSession._channel_events": (
                "_custom_events"
            )
        },
    ),
    Patch(
        name="db_pool",
        change="wraps",
        targets={"aegra_api.core.database.DatabaseManager.initialize": "(self)"},
        why=(
            "a run picked up right after a database restart waits for the LangGraph pool (120 s),"
            " not 30 s"
        ),
        apply=db_pool.install,
        behaviour_test="tests/integration/test_faults.py (db_restart)",
    ),
    Patch(
        name="fencing",
        change="relies on",
        targets={"aegra_api.services.langgraph_service._copy_graph_config": "(config)"},
        why=(
            "a replica that lost a run's lease calls no model for it (the guard every model call"
            " awaits)"
        ),
        apply=lease_fence.install,
        behaviour_test="tests/integration/test_faults.py, test_lease_fence.py",
    ),
)

CALLED: Mapping[str, str] = {
    "aegra_api.services.worker_executor._is_run_terminal": "(run_id)",
    "aegra_api.api.crons._cron_to_response": "(row)",
    "aegra_api.api.event_streaming._thread_run_lister": "(thread_id, user)",
    "aegra_api.api.event_streaming._verify_thread_owned_or_new": "(session, thread_id, user)",
    "aegra_api.api.threads._serialize_thread": "(thread_orm, default_metadata=None)",
    "aegra_api.core.orm._get_session_maker": "()",
    "aegra_api.services.thread_ttl._prune_checkpoint_history": "(thread_id)",
}
"""Private Aegra functions Parallax calls as they are (server/run_done.py, event_socket.py,
protocol_requests.py, protocol_routes.py, thread_ttl.py, ...), with the signatures they were written
against."""


class PatchesRefused(RuntimeError):
    """The installed Aegra is not the one the patches were written for, and running anyway was not
    asked for."""


def resolve(path: str) -> Any:
    """The object at a dotted path (module, then attributes); AttributeError or ImportError when it
    is not there."""
    parts = path.split(".")
    for cut in range(len(parts), 0, -1):
        try:
            found: Any = importlib.import_module(".".join(parts[:cut]))
        except ImportError:
            if cut == 1:
                raise
            continue
        for name in parts[cut:]:
            found = getattr(found, name)
        return found
    raise ImportError(path)


def shape(function: Callable[..., Any]) -> str:
    """A function's signature as its callers rely on it: parameter names, kinds and defaults, no
    annotations. A patched function answers for the one it wraps."""
    signature = inspect.signature(inspect.unwrap(function))
    bare = [
        parameter.replace(annotation=inspect.Parameter.empty)
        for parameter in signature.parameters.values()
    ]
    return str(signature.replace(parameters=bare, return_annotation=inspect.Signature.empty))


def mismatch(path: str, written: str) -> str | None:
    """Why the target at `path` is not the one a patch was written against (None: it is)."""
    try:
        found = resolve(path)
    except (ImportError, AttributeError) as exc:
        return f"{path} is gone ({type(exc).__name__}: {exc})"
    try:
        now = shape(found)
    except (TypeError, ValueError):
        return f"{path} is no longer a function"
    return None if now == written else f"{path} is now {now}, written for {written}"


@dataclass
class Installed:
    """What one `install` call found and did."""

    now: list[str] = field(default_factory=list)
    already: list[str] = field(default_factory=list)
    left_out: dict[str, str] = field(default_factory=dict)

    def line(self) -> str:
        names = ", ".join(self.now + self.already) or "none"
        out = "".join(f"; NOT patched: {name} ({why})" for name, why in self.left_out.items())
        return f"Aegra patches: {names}{out} (docs/deploy.md, Aegra patches)"


_installed: set[str] = set()


def install(allow_untested: bool | None = None) -> Installed:
    """Check the versions, then make every change not made yet in this process (a second call
    changes nothing). PatchesRefused when Aegra or LangGraph is untested, or a target is not as
    written, unless `allow_untested` (default: the PARALLAX_ALLOW_UNTESTED_AEGRA setting); with it,
    such a patch is left out and reported.
    """
    if allow_untested is None:
        allow_untested = settings_mod.load().allow_untested_aegra
    untested = served_versions.untested()
    if untested and not allow_untested:
        raise PatchesRefused(served_versions.refusal(untested))
    done = Installed()
    for patch in PATCHES:
        if patch.name in _installed:
            done.already.append(patch.name)
            continue
        problems = [
            problem
            for path, written in patch.targets.items()
            if (problem := mismatch(path, written))
        ]
        if problems:
            if not allow_untested:
                raise PatchesRefused(
                    f"Aegra patch {patch.name} cannot be made: {problems[0]}; run anyway with "
                    "--allow-untested-aegra"
                )
            done.left_out[patch.name] = problems[0]
            continue
        patch.apply()
        _installed.add(patch.name)
        done.now.append(patch.name)
    return done


def serving_app() -> Any:
    """uvicorn's app factory for `parallax serve`: the patches first, then Aegra's app. A refusal is
    one line and exit 2."""
    try:
        done = install()
    except PatchesRefused as exc:
        print(f"error: {exc}", file=sys.stderr, flush=True)
        raise SystemExit(2) from None
    print(done.line(), file=sys.stderr, flush=True)
    from aegra_api.main import app

    return app


def with_patches(
    inner: Callable[[Any], AbstractAsyncContextManager[None]],
) -> Callable[[Any], AbstractAsyncContextManager[None]]:
    """The app's lifespan: `install` (a no-op under `parallax serve`, which installed them first),
    then `inner`. A refusal fails Aegra's start."""

    @asynccontextmanager
    async def lifespan(app: Any) -> AsyncIterator[None]:
        done = install()
        if done.now or done.left_out:
            log.warning("%s", done.line())
        async with inner(app):
            yield

    return lifespan
