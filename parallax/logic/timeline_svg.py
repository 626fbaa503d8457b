"""A run's timeline (logic/timeline.py) drawn as one self-contained SVG file.

See docs/internals/runs.md#timelines.
"""

from __future__ import annotations

from html import escape

from parallax.logic.timeline import Lane, Timeline

COLOURS = {
    "queued": "#c9ced6",
    "running": "#3b7dd8",
    "failed": "#d64541",
    "retry": "#f0a030",
    "task": "#6c5ba7",
}
END_COLOURS = {
    "completed": "#2e9e5b",
    "escalated": "#d64541",
    "cancelled": "#7d8590",
    "open": "#7d8590",
}
LABEL_W, PLOT_W, ROW_H, TOP, BOTTOM = 300, 760, 20, 58, 46


def _x(seconds: float, duration: float) -> float:
    return LABEL_W + (seconds / duration if duration > 0 else 0.0) * PLOT_W


def _title(*parts: str) -> str:
    return f"<title>{escape(' - '.join(p for p in parts if p))}</title>"


def _ticks(duration: float) -> list[float]:
    """About eight round steps across the run (0.1 s, 0.25 s, 0.5 s, 1 s, 2 s, 5 s, ...)."""
    for step in (
        0.01,
        0.025,
        0.05,
        0.1,
        0.25,
        0.5,
        1,
        2,
        5,
        10,
        15,
        30,
        60,
        120,
        300,
        600,
        1800,
        3600,
    ):
        if duration / step <= 10:
            return [round(i * step, 3) for i in range(int(duration / step) + 1)]
    return [0.0, duration]


def _end_mark(lane: Lane, x: float, y: float) -> str:
    colour = END_COLOURS[lane.end]
    if lane.end == "completed":
        return (
            f'<path d="M{x + 3:.1f},{y:.1f} l3,4 l6,-8" stroke="{colour}" stroke-width="2"'
            ' fill="none"/>'
        )
    if lane.end == "escalated":
        return (
            f'<path d="M{x + 3:.1f},{y - 4:.1f} l8,8 M{x + 11:.1f},{y - 4:.1f} l-8,8"'
            f' stroke="{colour}" stroke-width="2"/>'
        )
    if lane.end == "cancelled":
        return f'<path d="M{x + 3:.1f},{y + 5:.1f} l8,-10" stroke="{colour}" stroke-width="2"/>'
    return ""


def _lane(lane: Lane, row: int, duration: float) -> list[str]:
    y = TOP + row * ROW_H
    mid = y + ROW_H / 2
    out = [
        f'<rect x="0" y="{y}" width="{LABEL_W + PLOT_W + 40}" height="{ROW_H}"'
        f' fill="{"#f6f7f9" if row % 2 else "#fff"}"/>'
    ]
    tags = [
        f"wave {lane.wave}" if lane.wave else "",
        f"{lane.attempts} tries" if lane.attempts > 1 else "",
        "" if lane.winner else "lost the race",
    ]
    label = lane.label + (f"  [{', '.join(t for t in tags if t)}]" if any(tags) else "")
    weight = "bold" if lane.kind == "task" else "normal"
    indent = 8 if lane.kind == "task" or lane.task is None else 20
    out.append(
        f'<text x="{indent}" y="{mid + 4:.1f}" font-size="11" font-weight="{weight}"'
        f' fill="#24292f">{escape(label[:52])}{_title(lane.label, lane.status, *tags)}</text>'
    )
    for segment in lane.segments:
        x0, x1 = _x(segment.start, duration), _x(segment.end, duration)
        colour = COLOURS["task"] if lane.kind == "task" else COLOURS[segment.phase]
        height = ROW_H - 8 if segment.phase == "running" or lane.kind == "task" else ROW_H - 12
        opacity = "0.45" if not lane.winner else "1"
        span = f"{segment.start:.3f}-{segment.end:.3f} s"
        out.append(
            f'<rect x="{x0:.1f}" y="{mid - height / 2:.1f}" width="{max(x1 - x0, 1.5):.1f}"'
            f' height="{height}" '
            f'rx="2" fill="{colour}" fill-opacity="{opacity}">'
            f"{_title(lane.id, segment.phase, span, segment.reason)}</rect>"
        )
    if lane.segments:
        out.append(_end_mark(lane, _x(lane.finish, duration), mid))
    return out


