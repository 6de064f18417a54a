"""MAX_JOIN against WINDOW on one engine: the same cells from both top-n templates.

A small policy with a table of one row per person (``flat``: the rows are the
contributions) and one of several (``panel``: per-unit partials), NULL keys (a text and
an integer key, the integer one also holding 0, MAX_JOIN's stand-in for NULL), tied and
negative amounts, persons without an amount, and cells of one or two persons (fewer
than a bound needs). tests/backends/test_cell_query.py checks both templates against a
brute-force computation on DuckDB; the engines' own tests check that they agree there.
"""

from __future__ import annotations

import dataclasses
import math
from pathlib import Path
from typing import Any

import yaml

from guard import Guard
from guard.backends.base import TopN
from guard.cells import CellGrid, cells_from_result
from guard.plan.rewrite import rewrite
from guard.query.analyze import analyze
from guard.query.parse import parse
from guard.query.validate import validate

__all__ = ["QUERIES", "compare_templates", "write_policy"]

QUERIES = [
    "SELECT SUM(amount), AVG(amount) FROM {t}",
    "SELECT region, zone, COUNT(*), SUM(amount), AVG(amount) FROM {t} GROUP BY region, zone",
    "SELECT region, zone, SUM(amount) FROM {t} WHERE year >= 2021 GROUP BY ROLLUP (region, zone)",
    "SELECT zone, SUM(amount), AVG(amount) FROM {t} GROUP BY CUBE (zone)",
]


def _rows(persons: int, years: int) -> list[dict[str, Any]]:
    rows = []
    for p in range(persons):
        for y in range(1 + (p * 7 + 3) % years):
            amount: int | None = (p * 37 + y * 11) % 90 - 20
            if p % 9 == 0 or (p + y) % 6 == 0:
                amount = None  # no amount that year (never any for every 9th person)
            elif p % 5 == 2:
                amount = 70  # ties
            rows.append(
                {
                    "pid": f"p{p:03d}",
                    "region": ("N", "S", "E", None)[(p + y) % 4],
                    "zone": (0, 1, None)[p % 3],
                    "year": 2020 + y,
                    "amount": amount,
                }
            )
    # a cell of one person (a bound needs three)
    rows.append({"pid": "p999", "region": "X", "zone": 5, "year": 2020, "amount": 3})
    return rows


def write_policy(folder: Path, backend: dict[str, Any]) -> Path:
    """The policy (with the ``backend:`` section) and its CSV files, in ``folder``."""
    folder.mkdir(parents=True, exist_ok=True)
    columns = {
        "pid": {"role": "identifier"},
        "region": {"role": "dimension"},
        "zone": {"role": "dimension"},
        "year": {"role": "dimension"},
        "amount": {"role": "measure", "bounds": [-50, 200]},
    }
    tables = {}
    for name, rows in (("flat", _rows(40, 1)), ("panel", _rows(30, 4))):
        header = list(columns)
        lines = [",".join(header)]
        lines += [",".join("" if row[c] is None else str(row[c]) for c in header) for row in rows]
        (folder / f"{name}.csv").write_text("\n".join(lines) + "\n")
        tables[name] = {
            "source": {"csv": str(folder / f"{name}.csv")},
            "privacy_unit": "pid",
            "columns": columns,
        }
    policy = {
        "name": "topn",
        "protection": {"min_query_set_size": 3},
        "tables": tables,
        "analysts": {"alice": {}},
        "backend": backend,
    }
    path = folder / "topn.yaml"
    path.write_text(yaml.safe_dump(policy, sort_keys=False))
    return path


def _grid(guard: Guard, sql: str, top_n: TopN) -> tuple[CellGrid, str]:
    policy, backend = guard.policy, guard.backend
    select, table = validate(parse(sql, policy.limits), policy.tables)
    info = backend.table_info(table.name)
    shape = analyze(select, table, info.types, policy.limits)
    capabilities = dataclasses.replace(backend.capabilities, top_n=top_n)
    plan = rewrite(shape, info, depth=3, capabilities=capabilities)
    return cells_from_result(shape, plan, backend.execute(plan.query), info), backend.sql(plan.query)


def _same(a: Any, b: Any) -> bool:
    if a is None or b is None:
        return a is None and b is None
    # AVG: the engine's AVG over rows, or a DOUBLE division of summed partials
    return math.isclose(float(a), float(b), rel_tol=1e-12)


def compare_templates(guard: Guard) -> int:
    """Assert that every query of QUERIES on both tables gives the same cells with
    MAX_JOIN as with WINDOW on ``guard``'s engine; return how many cells were compared."""
    compared = 0
    tops: list[tuple[float, ...]] = []
    for query in QUERIES:
        for table in ("flat", "panel"):
            sql = query.format(t=table)
            window, _ = _grid(guard, sql, TopN.WINDOW)
            joined, text = _grid(guard, sql, TopN.MAX_JOIN)
            assert "LEAST(" in text, f"{sql}: not the bounded template"
            assert "DISTINCT FROM" not in text, f"{sql}: cells matched without a hashable equality"
            assert (joined.keys, joined.rolled_up) == (window.keys, window.rolled_up), sql
            for keys, a, b in zip(window.keys, window.cells, joined.cells, strict=True):
                for x, y in zip(a, b, strict=True):
                    assert _same(x.value, y.value) and x.units == y.units, (sql, keys, x, y)
                    assert x.top == y.top and _same(x.magnitude, y.magnitude), (sql, keys, x, y)
                    compared += 1
            tops += [c.top for row in window.cells for c in row if c.top]
    # the data has what the template must get right
    assert any(len(set(t)) < len(t) for t in tops), "no ties"
    assert any(len(t) < 3 for t in tops), "no cell with fewer units than depth"
    return compared
