"""The Baker differencing example of seed 002 (chapter 1) on the 9-student table.

SUM(income) for major EE (240k) minus SUM(income) for male EE students (190k) is Baker's
income (50k): Baker is the only female EE. Whichever comes second must be refused.
"""

from __future__ import annotations

import random

import duckdb
import numpy as np
import pytest
from pyroaring import BitMap

from guard.history import AtomView, SpanAuditor, as_bitmap

from .conftest import RowsOf, load_students, rows_where

K = 2  # a total over fewer than 2 students is a disclosure
BAKER = 1  # _rid of Baker (file order)


def auditor() -> SpanAuditor:
    return SpanAuditor(np.arange(9))


@pytest.mark.parametrize(
    ("first", "second"),
    [
        ("major = 'EE'", "major = 'EE' AND sex = 'Male'"),
        ("major = 'EE' AND sex = 'Male'", "major = 'EE'"),
    ],
    ids=["EE-then-male-EE", "male-EE-then-EE"],
)
def test_baker_pair_second_query_is_refused(rows_of: RowsOf, first: str, second: str) -> None:
    audit = auditor()
    assert audit.would_disclose(rows_of(first), k=K) == []
    audit.release(rows_of(first), tag="first")
    [disclosure] = audit.would_disclose(rows_of(second), k=K)
    assert disclosure.units == 1 and disclosure.rows == 1
    assert disclosure.queries == ("first",)
    assert not audit.implied(rows_of(second))


def test_baker_atom_is_named_after_a_forced_release(rows_of: RowsOf) -> None:
    audit = auditor()
    audit.release(rows_of("major = 'EE'"), tag="alice:1")
    audit.release(rows_of("major = 'EE' AND sex = 'Male'"), tag="bob:1")
    baker = [d for d in audit.determined() if d.units < K]
    assert len(baker) == 1
    assert audit.partition.rows(baker[0].atom).tolist() == [BAKER]
    assert set(baker[0].queries) == {"alice:1", "bob:1"}


@pytest.mark.parametrize(
    "rephrased",
    [
        "major IN ('EE')",
        "sex = 'Male' AND major = 'EE'",
        "NOT (major <> 'EE') AND sex IN ('Male')",
    ],
)
def test_rephrased_equivalents_are_the_same_query_set(rows_of: RowsOf, rephrased: str) -> None:
    audit = auditor()
    audit.release(rows_of("major = 'EE'"))
    if "Male" in rephrased:
        assert audit.would_disclose(rows_of(rephrased), k=K), "the male-EE rephrasing isolates Baker"
    else:
        assert audit.implied(rows_of(rephrased)), "the same set again is already known"


def test_group_by_major_then_group_by_major_for_males(rows_of: RowsOf) -> None:
    audit = auditor()
    for major in ("CS", "EE"):  # GROUP BY major: one cell per major
        assert audit.would_disclose(rows_of(f"major = '{major}'"), k=K) == []
        audit.release(rows_of(f"major = '{major}'"))
    male_cs = rows_of("sex = 'Male' AND major = 'CS'")
    assert audit.would_disclose(male_cs, k=K) == []  # CS minus male CS = Allen + Davis: 2 students
    audit.release(male_cs)
    assert audit.would_disclose(rows_of("sex = 'Male' AND major = 'EE'"), k=K)
    # With k = 3 the CS difference (2 students) would already have been refused.
    assert SpanAuditor(np.arange(9)).would_disclose(rows_of("major = 'CS'"), k=3) == []


def test_collusion_is_caught_by_one_shared_state(rows_of: RowsOf) -> None:
    shared = auditor()  # one state per (data version, table, measure), fed by every analyst
    shared.release(rows_of("major = 'EE'"), tag=("alice", 1))
    [found] = shared.would_disclose(rows_of("major = 'EE' AND sex = 'Male'"), k=K)
    assert found.queries == (("alice", 1),)


def test_complement_of_one_student_is_refused(rows_of: RowsOf) -> None:
    audit = auditor()
    audit.release(rows_of("TRUE"))
    [found] = audit.would_disclose(rows_of("name <> 'Baker'"), k=K)
    assert found.units == 1


def test_implied_answers_change_nothing(rows_of: RowsOf) -> None:
    audit = auditor()
    audit.release(rows_of("major = 'CS'"))
    audit.release(rows_of("major = 'EE'"))
    rank, atoms = audit.rank, audit.partition.atom_count
    everyone = rows_of("class > 0")
    assert audit.implied(everyone)  # CS + EE
    assert audit.would_disclose(everyone, k=K) == []
    assert audit.release(everyone) is False
    assert (audit.rank, audit.partition.atom_count) == (rank, atoms)
    assert not audit.implied(rows_of("sex = 'Male'"))


