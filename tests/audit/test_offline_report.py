"""The audit chart and readable texts, on hand-made timelines (no replay)."""

from __future__ import annotations

import datetime as dt
import xml.etree.ElementTree as ET

from guard.audit.chart import chart_svg, text_chart
from guard.audit.offline import TimelinePoint
from guard.audit.report import group_text

SVG = "{http://www.w3.org/2000/svg}"


def timeline(counts: list[int], times: bool) -> list[TimelinePoint]:
    start = dt.datetime(2024, 5, 1)
    return [
        TimelinePoint(i, start + dt.timedelta(hours=i) if times else None, n, 2 * n)
        for i, n in enumerate(counts, start=1)
    ]


def texts(svg: ET.Element) -> list[str]:
    return [t.text or "" for t in svg.iter(f"{SVG}text")]


def test_chart_by_entry_number_without_times() -> None:
    svg = ET.fromstring(chart_svg(timeline([0, 1, 1, 3, 3], times=False)))
    assert "log entry" in texts(svg) and "#1" in texts(svg) and "#5" in texts(svg)
    assert len(list(svg.iter(f"{SVG}circle"))) == 2  # the count grows twice
    [path] = svg.iter(f"{SVG}path")
    assert path.get("d", "").count("V") == 2


def test_chart_by_time_and_empty_chart() -> None:
    svg = ET.fromstring(chart_svg(timeline([0, 2], times=True)))
    assert "log time (UTC)" in texts(svg) and "2024-05-01T01:00:00" in texts(svg)
    empty = ET.fromstring(chart_svg([]))
    assert list(empty.iter(f"{SVG}circle")) == []


def test_text_chart_scales_to_its_width() -> None:
    chart = text_chart(timeline([0] * 50 + [4] * 100, times=False), width=30, height=4)
    lines = chart.splitlines()
    assert lines[0].startswith("    4 |") and len(lines) == 6
    bars = lines[3][len("      |") :]
    assert len(bars) == 30 and bars.startswith(" " * 9) and bars.endswith("#" * 20)
    assert "entry #1 .. #150 (4 disclosure(s) at the end)" in chart
    assert text_chart([]) == "(empty log)"


def test_group_text() -> None:
    assert group_text({"description": {"sex": "Female", "class": 1980, "x": None}, "rows": 1}) == (
        "sex='Female', class=1980, x IS NULL"
    )
    assert group_text({"description": None, "rows": 500}) == "500 rows (not described)"
    assert group_text({"description": {}, "rows": 7}) == "rows sharing no dimension value"
