"""Trackers and complement attacks through the real Guard, judged by an exact oracle.

Each attack is a list of conjunctive questions (=, IN, <>, <, <=, BETWEEN, IS NOT NULL
on dimensions; no OR, no NOT) whose answers, combined by the textbook identity in its
comment, give the total of a group of fewer than k respondents. The attacker keeps every
published value and works out its query set with DuckDB from the CSV; the attack
succeeds iff the exact rational span of those 0/1 row vectors contains the unit vector
of some atom of fewer than k rows (``history_helpers.determined_groups``): the target
group or part of it.

Policies: ``default``; ``unlinked`` (no linked-table protection: the history audit alone
relates answers); ``audit only`` (also min_query_set_size 1: nothing but the audit
withholds); and the same two with the audit off, where the attacks must succeed, so
that the audit is shown to be what stops them. Odd-numbered questions come from bob,
the others from alice: they collude. On the default policy each attack gets a fresh
guard (one audit state for every analyst); on the unlinked ones, one guard per policy
runs every attack, each by its own pair of analysts in its own audit group.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pytest
import yaml

from guard import Guard

from .history_helpers import (
    STUDENTS_CSV,
    Ask,
    Attacker,
    Change,
    Microdata,
    audit_off,
    determined_groups,
    history,
    isolated_pairs,
    protection,
    students_policy,
    unlinked,
)

AUDITED: dict[str, tuple[Change, ...]] = {
    "default": (),
    "unlinked": (unlinked,),
    "audit only": (unlinked, protection(min_query_set_size=1), history(k=3)),
}
UNAUDITED: dict[str, tuple[Change, ...]] = {
    "off": (unlinked, audit_off),
    "off, no size control": (unlinked, audit_off, protection(min_query_set_size=1)),
}


def _alternating(asks: list[Ask], pair: int | None) -> list[Ask]:
    asks = [a.by_analyst("bob") if i % 2 else a for i, a in enumerate(asks)]
    return asks if pair is None else [a.in_pair(pair) for a in asks]


class Guards:
    """Guards for one table: a fresh one per attack on the default (linked) policy, else
    one per policy shared by the attacks (each in its own audit group)."""

    def __init__(self, folder: Path, write_policy: Callable[..., Path], attacks: int) -> None:
        self._folder = folder
        self._write = write_policy
        self._attacks = attacks
        self._shared: dict[str, Guard] = {}
        self._opened: list[Guard] = []

    def run(
        self, policy: str, changes: tuple[Change, ...], attack: int | None, data: Microdata, asks: list[Ask]
    ) -> Attacker:
        """``attack``: its index among the table's attacks; None (or the default policy):
        a fresh guard, all analysts in one audit state."""
        if policy == "default" or attack is None:
            guard, pair = self._open(changes), None
        else:
            if policy not in self._shared:
                self._shared[policy] = self._open((*changes, isolated_pairs(self._attacks)))
            guard, pair = self._shared[policy], attack
        spy = Attacker(data)
        spy.ask_all(guard, _alternating(asks, pair))
        return spy

    def _open(self, changes: tuple[Change, ...]) -> Guard:
        folder = self._folder / f"guard{len(self._opened)}"
        folder.mkdir()
        guard = Guard.open(self._write(folder, *changes), state=folder / "state")
        self._opened.append(guard)
        return guard

    def close(self) -> None:
        for guard in self._opened:
            guard.close()


# -- the students table ---------------------------------------------------------------------

# Rows (file order): 0 Allen F CS 1980, 1 Baker F EE 1980, 2 Cook M EE 1978, 3 Davis F CS 1978,
# 4 Evans M EE 1981, 5 Frank M CS 1978, 6 Good M CS 1981, 7 Hall M EE 1978, 8 Iles M CS 1979.
STUDENT_ATTACKS: dict[str, tuple[frozenset[int], list[Ask]]] = {
    # Schlörer: C = C1 and C2, T = C1 and not C2; q(C) = q(C1) - q(T).
    # C1 = enrolled 1979-1981, C2 = female: C = {Allen, Baker}
    "individual tracker": (
        frozenset({0, 1}),
        [Ask("class BETWEEN 1979 AND 1981"), Ask("class BETWEEN 1979 AND 1981 AND sex = 'Male'")],
    ),
    # Baker through a grouped answer: EE minus the published male EE cell
    "individual tracker, grouped": (
        frozenset({1}),
        [Ask("major = 'EE'"), Ask("major = 'EE'", by=("sex",))],
    ),
    # q(C) = q(C or T) + q(C or not T) - q(T) - q(not T), each "C or X" asked as
    # ALL - (not C and not X). C = enrolled 1981 = {Evans, Good}, T = CS.
    "general tracker": (
        frozenset({4, 6}),
        [
            Ask(),
            Ask("major = 'CS'"),
            Ask("major <> 'CS'"),
            Ask("class <> 1981 AND major <> 'CS'"),
            Ask("class <> 1981 AND major = 'CS'"),
        ],
    ),
    # T subset of U: q(C) = q(U) + q(C or T) - q(T) - q(U and not (C and T)).
    # C = {Allen, Davis} (female CS), T = CS in 1978-79, U = CS in 1978, 1979, 1981.
    "double tracker": (
        frozenset({0, 3}),
        [
            Ask("major = 'CS' AND class IN (1978, 1979, 1981)"),
            Ask("major = 'CS' AND class IN (1978, 1979, 1980)"),
            Ask("major = 'CS' AND class <= 1979"),
            Ask("sex = 'Male' AND major = 'CS' AND class IN (1978, 1979, 1981)"),
        ],
    ),
    # T_i disjoint from C: q(C) = q(T_i or C) - q(T_i). C = Iles (1979), T_i = 1978.
    "union tracker": (
        frozenset({8}),
        [Ask("class = 1978"), Ask("class IN (1978, 1979)"), Ask("class IN (1978, 1980)")],
    ),
    # q(C) = q(ALL) - q(not C), C = Iles: blocked by the N - k size rule unless it is off
    "complement": (frozenset({8}), [Ask(), Ask("class <> 1979")]),
    # the same within the men: q(men) - q(men not enrolled in 1979)
    "complement within a group": (
        frozenset({8}),
        [Ask("sex = 'Male'"), Ask("sex = 'Male' AND class < 1979"), Ask("sex = 'Male' AND class <> 1979")],
    ),
}
# the complement asks a query set with fewer than k rows outside it: without the audit,
# only the query-set-size control's N - k rule stops it
NEEDS_NO_SIZE_CONTROL = {"complement"}


@pytest.fixture(scope="module")
def students_data() -> Iterator[Microdata]:
    data = Microdata(STUDENTS_CSV)
    yield data
    data.close()


@pytest.fixture(scope="module")
def student_guards(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Guards]:
    guards = Guards(tmp_path_factory.mktemp("students"), students_policy, len(STUDENT_ATTACKS))
    yield guards
    guards.close()


def _history_stopped(spy: Attacker) -> bool:
    return any(
        (o.refused and "history audit" in o.refused) or any("history audit" in n for n in o.notes)
        for o in spy.outcomes
    )


@pytest.mark.parametrize("policy", list(AUDITED))
@pytest.mark.parametrize("attack", list(STUDENT_ATTACKS))
def test_student_attacks_fail(
    student_guards: Guards, students_data: Microdata, attack: str, policy: str
) -> None:
    _, asks = STUDENT_ATTACKS[attack]
    spy = student_guards.run(
        policy, AUDITED[policy], list(STUDENT_ATTACKS).index(attack), students_data, asks
    )
    released = spy.released()
    assert released, "some of the attack is answered"
    assert determined_groups(released, spy.n_rows, 3) == []
    if policy == "audit only":
        assert _history_stopped(spy)


@pytest.mark.parametrize("policy", list(UNAUDITED))
@pytest.mark.parametrize("attack", list(STUDENT_ATTACKS))
def test_student_attacks_succeed_without_the_audit(
    student_guards: Guards, students_data: Microdata, attack: str, policy: str
) -> None:
    target, asks = STUDENT_ATTACKS[attack]
    spy = student_guards.run(
        policy, UNAUDITED[policy], list(STUDENT_ATTACKS).index(attack), students_data, asks
    )
    found = determined_groups(spy.released(), spy.n_rows, 3)
    if policy == "off" and attack in NEEDS_NO_SIZE_CONTROL:
        assert found == []
    else:
        assert any(group <= target for group in found), found


@pytest.mark.parametrize("policy", list(AUDITED))
def test_a_small_group_of_two_atoms_stays_hidden(
    student_guards: Guards, students_data: Microdata, policy: str
) -> None:
    """Male EE + male CS - men enrolled up to 1979 = Evans + Good (2 < k students)."""
    asks = [
        Ask("sex = 'Male' AND major = 'EE'"),
        Ask("sex = 'Male' AND major = 'CS'"),
        Ask("sex = 'Male' AND class <= 1979"),
    ]
    spy = student_guards.run(policy, AUDITED[policy], None, students_data, asks)
    released = spy.released()
    assert determined_groups(released, spy.n_rows, 3) == []  # no atom: the audit's own criterion
    assert determined_groups(released, spy.n_rows, 3, unions=True) == []


# -- a generated 10,000-row table -------------------------------------------------------------

SHOP_K = 5
DIMENSIONS: dict[str, list[Any]] = {
    "region": ["R1", "R2", "R3", "R4", "R5", "R6"],
    "sector": ["S1", "S2", "S3", "S4"],
    "size": ["small", "medium", "large"],
    "year": [2019, 2020, 2021, 2022, 2023],
    "channel": ["web", "shop"],
}
UNIQUE = ("R1", "S1", "large", 2021, "web")  # one shop has this combination
PAIR = (("R2", "S3", "small", 2020, "shop"), ("R2", "S3", "small", 2021, "shop"))  # one shop each
RARE = ("R9", "S2", "medium", 2022, "web")  # the only shop in region R9


def _shops(path: Path, rows: int = 10_000, seed: int = 5) -> None:
    """Every other combination has 8 or more shops; the planted ones have one each."""
    rng = np.random.default_rng(seed)
    planted = {UNIQUE, *PAIR}
    combos = [c for c in pd.MultiIndex.from_product(list(DIMENSIONS.values())) if c not in planted]
    counts = 8 + rng.multinomial(rows - 8 * len(combos) - 4, [1 / len(combos)] * len(combos))
    records = [c for c, n in zip(combos, counts, strict=True) for _ in range(n)]
    records += [UNIQUE, *PAIR, RARE]
    frame = pd.DataFrame(records, columns=list(DIMENSIONS))
    frame = frame.sample(frac=1, random_state=seed).reset_index(drop=True)
    frame.insert(0, "shop_id", [f"shop{i:05d}" for i in range(len(frame))])
    frame["revenue"] = rng.integers(100, 9000, len(frame))
    frame.to_csv(path, index=False)


def _shops_policy(folder: Path, csv: Path, *changes: Change) -> Path:
    """Modelled on policies/students.yaml."""
    document: dict[str, Any] = {
        "name": "shops",
        "protection": {"min_query_set_size": SHOP_K},
        "tables": {
            "shops": {
                "source": {"csv": str(csv)},
                "privacy_unit": "shop_id",
                "columns": {
                    "shop_id": {"role": "identifier"},
                    **{d: {"role": "dimension"} for d in DIMENSIONS},
                    "revenue": {"role": "measure", "bounds": [0, 10000]},
                },
            }
        },
        "analysts": {"alice": {"description": "analyst"}, "bob": {"description": "analyst"}},
    }
    for change in changes:
        change(document)
    path = folder / "shops.yaml"
    path.write_text(yaml.safe_dump(document))
    return path


def _shop(where: str = "", by: tuple[str, ...] = ()) -> Ask:
    return Ask(where, ("SUM(revenue)",), by, table="shops")


U = "region = 'R1' AND sector = 'S1' AND size = 'large' AND year = 2021"  # UNIQUE without its channel
B = "region = 'R2' AND sector = 'S3' AND size = 'small' AND channel = 'shop'"  # PAIR without its year
SHOP_ATTACKS: dict[str, tuple[str, list[Ask]]] = {
    "individual tracker": ("unique", [_shop(U), _shop(f"{U} AND channel <> 'web'")]),
    "individual tracker, grouped": ("unique", [_shop(U), _shop(U, by=("channel",))]),
    # q(C) = q(C or T) + q(C or not T) - q(T) - q(not T), each "C or X" asked as
    # ALL - (not C and not X): C = region R9, T = before 2021
    "general tracker": (
        "rare",
        [
            _shop(),
            _shop("year <= 2020"),
            _shop("year >= 2021"),
            _shop("region <> 'R9' AND year >= 2021"),
            _shop("region <> 'R9' AND year <= 2020"),
        ],
    ),
    # q(C) = q(U) + q(C or T) - q(T) - q(U and not (C and T)), T subset of U:
    # C = PAIR, T = B in 2020 or 2022, U = B in 2020, 2022 or 2023
    "double tracker": (
        "pair",
        [
            _shop(f"{B} AND year IN (2020, 2022, 2023)"),
            _shop(f"{B} AND year IN (2020, 2021, 2022)"),
            _shop(f"{B} AND year IN (2020, 2022)"),
            _shop(f"{B} AND year IN (2022, 2023)"),
        ],
    ),
    # T_i = one region, disjoint from C = region R9
    "union tracker": (
        "rare",
        [_shop("region = 'R1'"), _shop("region IN ('R1', 'R9')"), _shop(by=("region",))],
    ),
    "complement": ("rare", [_shop("region IS NOT NULL"), _shop("region <> 'R9'")]),
    # the total minus every published region: R9 is the only region left out
    "complement, grouped": ("rare", [_shop(), _shop(by=("region",))]),
    # B minus its years before 2020 and after 2021: the two planted shops
    "pair by ranges": (
        "pair",
        [_shop(B), _shop(f"{B} AND year < 2020"), _shop(f"{B} AND year BETWEEN 2022 AND 2023")],
    ),
}


@dataclass
class Shops:
    csv: Path
    data: Microdata
    targets: dict[str, frozenset[int]]
    guards: Guards


@pytest.fixture(scope="module")
def shops(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Shops]:
    folder = tmp_path_factory.mktemp("shops")
    csv = folder / "shops.csv"
    _shops(csv)
    frame = pd.read_csv(csv)
    keys = frame[list(DIMENSIONS)].apply(tuple, axis=1)

    def rows_of(combos: list[tuple[Any, ...]]) -> frozenset[int]:
        return frozenset(int(i) for i in frame.index[keys.isin(combos)])

    targets = {"unique": rows_of([UNIQUE]), "pair": rows_of(list(PAIR)), "rare": rows_of([RARE])}
    assert [len(t) for t in targets.values()] == [1, 2, 1]
    assert len(frame) == 10_000
    assert frame.groupby(list(DIMENSIONS)).size().drop(index=[UNIQUE, *PAIR, RARE]).min() >= 8

    def write_policy(target: Path, *changes: Change) -> Path:
        return _shops_policy(target, csv, *changes)

    shops = Shops(csv, Microdata(csv, "shops"), targets, Guards(folder, write_policy, len(SHOP_ATTACKS)))
    yield shops
    shops.guards.close()
    shops.data.close()


@pytest.mark.parametrize("policy", list(AUDITED))
@pytest.mark.parametrize("attack", list(SHOP_ATTACKS))
def test_shop_attacks_fail(shops: Shops, attack: str, policy: str) -> None:
    changes = (*AUDITED[policy], history(k=SHOP_K)) if policy == "audit only" else AUDITED[policy]
    spy = shops.guards.run(
        policy, changes, list(SHOP_ATTACKS).index(attack), shops.data, SHOP_ATTACKS[attack][1]
    )
    released = spy.released("sum(revenue)")
    assert released, "some of the attack is answered"
    assert determined_groups(released, spy.n_rows, SHOP_K) == []
    if policy == "audit only":
        assert _history_stopped(spy)


@pytest.mark.parametrize("policy", list(UNAUDITED))
@pytest.mark.parametrize("attack", list(SHOP_ATTACKS))
def test_shop_attacks_succeed_without_the_audit(shops: Shops, attack: str, policy: str) -> None:
    target, asks = SHOP_ATTACKS[attack]
    spy = shops.guards.run(policy, UNAUDITED[policy], list(SHOP_ATTACKS).index(attack), shops.data, asks)
    found = determined_groups(spy.released("sum(revenue)"), spy.n_rows, SHOP_K)
    if policy == "off" and attack in NEEDS_NO_SIZE_CONTROL:
        assert found == []  # the N - k size rule stops it without the audit
    else:
        assert any(group <= shops.targets[target] for group in found), found