def test_refused_queries_leave_no_trace(rows_of: RowsOf) -> None:
    audit = auditor()
    audit.release(rows_of("major = 'EE'"))
    before = (audit.rank, audit.partition.atom_count, audit.partition.sizes().tolist())
    assert audit.would_disclose(rows_of("major = 'EE' AND sex = 'Male'"), k=K)
    assert not audit.implied(rows_of("major = 'EE' AND sex = 'Male'"))
    assert (audit.rank, audit.partition.atom_count, audit.partition.sizes().tolist()) == before
    # The refused query did not refine the atoms: the later Baker complement is still seen whole.
    assert audit.would_disclose(rows_of("major = 'EE' AND name <> 'Baker'"), k=K)


def test_bitmaps_and_arrays_agree(rows_of: RowsOf) -> None:
    audit = auditor()
    audit.release(as_bitmap(rows_of("major = 'EE'")))
    male_ee = rows_of("major = 'EE' AND sex = 'Male'")
    assert audit.would_disclose(BitMap(male_ee.tolist()), k=K) == audit.would_disclose(male_ee[::-1], k=K)


def test_sensitive_predicate_protects_large_atoms(rows_of: RowsOf) -> None:
    audit = auditor()
    seen: list[AtomView] = []

    def holds_baker(atom: AtomView) -> bool:
        seen.append(atom)
        return BAKER in atom.rows.tolist()

    assert audit.would_disclose(rows_of("major = 'EE'"), k=1, sensitive=holds_baker)
    assert seen[0].units == 4
    assert audit.would_disclose(rows_of("major = 'CS'"), k=1, sensitive=holds_baker) == []


def test_units_not_rows_decide(rows_of: RowsOf) -> None:
    units = np.arange(9)
    units[7] = units[2]  # Cook and Hall are one household: one privacy unit
    units[6] = units[2]  # and Good (CS) too: a unit spanning atoms
    audit = SpanAuditor(units)
    audit.release(rows_of("major = 'EE'"))
    [found] = audit.would_disclose(rows_of("major = 'EE' AND name IN ('Baker', 'Evans')"), k=K)
    assert (found.rows, found.units) == (2, 1)  # Cook + Hall: two rows, one respondent
    assert audit.partition.units(0) == 5  # the rest: Allen, Davis, Frank, Iles and (via Good) the household


def _decisions(con: duckdb.DuckDBPyConnection, table: str, wheres: list[str], seed: int) -> list[str]:
    audit = SpanAuditor(np.arange(9), random_bytes=random.Random(seed).randbytes)
    decisions = []
    for where in wheres:
        rows = rows_where(con, table, where)
        if audit.implied(rows):
            decisions.append("implied")
        elif audit.would_disclose(rows, k=K):
            decisions.append("refused")
        else:
            audit.release(rows)
            decisions.append("released")
    return decisions


WORKLOAD = [
    "major = 'EE'",
    "major = 'EE' AND sex = 'Male'",
    "sex = 'Female'",
    "sex = 'Female' AND major = 'CS'",
    "class <= 1979",
    "major = 'CS'",
    "TRUE",
    "class <= 1979 AND major = 'EE'",
]


def test_decisions_are_simulatable() -> None:
    """Two databases that differ only in a hidden value get the same decisions."""
    con = duckdb.connect()
    load_students(con, "real")
    load_students(con, "twin")
    con.execute("UPDATE twin SET income = 65000 WHERE name = 'Baker'")
    real = _decisions(con, "real", WORKLOAD, seed=1)
    assert real == _decisions(con, "twin", WORKLOAD, seed=2)
    assert real.count("refused") >= 2 and "implied" in real


def test_a_measure_in_the_predicate_breaks_simulatability() -> None:
    """Why validation must keep measures out of WHERE (AUDITING.md): the query set then
    depends on the hidden value, and so does the refusal."""
    con = duckdb.connect()
    load_students(con, "real")
    load_students(con, "twin")
    con.execute("UPDATE twin SET income = 65000 WHERE name = 'Baker'")
    leaky = ["major = 'EE'", "major = 'EE' AND (name <> 'Baker' OR income > 60000)"]
    assert _decisions(con, "real", leaky, seed=1) == ["released", "refused"]
    assert _decisions(con, "twin", leaky, seed=1) == ["released", "implied"]
