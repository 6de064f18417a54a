"""The group check's CLEAR by witness columns and tidy's reads at the largest atoms
(``witness.py``) decide exactly what reading every atom decides: the same verdicts, the
same exchanges and bases, on random histories run twice on auditors seeded alike."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from guard.history import groups, witness
from guard.history.elimination import compacted, linked_to, peeled
from guard.history.exposure import Exposure
from guard.history.groups import GroupSearch, GroupVerdict
from guard.history.span import SpanAuditor
from tests.history.test_groups import _units_of
from tests.history.test_tidy_stuck import _seeded


class _ReadingEverything(GroupSearch):
    """The reference: no witness, and tidy reads the rows it tries on every atom."""

    def check(self, exposure: Exposure) -> groups.GroupFinding:
        finding = super().check(exposure)
        self._sets = None
        return finding


def _query(rng: np.random.Generator, n: int, small: float) -> np.ndarray:
    """A random query set over ``n`` rows: with probability ``small`` 2-15 scattered rows
    (small atoms, checks that read rows), else an interval."""
    if rng.random() < small:
        return np.sort(rng.choice(n, size=int(rng.integers(2, 16)), replace=False))
    start = int(rng.integers(0, n - 2))
    return np.arange(start, int(rng.integers(start + 1, n)) + 1)


def _history(seed: int, search_type: type[GroupSearch], counts: dict[str, int]) -> list[object]:
    """Per query: its verdict (or None: implied), then tidy's exchanges and the basis."""
    rng = np.random.default_rng(7300 + seed)
    n, k = 480, 3
    unit_of_row = np.arange(n) // 2 if seed % 2 else np.arange(n)  # two rows a unit, or one
    auditor = _seeded(np.random.default_rng(seed).bytes(1 << 17), unit_of_row)
    search = search_type(k, _units_of(unit_of_row))
    trace: list[object] = []
    for _ in range(60):
        q = _query(rng, n, small=0.4)
        exposure = auditor.exposure(q)
        if exposure is None:
            trace.append(None)
            continue
        search.begin_answer()
        finding = search.check(exposure)
        trace.append(finding.verdict)
        counts[finding.verdict.value] = counts.get(finding.verdict.value, 0) + 1
        if finding.verdict is GroupVerdict.CLEAR:
            assert auditor.release(q)
            trace.append(search.tidy(auditor))
            trace.append(auditor.basis_atoms().tolist())
    return trace


