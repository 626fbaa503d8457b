"""`parallax playbook release|canary` and `parallax prompts release|canary`: gray release.

The rule that promotes or rolls back: parallax/logic/release_decision.py; see docs/data-loop.md.
"""

from __future__ import annotations

from typing import Annotated, Any, cast

import typer
from rich.console import Console
from rich.table import Table

from parallax.cli.common import AsJson, By, Name, Reason, Tenant, cell, emit, fail, who, with_store
from parallax.cli.tables import new_table
from parallax.logic.release_decision import Rule, check_rule, check_share
from parallax.logic.releases import canary_view, release
from parallax.state.release_record import Release

Canary = Annotated[
    float | None,
    typer.Option(
        "--canary",
        help=(
            "Percent of threads that get VERSION (0 < P < 100); "
            "leave out to serve VERSION to every run now."
        ),
    ),
]
Manual = Annotated[
    bool,
    typer.Option("--manual", help="Never decide automatically: a person promotes or rolls back."),
]
ErrorRate = Annotated[
    float, typer.Option(help="Stated error rate of the automatic decision (each way).")
]
Margin = Annotated[
    float,
    typer.Option(help="How much worse (success rate) the canary may be and still be promoted."),
]
MinRuns = Annotated[
    int,
    typer.Option(help="Runs per arm before the rule first looks (then it looks at 2x, 4x, ...)."),
]
MaxRuns = Annotated[
    int, typer.Option(help="Runs per arm at the last look; no decision by then = a person decides.")
]
Promote = Annotated[
    bool, typer.Option("--promote", help="Promote the running canary to production.")
]
Rollback = Annotated[bool, typer.Option("--rollback", help="Roll the running canary back.")]
PromptName = Annotated[
    str, typer.Argument(help="Prompt name: answer, slice, judge, red_team, reflect or curate.")
]


def subject_of(kind: str, name: str) -> str:
    return f"{kind}/{name}"


def rule_from(error_rate: float, margin: float, min_runs: int, max_runs: int) -> Rule:
    try:
        return check_rule(error_rate, margin, min_runs, max_runs)
    except ValueError as exc:
        fail(str(exc))


def arms_table(release: dict[str, Any]) -> Table:
    """Both arms of a release, one row per figure (so it reads on 80 columns)."""
    arms = [
        (f"{arm} v{version}", release["arms"][arm])
        for arm, version in (("production", release["base"]), ("canary", release["version"]))
    ]
    table = new_table(None, ("", *(name for name, _ in arms)), text=("",))
    table.add_row("runs", *(str(a["runs"]) for _, a in arms))
    table.add_row("success", *(cell(a["success_rate"], "share") for _, a in arms))
    table.add_row(
        "95% CI",
        *(f"{cell(a['ci95'][0], 'share')} to {cell(a['ci95'][1], 'share')}" for _, a in arms),
    )
    table.add_row("ok", *(cell(a["ok_rate"], "share") for _, a in arms))
    table.add_row(
        "accuracy (runs)",
        *(f"{cell(a['accuracy'], 'share')} ({a['accuracy_runs']})" for _, a in arms),
    )
    table.add_row(
        "feedback (runs)",
        *(f"{cell(a['feedback_mean'], 'mean')} ({a['feedback_runs']})" for _, a in arms),
    )
    table.add_row("p50 latency ms", *(cell(a["latency_ms_p50"], "ms") for _, a in arms))
    table.add_row("p95 latency ms", *(cell(a["latency_ms_p95"], "ms") for _, a in arms))
    return table


def print_canary(view: dict[str, Any]) -> None:
    console = Console(highlight=False)
    console.print(
        f"{view['subject']}: production v{view['production']}, canary "
        + (f"v{view['canary']}" if view["canary"] is not None else "none")
    )
    release = view["release"]
    if release is None:
        console.print("no release yet: start one with `release VERSION --canary PERCENT`")
        return
    state = (
        release["status"]
        if view["running"]
        else f"ended: {release['decision']} by {release['decided_by']}"
    )
    console.print(
        f"release {release['id']}: v{release['version']} vs v{release['base']} on"
        f" {release['share']:g}% ({'manual' if release['manual'] else 'automatic'}), {state}"
        + (f" - {release['why']}" if not view["running"] and release.get("why") else "")
    )
    console.print(arms_table(release))
    rule = release["rule"]
    console.print(
        f"difference {release['difference']:+.3f} (95% CI {release['difference_ci95'][0]:+.3f} to "
        f"{release['difference_ci95'][1]:+.3f}); rule: error rate {rule['error_rate']:g}, margin "
        f"{rule['margin']:g}, looks at {rule['looks_at_runs_per_arm']} runs per arm"
        + (
            f"; next look at {release['next_look_at']}"
            if view["running"] and release["next_look_at"]
            else ""
        )
    )
    if release.get("undecided_reason"):
        console.print(release["undecided_reason"])


