"""A small people table with derived dimensions, for the derived-dimension tests.

41 people, one row each: region (North, South, East and Wales map to UK; Bavaria and
Saxony to DE), age (three under 18, exactly one aged 64, two aged 65 or more, one
unknown), health codes 1-4 with value labels, income 100-999 (exactly one person at
500). Wales has one person; so do age 64 and income 500: each is a target for a
differencing attack. The derived columns are also computed here in pandas, by hand,
as the reference the guard's answers must equal.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import yaml

__all__ = ["BANDS", "COUNTRY", "LABELS", "people_frame", "with_reference", "write_people"]

BANDS: list[dict[str, Any]] = [
    {"upto": 17, "label": "0-17"},
    {"upto": 64, "label": "18-64"},
    {"label": "65+"},
]
COUNTRY = {"North": "UK", "South": "UK", "East": "UK", "Wales": "UK", "Bavaria": "DE", "Saxony": "DE"}
LABELS = {1: "very poor", 2: "poor", 3: "fair", 4: "good"}
_REGIONS = ("North", "South", "East", "Bavaria", "Saxony")


def people_frame() -> pd.DataFrame:
    rows = []
    for i in range(40):
        age: float | None = 18 + (i * 7) % 46  # 18 .. 63
        income = 100 + (i * 37) % 900
        rows.append([f"P{i:02d}", _REGIONS[i % 5], age, 1 + i % 4, 501 if income == 500 else income])
    overrides: dict[int, float | None] = {0: 64, 1: 70, 2: 81, 3: 10, 4: 12, 5: 15, 6: None}
    for i, age in overrides.items():
        rows[i][2] = age
    rows[7][4] = 500
    rows.append(["P40", "Wales", 40, 2, 640])
    frame = pd.DataFrame(rows, columns=["pid", "region", "age", "health", "income"])
    frame["age"] = frame["age"].astype("Int64")
    return frame


def write_people(
    folder: Path,
    frame: pd.DataFrame | None = None,
    change: Callable[[dict[str, Any]], None] | None = None,
    backend: dict[str, Any] | None = None,
) -> Path:
    """people.csv and people.yaml (k = 3, derived age_band, country, health_label) in
    ``folder``; ``change`` edits the policy document first. Returns the policy's path."""
    folder.mkdir(parents=True, exist_ok=True)
    (people_frame() if frame is None else frame).to_csv(folder / "people.csv", index=False)
    document: dict[str, Any] = {
        "name": "people",
        "backend": backend or {"engine": "duckdb"},
        "protection": {"min_query_set_size": 3},
        "tables": {
            "people": {
                "source": {"csv": "people.csv"},
                "privacy_unit": "pid",
                "columns": {
                    "pid": {"role": "identifier"},
                    "region": {"role": "dimension"},
                    "age": {"role": "dimension"},
                    "health": {"role": "dimension"},
                    "income": {"role": "measure", "bounds": [0, 1000]},
                },
                # copies: a change must never edit the module's constants
                "derived": {
                    "age_band": {"from": "age", "bands": copy.deepcopy(BANDS)},
                    "country": {"from": "region", "map": dict(COUNTRY)},
                    "health_label": {"from": "health", "labels": dict(LABELS)},
                },
            }
        },
        "analysts": {"alice": {}, "bob": {}},
    }
    if change is not None:
        change(document)
    path = folder / "people.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def with_reference(frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with the derived columns computed in pandas, independently of the guard."""
    out = frame.copy()

    def band(age: Any) -> str | None:
        if pd.isna(age):
            return None
        return "0-17" if age <= 17 else "18-64" if age <= 64 else "65+"

    out["age_band"] = out["age"].map(band)
    out["country"] = out["region"].map(COUNTRY)
    out["health_label"] = out["health"].map(LABELS)
    return out
