"""Noise-mode guards over the hospital example, each on a fresh state folder."""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from guard import Guard
from guard.noise.sampling import InsecureSeededSource

ROOT = Path(__file__).resolve().parents[2]
POLICIES = ROOT / "policies"
HOSPITAL = ROOT / "examples" / "hospital"


def write_policy(
    folder: Path,
    *,
    csv: Path = HOSPITAL / "hospital.csv",
    noise: str = "",
    tables_extra: str = "",
    analysts: str = "  alice: {}\n  bob: {}\n",
    columns: str = "",
) -> Path:
    """hospital-dp.yaml with its data file, noise section and analysts replaced."""
    text = (POLICIES / "hospital-dp.yaml").read_text()
    text = text.replace("csv: ../examples/hospital/hospital.csv", f"csv: {csv}")
    if noise:
        text = re.sub(r"\nnoise:\n(?:  .*\n)+", "\nnoise:\n" + noise, text)
    if tables_extra:
        text = text.replace("    privacy_unit: patient_id\n", f"    privacy_unit: patient_id\n{tables_extra}")
    if columns:
        text = re.sub(r"    columns:\n(?:      .*\n)+", "    columns:\n" + columns, text)
    text = re.sub(r"\nanalysts:\n(?:  .*\n)+", "\nanalysts:\n" + analysts, text)
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "policy.yaml"
    path.write_text(text)
    return path


@pytest.fixture
def dp(tmp_path: Path) -> Iterator[Guard]:
    """policies/hospital-dp.yaml as shipped (secure noise source)."""
    with Guard.open(POLICIES / "hospital-dp.yaml", state=tmp_path / "state") as guard:
        yield guard


@pytest.fixture
def open_guard(tmp_path: Path) -> Iterator[Callable[..., Guard]]:
    """Open a guard on a policy file with a seeded (test-only) noise source."""
    opened: list[Guard] = []

    def open_(policy: Path, state: str = "state", seed: int | None = 7) -> Guard:
        rng = None if seed is None else InsecureSeededSource(seed)
        guard = Guard.open(policy, state=tmp_path / state, rng=rng)
        opened.append(guard)
        return guard

    yield open_
    for guard in opened:
        guard.close()
