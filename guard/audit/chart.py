"""The chart of the offline audit: cumulative disclosures over the log, as SVG or text.

x is log time when every entry has one (and they span some time), else the entry
number; y counts disclosures so far. Plain SVG markup: no plotting dependency.
"""

from __future__ import annotations

import datetime as dt
import html
from collections.abc import Callable, Sequence

from guard.audit.offline import TimelinePoint

__all__ = ["chart_svg", "text_chart"]

_W, _H, _LEFT, _RIGHT, _TOP, _BOTTOM = 640, 260, 56, 16, 28, 44


def chart_svg(points: Sequence[TimelinePoint]) -> str:
    """An SVG step chart of cumulative disclosures, a dot where the count grows: x is log
    time when every point has a time and they span some, else the entry number."""
    x_of, x_labels = _x_axis(points)
    top = max([p.disclosures for p in points] + [1])
    plot_w, plot_h = _W - _LEFT - _RIGHT, _H - _TOP - _BOTTOM

    def sx(x: float) -> float:
        return _LEFT + x * plot_w

    def sy(y: float) -> float:
        return _TOP + plot_h - y / top * plot_h

    path = [f"M{sx(0):.1f},{sy(0):.1f}"]
    level = 0
    for p in points:
        x = x_of(p)
        path.append(f"H{sx(x):.1f}V{sy(p.disclosures):.1f}" if p.disclosures != level else f"H{sx(x):.1f}")
        level = p.disclosures
    path.append(f"H{sx(1):.1f}")
    marks = []
    previous = 0
    for p in points:
        if p.disclosures > previous:
            marks.append(
                f'<circle cx="{sx(x_of(p)):.1f}" cy="{sy(p.disclosures):.1f}" r="3.5" fill="#b00020">'
                f"<title>entry #{p.seq}: {p.disclosures} disclosure(s) so far</title></circle>"
            )
        previous = p.disclosures
    ticks = sorted({0, top, top // 2})
    y_axis = "".join(
        f'<line x1="{_LEFT - 4}" x2="{_W - _RIGHT}" y1="{sy(t):.1f}" y2="{sy(t):.1f}" stroke="#e0e0e0"/>'
        f'<text x="{_LEFT - 8}" y="{sy(t) + 4:.1f}" text-anchor="end">{t}</text>'
        for t in ticks
    )
    base = _TOP + plot_h
    left_label, right_label, axis_name = x_labels
    return (
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{_W}" height="{_H}" viewBox="0 0 {_W} {_H}" '
        'role="img" font-family="sans-serif" font-size="12">'
        "<title>Cumulative disclosures over the log</title>"
        f'<text x="{_LEFT}" y="16" font-weight="bold">cumulative disclosures (groups of fewer than k '
        "respondents with a derivable total)</text>"
        f"{y_axis}"
        f'<line x1="{_LEFT}" x2="{_W - _RIGHT}" y1="{base}" y2="{base}" stroke="#333"/>'
        f'<line x1="{_LEFT}" x2="{_LEFT}" y1="{_TOP}" y2="{base}" stroke="#333"/>'
        f'<path d="{"".join(path)}" fill="none" stroke="#b00020" stroke-width="2"/>'
        f"{''.join(marks)}"
        f'<text x="{_LEFT}" y="{base + 18}">{html.escape(left_label)}</text>'
        f'<text x="{_W - _RIGHT}" y="{base + 18}" text-anchor="end">{html.escape(right_label)}</text>'
        f'<text x="{_LEFT + plot_w / 2:.1f}" y="{base + 36}" text-anchor="middle">{axis_name}</text>'
        "</svg>"
    )


def text_chart(points: Sequence[TimelinePoint], width: int = 60, height: int = 8) -> str:
    """The same step chart in characters (for Markdown and terminals), x by entry number."""
    if not points:
        return "(empty log)"
    top = max(p.disclosures for p in points)
    columns = []
    for c in range(min(width, len(points))):
        last = (c + 1) * len(points) // min(width, len(points)) - 1
        columns.append(points[last].disclosures)
    lines = []
    for row in range(height, 0, -1):
        threshold = row * max(top, 1) / height
        label = f"{top:>5} |" if row == height else "      |"
        lines.append(label + "".join("#" if v >= threshold and v > 0 else " " for v in columns))
    lines.append(f"{0:>5} +" + "-" * len(columns))
    lines.append(f"       entry #{points[0].seq} .. #{points[-1].seq} ({top} disclosure(s) at the end)")
    return "\n".join(lines)


def _x_axis(
    points: Sequence[TimelinePoint],
) -> tuple[Callable[[TimelinePoint], float], tuple[str, str, str]]:
    """(point -> x in [0, 1], (left label, right label, axis name))."""
    times = [p.time for p in points]
    if points and all(t is not None for t in times):
        first, last = min(t for t in times if t), max(t for t in times if t)
        span = (last - first).total_seconds()
        if span > 0:

            def by_time(p: TimelinePoint) -> float:
                assert p.time is not None
                return (p.time - first).total_seconds() / span

            return by_time, (_time(first), _time(last), "log time (UTC)")
    position = {p.seq: i for i, p in enumerate(points, start=1)}

    def by_seq(p: TimelinePoint) -> float:
        return position[p.seq] / len(points)

    first_seq = f"#{points[0].seq}" if points else ""
    last_seq = f"#{points[-1].seq}" if points else ""
    return by_seq, (first_seq, last_seq, "log entry")


def _time(value: dt.datetime) -> str:
    return value.isoformat()
