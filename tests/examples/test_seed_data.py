"""The bundled example data must reproduce the seed tables, independently of the guard.

Plain duckdb only: these tests pin the data itself, so a guard bug cannot hide a data bug.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import duckdb
import pytest
import yaml

ROOT = Path(__file__).resolve().parents[2]
CASTRO_CSV = ROOT / "examples" / "castro" / "castro.csv"
HOSPITAL_CSV = ROOT / "examples" / "hospital" / "hospital.csv"
HOSPITAL_RICH_CSV = ROOT / "examples" / "hospital" / "hospital-rich.csv"

MUNICIPALITIES = ("M1", "M2", "M3")
PROFESSIONS = ("P1", "P2", "P3", "P4", "P5")

# Castro (2012) tables as printed in seed 000: rows M1..M3, columns P1..P5.
SEED_FREQUENCIES = ((2, 15, 30, 20, 10), (72, 20, 1, 30, 10), (38, 38, 15, 40, 5))
SEED_FREQ_ROW_TOTALS = (77, 133, 136)
SEED_FREQ_COL_TOTALS = (112, 73, 46, 90, 25)
SEED_MAGNITUDES = (
    (360, 450, 720, 400, 360),
    (1440, 540, 22, 570, 320),
    (722, 1178, 375, 800, 363),
)
SEED_MAG_ROW_TOTALS = (2290, 2892, 3438)
SEED_MAG_COL_TOTALS = (2522, 2168, 1117, 1770, 1043)

SENSITIVE_CELLS = {("M1", "P1"), ("M2", "P3"), ("M3", "P5")}
ENFIELD_INCOMES = [1000, 2000, 3000, 2000, 1000, 6000, 2000, 10000, 2000, 4000]

Cell = tuple[str, str]


def query(sql: str) -> list[tuple[Any, ...]]:
    """All rows of `sql` on a fresh in-memory duckdb connection."""
    with duckdb.connect() as con:
        return con.execute(sql).fetchall()


def castro_cells() -> dict[Cell, list[int]]:
    """Salaries per (municipality, profession) cell, largest first."""
    rows = query(
        f"""
        SELECT municipality, profession, list(salary ORDER BY salary DESC)
        FROM read_csv('{CASTRO_CSV}')
        GROUP BY ALL
        """
    )
    return {(m, p): list(salaries) for m, p, salaries in rows}


def threshold_sensitive(c: list[int], k: int = 3) -> bool:
    """Too few contributors: fewer than k people in the cell."""
    return len(c) < k


def dominance_sensitive(c: list[int], n: int = 1, k: float = 0.5) -> bool:
    """(n, k)-dominance: the n largest contributions exceed fraction k of the cell total."""
    return sum(c[:n]) > k * sum(c)


def p_percent_sensitive(c: list[int], p: float = 0.10) -> bool:
    """p% rule: the second largest contributor can estimate the largest within p percent."""
    return sum(c) - c[0] - (c[1] if len(c) > 1 else 0) < p * c[0]


def test_castro_frequency_table_matches_seed() -> None:
    cells = castro_cells()
    assert set(cells) == {(m, p) for m in MUNICIPALITIES for p in PROFESSIONS}
    table = tuple(tuple(len(cells[m, p]) for p in PROFESSIONS) for m in MUNICIPALITIES)
    assert table == SEED_FREQUENCIES
    assert tuple(sum(row) for row in table) == SEED_FREQ_ROW_TOTALS
    assert tuple(sum(col) for col in zip(*table, strict=True)) == SEED_FREQ_COL_TOTALS
    assert sum(map(sum, table)) == 346


def test_castro_magnitude_table_matches_seed() -> None:
    cells = castro_cells()
    table = tuple(tuple(sum(cells[m, p]) for p in PROFESSIONS) for m in MUNICIPALITIES)
    assert table == SEED_MAGNITUDES
    assert tuple(sum(row) for row in table) == SEED_MAG_ROW_TOTALS
    assert tuple(sum(col) for col in zip(*table, strict=True)) == SEED_MAG_COL_TOTALS
    assert sum(map(sum, table)) == 8620


def test_castro_microdata_shape() -> None:
    [(ids, positive, total)] = query(
        f"""
        SELECT count(DISTINCT person_id) = count(*), bool_and(salary > 0), count(*)
        FROM read_csv('{CASTRO_CSV}')
        """
    )
    assert ids and positive and total == 346


def test_castro_seed_cells_hold_the_seed_salaries() -> None:
    cells = castro_cells()
    assert cells["M1", "P1"] == [200, 160]
    assert cells["M2", "P3"] == [22]
    assert cells["M3", "P5"] == [350, 4, 3, 3, 3]
    m1p2 = cells["M1", "P2"]
    assert all(s in m1p2 for s in (40, 60, 75))


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        (threshold_sensitive, {("M1", "P1"), ("M2", "P3")}),
        (dominance_sensitive, SENSITIVE_CELLS),
        (p_percent_sensitive, SENSITIVE_CELLS),
    ],
)
def test_castro_sensitive_cells(rule: Callable[[list[int]], bool], expected: set[Cell]) -> None:
    cells = castro_cells()
    assert {cell for cell, c in cells.items() if rule(c)} == expected


def test_castro_other_cells_are_safe_and_varied() -> None:
    for cell, c in castro_cells().items():
        if cell in SENSITIVE_CELLS:
            continue
        assert not threshold_sensitive(c), cell
        assert not dominance_sensitive(c), cell
        assert not p_percent_sensitive(c), cell
        assert len(set(c)) > 1, cell


def enfield_incomes(path: Path) -> list[int]:
    """Incomes of the Enfield patients in `path`, sorted."""
    rows = query(f"SELECT income FROM read_csv('{path}') WHERE town = 'Enfield' ORDER BY income")
    return [income for (income,) in rows]


def test_hospital_enfield_matches_seed() -> None:
    incomes = enfield_incomes(HOSPITAL_CSV)
    assert incomes == sorted(ENFIELD_INCOMES)
    assert sum(incomes) / len(incomes) == 3300


def test_hospital_rich_adds_only_ms_rich() -> None:
    incomes = enfield_incomes(HOSPITAL_RICH_CSV)
    assert incomes == sorted([*ENFIELD_INCOMES, 100_000])
    assert sum(incomes) / len(incomes) == pytest.approx(12090.909090, abs=1e-5)
    plain = HOSPITAL_CSV.read_text(encoding="utf-8").splitlines()
    rich = HOSPITAL_RICH_CSV.read_text(encoding="utf-8").splitlines()
    assert rich[:-1] == plain
    rich_id = rich[-1].split(",")[0]
    assert rich_id not in {line.split(",")[0] for line in plain}


def test_hospital_other_towns() -> None:
    rows = query(
        f"""
        SELECT town, count(*), min(income), max(income), count(DISTINCT patient_id) = count(*)
        FROM read_csv('{HOSPITAL_CSV}')
        WHERE town <> 'Enfield'
        GROUP BY town
        """
    )
    assert len(rows) == 5
    for town, n, lo, hi, unique_ids in rows:
        assert 15 <= n <= 60, town
        assert 800 <= lo <= hi <= 12_000, town
        assert unique_ids, town


@pytest.mark.parametrize(
    ("script", "outputs"),
    [
        ("examples/castro/make_castro.py", [CASTRO_CSV]),
        ("examples/hospital/make_hospital.py", [HOSPITAL_CSV, HOSPITAL_RICH_CSV]),
    ],
)
def test_generators_reproduce_committed_csv(script: str, outputs: list[Path], tmp_path: Path) -> None:
    subprocess.run([sys.executable, str(ROOT / script), str(tmp_path)], check=True)
    for committed in outputs:
        assert (tmp_path / committed.name).read_bytes() == committed.read_bytes(), committed


@pytest.mark.parametrize("policy", ["castro.yaml", "hospital.yaml", "hospital-rich.yaml"])
def test_policy_points_at_existing_csv(policy: str) -> None:
    path = ROOT / "policies" / policy
    doc = yaml.safe_load(path.read_text(encoding="utf-8"))
    assert doc["name"] == path.stem
    assert doc["protection"]["min_query_set_size"] == 3
    assert set(doc["analysts"]) == {"alice", "bob"}
    for table in doc["tables"].values():
        assert (path.parent / table["source"]["csv"]).resolve().is_file()
        columns = table["columns"]
        assert columns[table["privacy_unit"]]["role"] == "identifier"
        for column in columns.values():
            assert column["role"] in {"identifier", "dimension", "measure"}
            if column["role"] == "measure":
                assert len(column["bounds"]) == 2
