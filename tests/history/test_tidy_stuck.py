"""tidy does not re-read a stuck position whose row of M^-1 no update changed, and
still makes exactly the exchanges of reading every row afresh."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history.groups import GroupSearch
from guard.history.span import SpanAuditor
from tests.history.test_groups import _tidy_one_row_at_a_time, _units_of


def _seeded(entropy: bytes, unit_of_row: np.ndarray) -> SpanAuditor:
    cursor = [0]

    def random_bytes(count: int) -> bytes:
        cursor[0] += count
        return entropy[cursor[0] - count : cursor[0]]

    return SpanAuditor(unit_of_row, random_bytes=random_bytes)


def _history(seed: int) -> tuple[int, int, int]:
    """A long random history on two auditors seeded alike: tidy on one, the reference
    (every tried row read afresh) on the other; the same exchanges and bases after every
    release. Returns (exchanges, rows tidy read, rows the reference read)."""
    rng = np.random.default_rng(4100 + seed)
    n, k = 90, 6
    unit_of_row = np.arange(n)
    entropy = np.random.default_rng(seed).bytes(1 << 17)
    skipping, fresh = _seeded(entropy, unit_of_row), _seeded(entropy, unit_of_row)
    search, reference = GroupSearch(k, _units_of(unit_of_row)), GroupSearch(k, _units_of(unit_of_row))
    read = [0, 0]
    for auditor, slot, name in ((skipping, 0, "basis_rows"), (fresh, 1, "basis_row")):
        inner = getattr(auditor, name)

        def counted(positions: object, inner: object = inner, slot: int = slot) -> object:
            read[slot] += int(np.asarray(positions).size)
            return inner(positions)  # type: ignore[operator]

        setattr(auditor, name, counted)
    moves = 0
    for _ in range(70):
        if rng.random() < 0.6:  # small sets: many small atoms, many stuck positions
            q = np.sort(rng.choice(n, size=int(rng.integers(2, 8)), replace=False))
        else:
            start = int(rng.integers(0, n - 2))
            q = np.arange(start, int(rng.integers(start + 1, n)) + 1)
        if not skipping.release(q):
            continue
        assert fresh.release(q)
        moved = search.tidy(skipping)
        assert moved == _tidy_one_row_at_a_time(reference, fresh)
        assert (skipping.basis_atoms() == fresh.basis_atoms()).all()
        moves += moved
    return moves, read[0], read[1]


@pytest.mark.parametrize("seed", range(8))
def test_a_stuck_row_no_update_changed_is_not_read_again(seed: int) -> None:
    moves, read, reference = _history(seed)
    assert moves > 0
    assert read < reference  # stuck positions retried without a read


@pytest.mark.parametrize("seed", range(6))
def test_a_row_unchanged_since_a_mark_is_the_same_combination_on_every_row(seed: int) -> None:
    """``row_unchanged_since(j, mark)`` (which tidy trusts to skip a read) holds only
    when row j of M^-1 A, as a function of the table's rows, is what it was at ``mark``,
    through releases that cut atoms and tidy's exchanges."""
    rng = np.random.default_rng(5200 + seed)
    n = 60
    unit_of_row = np.arange(n)
    auditor = SpanAuditor(unit_of_row)
    search = GroupSearch(5, _units_of(unit_of_row))
    seen: list[tuple[int, list[np.ndarray]]] = []  # (mark, each position's row on the table's rows)
    kept = changed = 0
    for _ in range(45):
        if rng.random() < 0.5:
            q = np.sort(rng.choice(n, size=int(rng.integers(2, 7)), replace=False))
        else:
            start = int(rng.integers(0, n - 2))
            q = np.arange(start, int(rng.integers(start + 1, n)) + 1)
        if not auditor.release(q):
            continue
        search.tidy(auditor)
        atom_of = auditor.partition.atom_of(np.arange(n))
        now = [auditor.basis_row(j)[atom_of] for j in range(auditor.rank)]
        for mark, rows in seen:
            for j, before in enumerate(rows):
                if auditor.row_unchanged_since(j, mark):
                    assert (now[j] == before).all()
                    kept += 1
                else:
                    changed += 1
        seen.append((auditor.basis_changes, now))
    assert kept > 0
    assert changed > 0