def _edges(lanes: list[Lane], duration: float) -> list[str]:
    """Arrows from each plan task's dependencies to the task (solid: the one it waited on)."""
    rows = {lane.task: row for row, lane in enumerate(lanes) if lane.kind == "task"}
    by_task = {lane.task: lane for lane in lanes if lane.kind == "task"}
    out: list[str] = []
    for lane in by_task.values():
        for dep in lane.deps:
            if dep not in by_task or not lane.segments or not by_task[dep].segments:
                continue
            x0, y0 = _x(by_task[dep].finish, duration), TOP + rows[dep] * ROW_H + ROW_H / 2
            x1, y1 = _x(lane.start, duration), TOP + rows[lane.task] * ROW_H + ROW_H / 2
            dash = "" if dep == lane.waited_on else ' stroke-dasharray="3,3"'
            waited = "waited on it" if dep == lane.waited_on else ""
            out.append(
                f'<path d="M{x0:.1f},{y0:.1f} C{x0 + 18:.1f},{y0:.1f} {x1 - 18:.1f},{y1:.1f}'
                f' {x1:.1f},{y1:.1f}" '
                f'stroke="#6c5ba7" stroke-width="1.4" fill="none" marker-end="url(#arrow)"{dash}>'
                f"{_title(f'task {lane.task} needs task {dep}', waited)}</path>"
            )
    return out


def render_svg(line: Timeline) -> str:
    """The whole picture as an SVG document."""
    duration = line.duration or 1e-3
    height = TOP + len(line.lanes) * ROW_H + BOTTOM
    width = LABEL_W + PLOT_W + 40
    out = [
        (
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" viewBox="0'
            f' 0 {width} {height}" font-family="DejaVu Sans, Helvetica, Arial, sans-serif">'
        ),
        (
            '<defs><marker id="arrow" viewBox="0 0 10 10" refX="9" refY="5" markerWidth="6"'
            ' markerHeight="6" orient="auto"><path d="M0,0 L10,5 L0,10 z"'
            ' fill="#6c5ba7"/></marker></defs>'
        ),
        f'<rect width="{width}" height="{height}" fill="#fff"/>',
        (
            '<text x="8" y="20" font-size="14" font-weight="bold" fill="#24292f">trace'
            f" {escape(line.trace_id[:8])}: {escape(line.mode)}, {escape(line.status)},"
            f" {line.duration:.2f} s, {len(line.lanes)} lanes</text>"
        ),
    ]
    legend_x = 8
    for name, colour in (
        *[(k, v) for k, v in COLOURS.items() if k != "task" or line.mode == "plan"],
    ):
        out.append(
            f'<rect x="{legend_x}" y="30" width="12" height="10" fill="{colour}"/>'
            f'<text x="{legend_x + 16}" y="39" font-size="11" fill="#24292f">{name}</text>'
        )
        legend_x += 80
    for name, colour in (
        ("completed", END_COLOURS["completed"]),
        ("escalated", END_COLOURS["escalated"]),
        ("cancelled", END_COLOURS["cancelled"]),
    ):
        out.append(f'<text x="{legend_x}" y="39" font-size="11" fill="{colour}">■ {name}</text>')
        legend_x += 88
    bottom = TOP + len(line.lanes) * ROW_H
    for tick in _ticks(duration):
        x = _x(tick, duration)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP - 4}" x2="{x:.1f}" y2="{bottom}" stroke="#e3e6ea"/><text'
            f' x="{x:.1f}" y="{bottom + 14}" font-size="10" text-anchor="middle"'
            f' fill="#57606a">{tick:g} s</text>'
        )
    for row, lane in enumerate(line.lanes):
        out += _lane(lane, row, duration)
    for number, planned in enumerate(line.waves, start=1):
        x = _x(planned, duration)
        out.append(
            f'<line x1="{x:.1f}" y1="{TOP - 6}" x2="{x:.1f}" y2="{bottom}" stroke="#f0a030"'
            f' stroke-width="1.5" stroke-dasharray="5,3"/><text x="{x + 3:.1f}" y="{TOP - 8}"'
            f' font-size="10" fill="#b06f00">wave {number}</text>'
        )
    out += _edges(line.lanes, duration)
    out.append(
        f'<text x="{LABEL_W}" y="{bottom + 32}" font-size="10" fill="#57606a">seconds from the'
        " run's first recorded moment; hover a bar for its branch, phase, times and reason</text>"
    )
    out.append("</svg>")
    return "\n".join(out)
