"""The group search against an exact rational oracle: any vector of the span touching
fewer than k units, any number of atoms, several rows per unit (panel data)."""

from __future__ import annotations

import numpy as np
import pytest
from pyroaring import BitMap

from guard.history.groups import GroupSearch, GroupVerdict
from guard.history.span import SpanAuditor
from tests.history.oracle import small_group_exposed


class _units_of:
    """Units of row sets, from each row's unit."""

    def __init__(self, unit_of_row: np.ndarray) -> None:
        self.unit_of_row = unit_of_row

    def unit_ids(self, rows: np.ndarray) -> BitMap:
        return BitMap(np.unique(self.unit_of_row[np.asarray(rows, dtype=np.int64)]).tolist())

    def units(self, rows: np.ndarray) -> int:
        return len(self.unit_ids(rows))


def _decide(auditor: SpanAuditor, search: GroupSearch, rows: np.ndarray) -> GroupVerdict:
    exposure = auditor.exposure(rows)
    return GroupVerdict.CLEAR if exposure is None else search.check(exposure).verdict


def test_the_panel_reproduction_is_found() -> None:
    # person P (unit 0) has three rows, one a year; clerks (units 1..8) one row a year
    years = (2020, 2021, 2022)
    unit_of_row, year, pilot = [], [], []
    for y in years:
        unit_of_row.append(0)
        year.append(y)
        pilot.append(True)
        for clerk in range(1, 9):
            unit_of_row.append(clerk)
            year.append(y)
            pilot.append(False)
    units = np.array(unit_of_row)
    year_a, pilot_a = np.array(year), np.array(pilot)
    auditor = SpanAuditor(np.arange(units.size))
    search = GroupSearch(3, _units_of(units))
    everyone = np.arange(units.size)
    queries = [
        everyone[year_a == 2020],
        everyone[year_a == 2021],
        everyone[~pilot_a],
        everyone,
    ]
    verdicts = []
    for q in queries:
        verdict = _decide(auditor, search, q)
        verdicts.append(verdict)
        if verdict is GroupVerdict.CLEAR:
            auditor.release(q)
    assert verdicts[:3] == [GroupVerdict.CLEAR] * 3
    assert verdicts[3] is GroupVerdict.DISCLOSES


def test_a_difference_of_two_people_is_a_disclosure() -> None:
    # x1 - x2 derivable: each of the two learns the other's value
    units = np.arange(10)
    auditor = SpanAuditor(units)
    search = GroupSearch(3, _units_of(units))
    first = np.array([0, 2, 3, 4, 5, 6])
    auditor.release(first)
    assert _decide(auditor, search, np.array([1, 2, 3, 4, 5, 6])) is GroupVerdict.DISCLOSES


