"""Contract tests of server/aegra_patches.py against the Aegra and LangGraph installed in the server
venv (no fakes).

Each patch holds only while what it changes is where, and as, it was written against: these tests
fail when a target is renamed or moved or its signature changes, when Aegra stops looking a replaced
name up where the patch rebinds it, and, for the patches that fix a behaviour, when Aegra no longer
behaves as the patch assumes (then the patch can go). They also show that importing Parallax's
server changes nothing of Aegra's, that the lifespan makes every change and a second install none
more, and that `parallax serve` refuses an untested Aegra in one line (exit 2) unless told to run
anyway.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

pytestmark = pytest.mark.deploy

ROOT = Path(__file__).resolve().parents[2]
PARALLAX = Path(sys.executable).with_name("parallax")

try:
    import aegra_api  # noqa: F401
except ImportError:
    pytest.skip(
        "needs the server venv (Python 3.12, pip install -e '.[server,test]')",
        allow_module_level=True,
    )

from parallax.server import aegra_patches  # noqa: E402  (after the skip: it needs the server extra)

TARGETS = [
    (patch.name, path, written)
    for patch in aegra_patches.PATCHES
    for path, written in patch.targets.items()
]
CALLERS = [
    (patch.name, caller, name)
    for patch in aegra_patches.PATCHES
    for caller, name in patch.callers.items()
]


def names_looked_up(function: object) -> set[str]:
    """Every global and attribute name the function's code (nested code included) looks up."""
    found: set[str] = set()
    stack = [inspect.unwrap(function).__code__]  # type: ignore[arg-type]
    while stack:
        code = stack.pop()
        found |= set(code.co_names)
        stack += [const for const in code.co_consts if inspect.iscode(const)]
    return found


def run_python(script: str, env: dict[str, str] | None = None) -> dict:
    """Run `script` in a fresh interpreter of this venv (nothing of this test process's imports);
    its last stdout line, as JSON."""
    import os

    base = {
        k: v
        for k, v in os.environ.items()
        if k not in ("DATABASE_URL", "REDIS_URL", "PARALLAX_ALLOW_UNTESTED_AEGRA")
    }
    done = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(script)],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
        env={**base, "LOG_LEVEL": "warning", **(env or {})},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize(
    ("patch", "path", "written"),
    TARGETS + [("called", p, w) for p, w in aegra_patches.CALLED.items()],
    ids=[f"{t[0]}:{t[1].rsplit('.', 2)[-2]}.{t[1].rsplit('.', 1)[-1]}" for t in TARGETS]
    + [f"called:{p.rsplit('.', 1)[-1]}" for p in aegra_patches.CALLED],
)
def test_each_target_is_where_and_as_the_patch_was_written(patch, path, written):
    assert aegra_patches.mismatch(path, written) is None


def test_a_renamed_or_reshaped_target_is_reported_not_patched():
    assert "is gone" in aegra_patches.mismatch(
        "aegra_api.services.run_executor._signal_run_gone", "(run_id)"
    )
    assert "is now (run_id)" in aegra_patches.mismatch(
        "aegra_api.services.run_executor._signal_run_done", "(run_id, *, x)"
    )


@pytest.mark.parametrize(
    ("patch", "caller", "name"), CALLERS, ids=[f"{c[0]}:{c[2]}" for c in CALLERS]
)
def test_aegra_looks_each_replaced_name_up_where_the_patch_rebinds_it(patch, caller, name):
    assert name in names_looked_up(aegra_patches.resolve(caller))


def test_every_private_aegra_name_parallax_imports_is_listed():
    import re

    imported = set()
    for source in (ROOT / "parallax").rglob("*.py"):
        for module, names in re.findall(
            r"from (aegra_api[\w.]*) import ([^\n#]+)", source.read_text()
        ):
            for name in re.findall(
                r"\b(_\w+)", names.split(" as ")[0] if " as " in names else names
            ):
                imported.add(f"{module}.{name}")
    assert imported <= set(aegra_patches.CALLED), (
        f"add to aegra_patches.CALLED: {sorted(imported - set(aegra_patches.CALLED))}"
    )


