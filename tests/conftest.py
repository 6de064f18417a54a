"""Shared fixtures: guards over the example policies, each on a fresh state folder."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from guard import Guard

ROOT = Path(__file__).resolve().parent.parent
POLICIES = ROOT / "policies"


@pytest.fixture
def students(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(POLICIES / "students.yaml", state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def castro(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(POLICIES / "castro.yaml", state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def hospital(tmp_path: Path) -> Iterator[Guard]:
    with Guard.open(POLICIES / "hospital.yaml", state=tmp_path / "state") as guard:
        yield guard