def release_command(
    kind: str,
    name: str,
    version: int,
    canary: float | None,
    tenant: str,
    by: str | None,
    reason: str,
    manual: bool,
    rule: Rule,
    as_json: bool,
) -> None:
    if version < 0:
        fail(f"version must be 0 or more, got {version}")
    if canary is not None and canary < 100:
        try:
            check_share(canary)
        except ValueError as exc:
            fail(str(exc))
    subject = subject_of(kind, name)
    result = with_store(
        lambda store: release(
            store, tenant, subject, version, canary, by or who(), reason, rule, manual
        ),
        tenant,
        write=True,
    )
    if as_json:
        return emit(result)
    if canary is None or canary >= 100:
        Console().print(f"{subject}: v{version} is production (every run)")
    else:
        base = cast(Release, result)["base"]
        Console().print(
            f"{subject}: v{version} on canary for {canary:g}% of threads against v{base} "
            f"({'manual decision' if manual else 'automatic decision'}; see `canary`)"
        )


def canary_command(
    kind: str,
    name: str,
    tenant: str,
    promote: bool,
    rollback: bool,
    by: str | None,
    reason: str,
    as_json: bool,
) -> None:
    from parallax.logic.releases import end_release, labels_of

    if promote and rollback:
        fail("give --promote or --rollback, not both")
    subject = subject_of(kind, name)
    if promote or rollback:
        decision = "promote" if promote else "rollback"
        with_store(
            lambda store: end_release(
                labels_of(store, tenant, subject),
                decision,
                by or who(),
                reason or f"{decision} by a person",
            ),
            tenant,
            write=True,
        )
    view = with_store(lambda store: canary_view(store, tenant, subject), tenant)
    if as_json:
        return emit(view)
    print_canary(view)


def add_release_commands(app: typer.Typer, kind: str) -> None:
    """`release` and `canary` under a command group (playbook or prompts)."""
    if kind == "playbook":

        def release_cmd(
            version: Annotated[int, typer.Argument(help="Version to release.")],
            canary: Canary = None,
            playbook: Name = "default",
            tenant: Tenant = "default",
            by: By = None,
            reason: Reason = "",
            manual: Manual = False,
            error_rate: ErrorRate = 0.05,
            margin: Margin = 0.05,
            min_runs: MinRuns = 50,
            max_runs: MaxRuns = 1600,
            as_json: AsJson = False,
        ) -> None:
            """Serve VERSION to a share of threads (--canary P) with automatic promotion or
            rollback, or to every run."""
            release_command(
                kind,
                playbook,
                version,
                canary,
                tenant,
                by,
                reason,
                manual,
                rule_from(error_rate, margin, min_runs, max_runs),
                as_json,
            )

        def canary_cmd(
            playbook: Name = "default",
            tenant: Tenant = "default",
            promote: Promote = False,
            rollback: Rollback = False,
            by: By = None,
            reason: Reason = "",
            as_json: AsJson = False,
        ) -> None:
            """Show the running (or last) canary: both versions' metrics with 95% intervals; or
            decide it."""
            canary_command(kind, playbook, tenant, promote, rollback, by, reason, as_json)

        app.command("release")(release_cmd)
        app.command("canary")(canary_cmd)
    else:

        def prompt_release_cmd(
            name: PromptName,
            version: Annotated[int, typer.Argument(help="Version to release.")],
            canary: Canary = None,
            tenant: Tenant = "default",
            by: By = None,
            reason: Reason = "",
            manual: Manual = False,
            error_rate: ErrorRate = 0.05,
            margin: Margin = 0.05,
            min_runs: MinRuns = 50,
            max_runs: MaxRuns = 1600,
            as_json: AsJson = False,
        ) -> None:
            """Serve VERSION of prompt NAME to a share of threads (--canary P), or to every run."""
            release_command(
                kind,
                name,
                version,
                canary,
                tenant,
                by,
                reason,
                manual,
                rule_from(error_rate, margin, min_runs, max_runs),
                as_json,
            )

        def prompt_canary_cmd(
            name: PromptName,
            tenant: Tenant = "default",
            promote: Promote = False,
            rollback: Rollback = False,
            by: By = None,
            reason: Reason = "",
            as_json: AsJson = False,
        ) -> None:
            """Show the running (or last) canary of prompt NAME with 95% intervals; or decide it."""
            canary_command(kind, name, tenant, promote, rollback, by, reason, as_json)

        app.command("release")(prompt_release_cmd)
        app.command("canary")(prompt_canary_cmd)