def test_importing_the_server_changes_nothing_the_lifespan_changes_each_target_once():
    replaced = [
        path
        for _, path, _ in TARGETS
        if not path.startswith("langgraph.") and "_copy_graph_config" not in path
    ]
    found = run_python(f"""
        import asyncio, importlib, json, pkgutil

        def resolve(path):
            parts = path.split(".")
            for cut in range(len(parts), 0, -1):
                try:
                    found = importlib.import_module(".".join(parts[:cut]))
                except ImportError:
                    continue
                for name in parts[cut:]:
                    found = getattr(found, name)
                return found

        paths = {json.dumps([p for _, p, _ in TARGETS])}
        before = {{p: id(resolve(p)) for p in paths}}
        import parallax.server
        from parallax.runtime import lease_check
        for module in pkgutil.iter_modules(parallax.server.__path__):
            importlib.import_module("parallax.server." + module.name)
        after_import = {{p: id(resolve(p)) for p in paths}}
        guard_after_import = lease_check._guard
        from parallax.server import aegra_patches
        from parallax.server.app import app

        async def lifespan():
            async with app.router.lifespan_context(app):
                return {{p: id(resolve(p)) for p in paths}}

        after_lifespan = asyncio.run(lifespan())
        again = aegra_patches.install()
        after_again = {{p: id(resolve(p)) for p in paths}}
        print(json.dumps({{"import": [p for p in paths if before[p] != after_import[p]],
                          "guard_after_import": guard_after_import is not None,
                          "lifespan": [p for p in paths if after_lifespan[p] != before[p]],
                          "guard_after_lifespan": lease_check._guard is not None,
                          "again": [p for p in paths if after_again[p] != after_lifespan[p]],
                          "again_line": again.line()}}))
    """)
    assert found["import"] == [] and not found["guard_after_import"]
    assert sorted(found["lifespan"]) == sorted(replaced) and found["guard_after_lifespan"]
    assert found["again"] == []
    assert found["again_line"].startswith(
        "Aegra patches: run_done, run_charges, stream_transformers, custom_events, "
        "db_pool, fencing ("
    )


def test_custom_events_a_named_payload_goes_out_as_written_where_aegra_wraps_it():
    from aegra_api.services.event_streaming import session

    aegra_patches.install(allow_untested=False)
    named, plain = {"name": "progress", "step": "work"}, {"step": "work"}
    assert session._custom_events("custom", named, ["n"]) == [("custom", named, ["n"])]
    assert session._custom_events("custom", plain, ["n"]) == [("custom", {"payload": plain}, ["n"])]
    # the reason for the patch: Aegra itself puts the name one level down, where no
    # `custom:progress` matches
    assert inspect.unwrap(session._custom_events)("custom", named, ["n"]) == [
        ("custom", {"payload": named}, ["n"])
    ]


def test_stream_transformers_a_graph_with_its_own_transformers_streams_where_aegra_refuses_it():
    from aegra_api.services import run_executor

    from testkit.protocol_graph import graph

    aegra_patches.install(allow_untested=False)

    async def stream(driver):
        return [
            method
            async for method, _ in driver(
                graph=graph, input_data={"ask": False}, config={"configurable": {"thread_id": "t"}}
            )
        ]

    methods = asyncio.run(stream(run_executor.stream_native_v3_events))
    assert {"updates", "custom"} <= set(methods)
    with pytest.raises(
        Exception, match="conflict with already-registered keys"
    ):  # Aegra's own driver, unpatched
        asyncio.run(stream(inspect.unwrap(run_executor.stream_native_v3_events)))