@pytest.mark.parametrize("seed", range(10))
def test_witnesses_and_reads_at_the_largest_atoms_decide_as_reading_every_atom(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    used = {"witnessed": 0, "cleared": 0, "exchanges": 0}
    inner_witnessed, inner_first = groups.witnessed, groups.first_exchange

    def counted_witnessed(*args: object) -> bool:
        found = inner_witnessed(*args)  # type: ignore[arg-type]
        used["witnessed"] += 1
        used["cleared"] += found
        return found

    def counted_first(*args: object) -> int | None:
        found = inner_first(*args)  # type: ignore[arg-type]
        used["exchanges"] += found is not None and found >= 0
        return found

    monkeypatch.setattr(groups, "witnessed", counted_witnessed)
    monkeypatch.setattr(groups, "first_exchange", counted_first)
    # tidy reads at the largest atoms first on every partition, not only past its
    # threshold of atoms (these histories have a few hundred)
    monkeypatch.setattr(groups, "RANKED_ABOVE", 0)
    verdicts: dict[str, int] = {}
    fast = _history(seed, GroupSearch, verdicts)
    monkeypatch.setattr(groups, "witnessed", lambda *args: False)
    reference = _history(seed, _ReadingEverything, {})
    assert fast == reference
    # the shortcuts were taken (the sizes above were chosen so that every seed takes both)
    assert used["cleared"] > 0 and used["exchanges"] > 0
    assert sum(verdicts.values()) > 40


@pytest.mark.parametrize(
    ("n", "releases", "read"),
    [
        (200, 40, 50),  # positions x sets x rows well under 2**20: one dense int64 product
        (3000, 300, 2000),  # far over it: the sparse exact product (released.product_mod)
    ],
)
def test_values_at_gives_the_rows_of_every_atom_read_at_those_atoms(n: int, releases: int, read: int) -> None:
    rng = np.random.default_rng(11)
    auditor = SpanAuditor(np.arange(n))
    for _ in range(releases):
        start = int(rng.integers(0, n - 2))
        auditor.release(np.arange(start, int(rng.integers(start + 1, n)) + 1))
        auditor.release(np.sort(rng.choice(n, size=int(rng.integers(2, 30)), replace=False)))
    positions = np.arange(auditor.rank, dtype=np.int64)
    every = auditor.basis_rows(positions)  # ranks x atoms
    atoms = rng.permutation(auditor.partition.atom_count)[:read].astype(np.int64)
    lines = [auditor.inverse_row(int(j)) for j in positions]
    coefficients = csr_matrix(np.array(lines, dtype=np.int64))
    values = witness.values_at(
        auditor._released, coefficients, auditor.partition.representatives(atoms), auditor.prime
    )
    assert (values == every[:, atoms]).all()


@pytest.mark.parametrize("seed", range(6))
def test_a_witnessed_check_is_one_its_peeling_clears(seed: int) -> None:
    """Wherever ``witnessed`` says CLEAR, the rows read on every atom leave no row with a
    nonzero coefficient on the new query after the peeling (so the check ends CLEAR)."""
    rng = np.random.default_rng(8100 + seed)
    n, k = 240, 3
    unit_of_row = np.arange(n)
    auditor = SpanAuditor(unit_of_row)
    search = GroupSearch(k, _units_of(unit_of_row))
    shown = not_shown = 0
    for _ in range(60):
        q = _query(rng, n, small=0.5)
        exposure = auditor.exposure(q)
        if exposure is None:
            continue
        cut = exposure.step.cut
        parents = dict(zip(cut.children.tolist(), cut.split.tolist(), strict=True))
        small_of = search._small.classifier(
            exposure.partition, exposure.changed_atoms(), exposure.rows_of, parents
        )
        positions = np.flatnonzero(small_of(exposure.basis_atoms())).astype(np.int64)
        novelty = exposure.novelty()[positions]
        if novelty.any():
            rows, _ = exposure.rows_exactly(positions)
            touched, rows = compacted(rows)
            large = np.flatnonzero(~small_of(touched))
            keep = peeled(rows[:, large]) & linked_to(rows, novelty != 0)
            if witness.witnessed(exposure, positions, novelty, small_of, 1 << 30, 1 << 40):
                shown += 1
                assert not novelty[keep].any()
            else:
                not_shown += 1
        if search.check(exposure).verdict is GroupVerdict.CLEAR:
            auditor.release(q)
            search.tidy(auditor)
    assert shown > 0 and not_shown > 0


def test_a_check_whose_sets_are_all_small_reads_them_whole_without_witnesses(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where every stored set a check would read is small (its rows kept, read in one
    pass), the witness is not tried: its set-by-set intersections cost more there (q12's
    first answer at 1M rows: 4,286 checks at 1.9 ms each, then 18,678 rows read one by one
    by tidy). The verdicts are those of reading every atom (the test above)."""
    tried = {"cleared": 0, "witnessed": 0}
    inner_cleared, inner_witnessed = witness.cleared, groups.witnessed

    def counted_cleared(*args: object) -> bool:
        tried["cleared"] += 1
        return inner_cleared(*args)  # type: ignore[arg-type]

    def counted_witnessed(*args: object) -> bool:
        tried["witnessed"] += 1
        return inner_witnessed(*args)  # type: ignore[arg-type]

    monkeypatch.setattr(witness, "cleared", counted_cleared)
    monkeypatch.setattr(groups, "witnessed", counted_witnessed)
    rng = np.random.default_rng(9100)
    n, k = 6400, 3  # small sets: at most n / 64 = 100 rows
    auditor = SpanAuditor(np.arange(n))
    search = GroupSearch(k, _units_of(np.arange(n)))
    checked = 0
    for _ in range(80):
        # overlapping intervals of 20-94 rows: checks that read rows, every set small
        start = int(rng.integers(0, 300))
        q = np.arange(start, start + int(rng.integers(20, 95)))
        exposure = auditor.exposure(q)
        if exposure is None:
            continue
        search.begin_answer()
        if search.check(exposure).verdict is GroupVerdict.CLEAR:
            auditor.release(q)
            search.tidy(auditor)
        checked += 1
    assert checked > 40 and tried["witnessed"] > 0
    assert tried["cleared"] == 0