def _random_sequence(rng: np.random.Generator, panel: bool) -> tuple[np.ndarray, list[np.ndarray], int]:
    n_units = int(rng.integers(5, 9))
    per_unit = rng.integers(1, 4, size=n_units) if panel else np.ones(n_units, dtype=int)
    unit_of_row = np.repeat(np.arange(n_units), per_unit)
    n_rows = unit_of_row.size
    k = int(rng.integers(2, min(10, n_units) + 1))
    queries = []
    for _ in range(int(rng.integers(4, 12))):
        size = int(rng.integers(max(1, n_rows // 3), n_rows + 1))
        queries.append(np.sort(rng.choice(n_rows, size=size, replace=False)))
    return unit_of_row, queries, k


def _against_oracle(
    rng: np.random.Generator, panel: bool, tidy: bool
) -> tuple[list[GroupVerdict], list[frozenset[int]], np.ndarray, int]:
    """A random sequence decided in order: every verdict but EXHAUSTED equals the
    rational oracle on what was released before plus the query; CLEAR ones are released.
    Returns the verdicts, the released sets, the rows' units and k."""
    unit_of_row, queries, k = _random_sequence(rng, panel)
    auditor = SpanAuditor(np.arange(unit_of_row.size))
    search = GroupSearch(k, _units_of(unit_of_row))
    released: list[frozenset[int]] = []
    verdicts = []
    for q in queries:
        verdict = _decide(auditor, search, q)
        verdicts.append(verdict)
        if verdict is GroupVerdict.EXHAUSTED:
            continue
        unsafe = small_group_exposed([*released, frozenset(q.tolist())], unit_of_row.tolist(), k)
        assert (verdict is GroupVerdict.DISCLOSES) == unsafe, (k, len(released))
        if verdict is GroupVerdict.CLEAR:
            if auditor.release(q) and tidy:
                search.tidy(auditor)
            released.append(frozenset(q.tolist()))
    return verdicts, released, unit_of_row, k


@pytest.mark.parametrize("tidy", [False, True], ids=["as chosen", "small atoms moved out"])
@pytest.mark.parametrize("panel", [False, True], ids=["flat", "panel"])
@pytest.mark.parametrize("seed", range(12))
def test_decisions_equal_the_rational_oracle(seed: int, panel: bool, tidy: bool) -> None:
    verdicts, released, unit_of_row, k = _against_oracle(
        np.random.default_rng(1000 * seed + panel), panel, tidy
    )
    assert GroupVerdict.EXHAUSTED not in verdicts
    # what was released is safe, and the attack is real without the audit
    assert not small_group_exposed(released, unit_of_row.tolist(), k)


@pytest.mark.parametrize("seed", range(8))
def test_large_k_on_panel_tables_equals_the_oracle(seed: int) -> None:
    rng = np.random.default_rng(77 + seed)
    n_units = int(rng.integers(9, 12))
    unit_of_row = np.repeat(np.arange(n_units), rng.integers(1, 4, size=n_units))
    k = int(rng.integers(5, 11))
    auditor = SpanAuditor(np.arange(unit_of_row.size))
    search = GroupSearch(k, _units_of(unit_of_row))
    released: list[frozenset[int]] = []
    disclosed = 0
    for _ in range(10):
        q = np.sort(
            rng.choice(
                unit_of_row.size,
                size=int(rng.integers(unit_of_row.size // 2, unit_of_row.size)),
                replace=False,
            )
        )
        verdict = _decide(auditor, search, q)
        assert verdict is not GroupVerdict.EXHAUSTED
        unsafe = small_group_exposed([*released, frozenset(q.tolist())], unit_of_row.tolist(), k)
        assert (verdict is GroupVerdict.DISCLOSES) == unsafe
        disclosed += unsafe
        if not unsafe:
            if auditor.release(q):
                search.tidy(auditor)
            released.append(frozenset(q.tolist()))


@pytest.mark.parametrize("seed", range(6))
def test_exchanging_basis_atoms_keeps_the_span(seed: int) -> None:
    """After basis exchanges the auditor decides implied / derivable as a fresh one does,
    and each basis row is 1 on its own atom and 0 on the other basis atoms."""
    rng = np.random.default_rng(500 + seed)
    n = 30
    queries = [np.sort(rng.choice(n, size=int(rng.integers(5, 25)), replace=False)) for _ in range(14)]
    swapped, plain = SpanAuditor(np.arange(n)), SpanAuditor(np.arange(n))
    exchanges = 0
    for q in queries:
        swapped.release(q)
        plain.release(q)
        for position in range(swapped.rank):
            row = swapped.basis_row(position)
            basis = {int(a) for a in swapped._basis.atoms}
            candidates = [a for a in np.flatnonzero(row).tolist() if a not in basis]
            assert row[int(swapped._basis.atoms[position])] == 1
            assert all(row[b] == 0 for b in basis if b != int(swapped._basis.atoms[position]))
            if candidates and rng.random() < 0.5:
                swapped.exchange(position, int(rng.choice(candidates)))
                exchanges += 1
        probes = [np.sort(rng.choice(n, size=int(rng.integers(1, n)), replace=False)) for _ in range(10)]
        probes += queries[:3]
        for probe in probes:
            assert swapped.implied(probe) == plain.implied(probe)
        assert {d.atom for d in swapped.determined()} == {d.atom for d in plain.determined()}
    assert exchanges > 5


def test_exact_rows_over_their_budget_withhold(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail closed: when the exact rows would be too large, the verdict is EXHAUSTED
    (the caller withholds), never CLEAR."""
    import guard.history.groups as groups

    units = np.arange(9)
    auditor = SpanAuditor(np.arange(units.size))
    search = GroupSearch(4, _units_of(units))
    auditor.release(np.arange(0, 6))
    # atoms {0,1,2}, {3,4,5}, {6,7,8} are all small (3 < 4 units), and no combination
    # of the two sums is: the search must read the exact rows to say so
    second = np.arange(3, 9)
    monkeypatch.setattr(groups, "MAX_ROW_ENTRIES", 0)
    assert _decide(auditor, search, second) is GroupVerdict.EXHAUSTED
    monkeypatch.setattr(groups, "MAX_ROW_ENTRIES", 10**9)
    assert _decide(auditor, search, second) is GroupVerdict.CLEAR


def _blocks(count: int) -> tuple[SpanAuditor, GroupSearch]:
    """``count`` blocks of 12 one-row units, k = 4: in block i, S_i = a_i + b_i and
    V_i = a_i + c_i released (a, b, c its first three triples; the fourth, d, never
    asked). Every atom is small (3 rows) and every block's two rows stay small basis
    positions; no block shares an atom with another."""
    units = np.arange(12 * count)
    auditor = SpanAuditor(np.arange(units.size))
    search = GroupSearch(4, _units_of(units))
    for block in range(count):
        base = 12 * block
        for released in (np.arange(base, base + 6), np.r_[base : base + 3, base + 6 : base + 9]):
            assert search.check(auditor.exposure(released)).verdict is GroupVerdict.CLEAR
            auditor.release(released)
            search.tidy(auditor)
    return auditor, search


def test_small_positions_past_the_budget_are_searched_when_few_are_linked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A check whose small positions outnumber ``MAX_SMALL_POSITIONS`` is still searched
    when the rows linked to the query are fewer (before, it was withheld unsearched);
    when the linked rows are too many, it fails closed (EXHAUSTED)."""
    import guard.history.groups as groups

    auditor, search = _blocks(10)
    monkeypatch.setattr(groups, "MAX_SMALL_POSITIONS", 5)  # 20 small positions, 3 linked
    # b_0 + c_0 + d_0: no combination with S_0, V_0 is one triple
    safe = np.r_[3:12]
    # a_0 + b_0 + c_0: minus S_0 it is c_0, three people
    disclosing = np.r_[0:9]
    assert _decide(auditor, search, safe) is GroupVerdict.CLEAR
    assert _decide(auditor, search, disclosing) is GroupVerdict.DISCLOSES
    monkeypatch.setattr(groups, "MAX_SMALL_POSITIONS", 2)
    assert _decide(auditor, search, safe) is GroupVerdict.EXHAUSTED
    assert _decide(auditor, search, disclosing) is GroupVerdict.EXHAUSTED
    monkeypatch.setattr(groups, "MAX_SMALL_POSITIONS", 10**6)
    monkeypatch.setattr(groups, "MAX_READ_POSITIONS", 5)  # too many rows to read at all
    assert _decide(auditor, search, safe) is GroupVerdict.EXHAUSTED


def _tidy_one_row_at_a_time(search: GroupSearch, auditor: SpanAuditor) -> int:
    """The reference tidy: each basis row read afresh (``basis_row``) before its turn."""
    partition = auditor.partition
    small_of = search._small.classifier(partition, set(), partition.rows)
    atoms = auditor.basis_atoms()
    moved = tried = 0
    stuck: dict[int, tuple[int, int]] = search.__dict__.setdefault("_reference_stuck", {})
    for position in np.flatnonzero(small_of(atoms)).tolist():
        last = stuck.get(position)
        if last is not None and last[0] == int(atoms[position]) and auditor.rank < last[1] + 16:
            continue
        if tried == 32:
            break
        tried += 1
        row = auditor.basis_row(position)
        candidates = np.flatnonzero(row)
        candidates = candidates[~auditor.in_basis(candidates)]
        large = candidates[~small_of(candidates)] if candidates.size else candidates
        if large.size:
            auditor.exchange(position, int(large[int(np.argmax(partition.sizes()[large]))]))
            stuck.pop(position, None)
            moved += 1
        else:
            stuck[position] = (int(atoms[position]), auditor.rank)
    return moved


@pytest.mark.parametrize("seed", range(6))
def test_tidy_reading_its_rows_once_exchanges_as_fresh_reads_do(seed: int) -> None:
    """tidy reads the rows it tries in one pass and applies each exchange to the rest;
    the exchanges, and so the basis and every later decision, are those of reading each
    row afresh. Seeded alike, both auditors draw the same prime and weights."""
    rng = np.random.default_rng(900 + seed)
    n = 80
    unit_of_row = np.arange(n)
    entropy = np.random.default_rng(seed).bytes(1 << 16)

    def source() -> SpanAuditor:
        cursor = [0]

        def random_bytes(count: int) -> bytes:
            cursor[0] += count
            return entropy[cursor[0] - count : cursor[0]]

        return SpanAuditor(unit_of_row, random_bytes=random_bytes)

    batched, fresh = source(), source()
    assert batched.prime == fresh.prime
    k = 5
    batched_search, fresh_search = (
        GroupSearch(k, _units_of(unit_of_row)),
        GroupSearch(k, _units_of(unit_of_row)),
    )
    moves = several = 0
    for _ in range(40):
        start = int(rng.integers(0, n - 2))
        q = np.arange(start, int(rng.integers(start + 1, n)) + 1)
        if rng.random() < 0.5:
            q = np.sort(rng.choice(n, size=int(rng.integers(2, n)), replace=False))
        batched.release(q)  # tidy's exchanges, not the checks, are compared here
        fresh.release(q)
        positions = np.arange(batched.rank)
        expected = np.array([batched.basis_row(int(j)) for j in positions])
        assert (batched.basis_rows(positions) == expected).all()
        moved = batched_search.tidy(batched)
        assert moved == _tidy_one_row_at_a_time(fresh_search, fresh)
        assert (batched.basis_atoms() == fresh.basis_atoms()).all()
        moves += moved
        several += moved > 1  # a later row read after an earlier exchange: the update path
    assert moves > 2
    assert several > 0


def _tidy_after_checks(seed: int) -> tuple[int, int]:
    """One random history released after its checks on two auditors seeded alike (the
    same prime and weights): tidy on the first may take the check's rows, on the second
    it reads them. Asserts the same exchanges and bases after every release; returns
    (exchanges, tidies that exchanged on the check's rows)."""
    rng = np.random.default_rng(700 + seed)
    n = 40
    unit_of_row = np.arange(n)
    entropy = np.random.default_rng(seed).bytes(1 << 16)

    def source() -> SpanAuditor:
        cursor = [0]

        def random_bytes(count: int) -> bytes:
            cursor[0] += count
            return entropy[cursor[0] - count : cursor[0]]

        return SpanAuditor(unit_of_row, random_bytes=random_bytes)

    checked, read = source(), source()
    checked_search = GroupSearch(4, _units_of(unit_of_row))
    read_search = GroupSearch(4, _units_of(unit_of_row))
    reads = [0]
    inner = checked.basis_rows

    def counted(positions: np.ndarray) -> np.ndarray:
        reads[0] += 1
        return inner(positions)

    checked.basis_rows = counted  # type: ignore[method-assign]
    moves = taken = 0
    for _ in range(30):
        q = np.sort(rng.choice(n, size=int(rng.integers(2, n)), replace=False))
        exposure = checked.exposure(q)
        if exposure is None or checked_search.check(exposure).verdict is not GroupVerdict.CLEAR:
            continue
        if rng.random() < 0.25:  # checked but withheld by a later control: another release
            q = np.sort(rng.choice(n, size=int(rng.integers(2, n)), replace=False))
        if not checked.release(q):
            continue
        assert read.release(q)
        before = reads[0]
        moved = checked_search.tidy(checked)
        assert moved == read_search.tidy(read)
        assert (checked.basis_atoms() == read.basis_atoms()).all()
        moves += moved
        taken += moved > 0 and reads[0] == before
    return moves, taken


def test_tidy_after_a_check_takes_its_rows_and_exchanges_as_reading_them() -> None:
    """A release checked first: tidy takes the check's exact rows instead of reading the
    stored sets, and makes the same exchanges (so the same bases and later decisions) as
    a tidy that reads them."""
    results = [_tidy_after_checks(seed) for seed in range(4)]
    assert sum(moves for moves, _ in results) > 2
    assert sum(taken for _, taken in results) > 0  # the check's rows were used


@pytest.mark.parametrize("seed", range(6))
def test_an_answer_past_its_node_budget_is_withheld_never_cleared(
    seed: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The cells of one answer share ``MAX_ANSWER_NODES``: once spent, every search is
    over its budget (EXHAUSTED, so withheld), and nothing unsafe is cleared."""
    from guard.history import groups

    rng = np.random.default_rng(1000 * seed)
    unit_of_row, queries, k = _random_sequence(rng, False)
    monkeypatch.setattr(groups, "MAX_ANSWER_NODES", 0)
    auditor = SpanAuditor(np.arange(unit_of_row.size))
    search = GroupSearch(k, _units_of(unit_of_row))
    search.begin_answer()
    released: list[frozenset[int]] = []
    exhausted = 0
    for q in queries:
        verdict = _decide(auditor, search, q)
        exhausted += verdict is GroupVerdict.EXHAUSTED
        if verdict is GroupVerdict.CLEAR:
            assert not small_group_exposed([*released, frozenset(q.tolist())], unit_of_row.tolist(), k)
            auditor.release(q)
            released.append(frozenset(q.tolist()))
    assert exhausted > 0


@pytest.mark.parametrize("panel", [False, True], ids=["flat", "panel"])
def test_a_tight_budget_on_linked_rows_withholds_and_never_misjudges(
    panel: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With ``MAX_SMALL_POSITIONS`` at 2 (the rows linked to the query among those the
    peeling leaves), every decided check equals the rational oracle and the rest are
    EXHAUSTED: the part searched is never too small to find a disclosure."""
    from guard.history import groups

    monkeypatch.setattr(groups, "MAX_SMALL_POSITIONS", 2)
    verdicts: list[GroupVerdict] = []
    for seed in range(24):
        verdicts += _against_oracle(np.random.default_rng(5000 * seed + panel), panel, tidy=True)[0]
    exhausted = verdicts.count(GroupVerdict.EXHAUSTED)
    assert len(verdicts) - exhausted > 50 and exhausted > 0