def test_fencing_each_execution_gets_its_own_config_copy_and_workers_named_as_the_fence_reads():
    from aegra_api.services.langgraph_service import _copy_graph_config
    from aegra_api.services.worker_executor import WorkerExecutor

    from parallax.server import lease_fence

    config = {"configurable": {lease_fence.FENCE_KEY: {}}}
    copied = _copy_graph_config(config)
    copied["configurable"][lease_fence.FENCE_KEY]["generation"] = 7
    assert config["configurable"][lease_fence.FENCE_KEY] == {}
    assert f"{WorkerExecutor()._instance_id}-worker-" == lease_fence.process_prefix()


def test_db_pool_the_pool_aegra_opens_waits_120_s_where_aegra_leaves_30(tmp_path):
    from testkit.aegra_cluster import Cluster, missing_services

    if missing := missing_services():
        pytest.fail("missing: " + "; ".join(missing))
    cluster = Cluster(tmp_path).create()
    try:
        found = run_python(
            """
            import asyncio, json
            from aegra_api.core.database import db_manager
            from parallax.server import aegra_patches

            async def opened():
                await db_manager.initialize()
                timeout = db_manager.lg_pool.timeout
                await db_manager.close()
                return timeout

            unpatched = asyncio.run(opened())
            aegra_patches.install(allow_untested=False)
            print(json.dumps({"unpatched": unpatched, "patched": asyncio.run(opened())}))
        """,
            env={"DATABASE_URL": cluster.database_url},
        )
    finally:
        cluster.close()
    assert found == {"unpatched": 30.0, "patched": 120.0}


def shadowed_aegra(tmp_path: Path, version: str) -> dict[str, str]:
    """An environment whose first sys.path entry holds the metadata of another aegra-api release
    (the code stays the installed one): what `importlib.metadata` reports when a venv got another
    Aegra."""
    dist = tmp_path / "shadow" / f"aegra_api-{version}.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: aegra-api\nVersion: {version}\n")
    return {"PYTHONPATH": str(dist.parent)}


def test_serve_refuses_an_untested_aegra_in_one_line_with_exit_2_unless_told_to_run_anyway(
    tmp_path,
):
    import os

    env = {
        **os.environ,
        **shadowed_aegra(tmp_path, "0.12.0"),
        "PARALLAX_API_KEYS": "k:acme",
        "DATABASE_URL": "postgresql://nobody@127.0.0.1:1/none",
        "PARALLAX_HOME": str(tmp_path / "home"),
    }
    env.pop("PARALLAX_ALLOW_UNTESTED_AEGRA", None)
    refused = subprocess.run(
        [str(PARALLAX), "serve", "--port", "2999"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert refused.returncode == 2, refused.stderr
    assert refused.stderr.strip().splitlines() == [
        "error: untested aegra-api 0.12.0 (tested: >=0.11,<0.12): Parallax changes Aegra internals"
        " written for the tested versions (docs/deploy.md, Aegra patches); install those (pip"
        " install -c constraints/server.txt -e '.[server]') or run anyway with"
        " --allow-untested-aegra"
    ]
    allowed = subprocess.run(
        [str(PARALLAX), "serve", "--port", "2999", "--allow-untested-aegra"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    lines = allowed.stderr.strip().splitlines()
    assert lines[0].startswith("running on UNTESTED versions: aegra-api 0.12.0, langgraph "), (
        allowed.stderr
    )
    assert allowed.returncode == 1 and lines[-1].startswith(
        "error: cannot migrate the database"
    )  # past the check


def test_the_docs_table_lists_every_patch_and_its_targets():
    section = (
        (ROOT / "docs" / "deploy.md")
        .read_text()
        .split("## Aegra patches", 1)[1]
        .split("\n## ", 1)[0]
    )
    for patch in aegra_patches.PATCHES:
        row = next(
            (line for line in section.splitlines() if line.startswith(f"| `{patch.name}` ")), ""
        )
        assert row, f"docs/deploy.md, Aegra patches: no row for {patch.name}"
        for path in patch.targets:
            assert path.rsplit(".", 1)[-1] in row, f"{patch.name}: {path} missing from its row"
    assert all(path.rsplit(".", 1)[-1] in section for path in aegra_patches.CALLED)
