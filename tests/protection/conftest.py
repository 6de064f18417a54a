"""Helpers: policy variants written next to a test's state, and the true Castro cells."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
import yaml

from guard import Guard
from guard.rules import CellContributions, Dominance, MinimumFrequency, RuleVerdict, evaluate
from guard.suppression import TOTAL, Table

ROOT = Path(__file__).resolve().parents[2]
CASTRO_CSV = ROOT / "examples" / "castro" / "castro.csv"
RULES = (MinimumFrequency(3), Dominance(1, 0.5))


def policy_variant(source: str, tmp_path: Path, change: Callable[[dict[str, Any]], None]) -> Path:
    """A copy of policies/SOURCE.yaml with absolute paths and ``change`` applied."""
    document = yaml.safe_load((ROOT / "policies" / f"{source}.yaml").read_text())
    for table in document["tables"].values():
        kind, path = next(iter(table["source"].items()))
        table["source"][kind] = str((ROOT / "policies" / path).resolve())
    change(document)
    target = tmp_path / f"{source}-variant.yaml"
    target.write_text(yaml.safe_dump(document))
    return target


@pytest.fixture
def open_variant(tmp_path: Path) -> Callable[..., Guard]:
    opened: list[Guard] = []

    def _open(source: str, change: Callable[[dict[str, Any]], None], state: str = "state") -> Guard:
        guard = Guard.open(policy_variant(source, tmp_path, change), state=tmp_path / state)
        opened.append(guard)
        return guard

    yield _open  # type: ignore[misc]
    for guard in opened:
        guard.close()


def castro_truth() -> tuple[Table, dict[tuple[Any, ...], RuleVerdict]]:
    """Every cell of the municipality x profession table with both margins, computed
    from the microdata with pandas, and the verdict of the seed's rules on each."""
    data = pd.read_csv(CASTRO_CSV)
    values: dict[tuple[Any, ...], float] = {}
    verdicts: dict[tuple[Any, ...], RuleVerdict] = {}
    for by_m, by_p in itertools.product((True, False), repeat=2):
        keys = [c for c, used in (("municipality", by_m), ("profession", by_p)) if used]
        groups = data.groupby(keys) if keys else [((), data)]
        for name, rows in groups:
            name = name if isinstance(name, tuple) else (name,)
            it = iter(name)
            key = (next(it) if by_m else TOTAL, next(it) if by_p else TOTAL)
            per_person = rows.groupby("person_id")["salary"].sum()
            values[key] = float(per_person.sum())
            verdicts[key] = evaluate(RULES, CellContributions.from_values(per_person.tolist()))
    return Table.from_cells(values), verdicts
