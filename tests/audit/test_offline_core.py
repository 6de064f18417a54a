"""The replay engine on hand-made query sets (no backend): what it reports and when."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import numpy as np
import numpy.typing as npt
import pytest

from guard.audit.cellsets import CellSet, EntryCells
from guard.audit.logsource import LogEntry
from guard.audit.offline import Determined, OfflineAudit, Status, audit_log
from guard.errors import QueryRejected
from guard.history.rowsets import RowIds
from guard.history.span import SpanAuditor
from tests.history.oracle import RationalSpan


class Cells:
    """A CellSource whose SQL texts name row sets: "a" -> CELLS["a"]; "bad" is rejected."""

    def __init__(self, cells: Mapping[str, Sequence[int]], units: Sequence[int]) -> None:
        self.sets = cells
        self.units = np.asarray(units, dtype=np.int64)
        self.described: list[list[int]] = []

    def cells(self, entry: LogEntry) -> EntryCells:
        if entry.sql == "bad":
            raise QueryRejected("SELECT * is not allowed")
        found = tuple(
            CellSet("sum(x)", name, np.asarray(self.sets[name], dtype=np.int64))
            for name in entry.sql.split("+")
        )
        return EntryCells("t", "v1", found)

    def unit_of_row(self, table: str) -> npt.NDArray[np.int64]:
        return self.units

    def describe(self, table: str, rows: RowIds) -> Mapping[str, str | None] | None:
        self.described.append(rows.tolist())
        return {"rows": ",".join(map(str, rows.tolist()))}


def entries(*queries: tuple[str, str]) -> list[LogEntry]:
    return [LogEntry(i, f"t:{i}", who, None, sql) for i, (who, sql) in enumerate(queries, start=1)]


def test_a_group_cut_after_its_disclosure_is_still_reported() -> None:
    # {0, 1} = a - b is disclosed at entry 2; entry 3 cuts it into two atoms, neither
    # derivable: asking determined() only at the end would miss it
    source = Cells({"a": [0, 1, 2, 3, 4, 5], "b": [2, 3, 4, 5], "c": [0, 6]}, units=range(8))
    result = audit_log(entries(("u1", "a"), ("u2", "b"), ("u3", "c")), source, k=3)
    pair, direct = result.disclosures
    assert (pair.rows, pair.units, pair.seq, pair.entries) == (2, 2, 2, (1, 2))
    assert pair.analysts == ("u1", "u2") and pair.description == {"rows": "0,1"}
    # c is a released cell of 2 < k respondents: a disclosure on its own
    assert (direct.seq, direct.entries, direct.description) == (3, (3,), {"rows": "0,6"})
    assert [p.disclosures for p in result.timeline] == [0, 1, 2]
    final = SpanAuditor(source.units)
    for name in "abc":
        final.release(np.asarray(source.sets[name]))
    assert [sorted(final.partition.rows(d.atom).tolist()) for d in final.determined()] == [[2, 3, 4, 5]]


def test_sizes_count_privacy_units_not_rows() -> None:
    # rows 0 and 1 belong to one respondent: a 2-row group of 1 unit is a disclosure
    source = Cells({"a": [0, 1, 2, 3, 4, 5], "b": [2, 3, 4, 5]}, units=[0, 0, 1, 2, 3, 4])
    [one] = audit_log(entries(("u", "a"), ("u", "b")), source, k=2).disclosures
    assert (one.rows, one.units) == (2, 1)


def test_cells_of_one_entry_combine_and_repeats_add_nothing() -> None:
    source = Cells({"all": [0, 1, 2, 3, 4], "left": [0, 1, 2], "right": [3, 4]}, units=range(5))
    audit = OfflineAudit(source, k=3)
    first = audit.replay(entries(("u", "left+right"))[0])
    assert (first.cells, first.informative) == (2, 2)
    assert [d.units for d in audit.result().disclosures] == [2]  # "right" itself: 2 < k
    again = audit.replay(LogEntry(2, "t:2", "v", None, "all+left"))
    assert (again.cells, again.informative, again.determined) == (2, 0, ())


def test_not_replayable_entries_are_outcomes() -> None:
    source = Cells({"a": [0, 1, 2]}, units=range(5))
    result = audit_log(entries(("u", "bad"), ("u", "a")), source, k=2)
    bad, good = result.entries
    assert bad.status is Status.NOT_REPLAYABLE and bad.reason == "SELECT * is not allowed" and bad.cells == 0
    assert good.status is Status.REPLAYED and result.not_replayable == (bad,)
    assert result.entry(1).sql == "bad"
    with pytest.raises(KeyError):
        result.entry(3)


def test_large_groups_are_determined_but_not_disclosures() -> None:
    source = Cells({"big": list(range(500)), "all": list(range(1000))}, units=range(1000))
    result = audit_log(entries(("u", "big"), ("u", "all")), source, k=10)
    assert result.disclosures == ()
    assert sorted(d.units for d in result.determined) == [500, 500]  # atoms: big, all - big
    # only small groups are described, to bound backend queries
    assert all(d.description is None for d in result.determined)


def test_bad_arguments() -> None:
    source = Cells({"a": [0]}, units=range(3))
    with pytest.raises(ValueError, match="k=0"):
        OfflineAudit(source, k=0)
    audit = OfflineAudit(source, k=1)
    audit.replay(entries(("u", "a"))[0])
    with pytest.raises(ValueError, match="seq=1 was replayed already"):
        audit.replay(entries(("u", "a"))[0])


@pytest.mark.parametrize("seed", range(6))
def test_random_logs_agree_with_an_exact_oracle(seed: int) -> None:
    rng = random.Random(seed)
    n = 14
    sets = {f"q{i}": sorted(rng.sample(range(n), rng.randint(2, 8))) for i in range(12)}
    log = entries(*((f"u{i % 3}", name) for i, name in enumerate(sets)))
    result = audit_log(log, Cells(sets, units=range(n)), k=3)
    reported = {frozenset(rows_of(d)): d for d in result.determined}
    so_far = RationalSpan(n)
    for entry in log:
        so_far.add(sets[entry.sql])
        # complete: every atom derivable after this entry was reported by then
        for atom in so_far.atoms():
            if so_far.contains(sorted(atom)):
                assert atom in reported and reported[atom].seq <= entry.seq
    for rows, group in reported.items():
        # sound: the answers the report names determine the group on their own
        named = RationalSpan(n)
        for seq in group.entries:
            named.add(sets[log[seq - 1].sql])
        assert named.contains(sorted(rows)), group
        assert group.disclosure == (len(rows) < 3)


def rows_of(group: Determined) -> list[int]:
    assert group.description is not None
    return [int(r) for r in str(group.description["rows"]).split(",")]
