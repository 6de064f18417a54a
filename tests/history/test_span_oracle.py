"""The modular span audit agrees with an exact rational oracle on random small instances.

The oracle (``oracle.RationalSpan``) does Fraction Gaussian elimination over rows and
knows nothing of atoms, bases or primes. Each example is a random table (rows, privacy
units) and a random query stream mixing fresh subsets with unions and symmetric
differences of released sets (the latter are often implied or cut nothing, which
exercises the search for a new basis atom). Every decision is compared; refused queries
are sometimes released anyway, so that derivable atoms exist and "newly" matters.
"""

from __future__ import annotations

import random

import numpy as np
import numpy.typing as npt
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.history import AtomView, SpanAuditor

from .oracle import RationalSpan

Step = tuple[int, list[int] | tuple[int, int, bool]]


def newly_derivable(oracle: RationalSpan, rows: list[int]) -> set[frozenset[int]]:
    """Atoms (as row sets) derivable once ``rows`` is released that were not, as such, before."""
    trial = oracle.copy()
    trial.add(rows)
    return trial.derivable_atoms() - oracle.derivable_atoms()


def newly_derivable_pairs(oracle: RationalSpan, rows: list[int]) -> set[frozenset[int]]:
    """Unions of two atoms, neither derivable, derivable once ``rows`` is released and not before."""
    trial = oracle.copy()
    trial.add(rows)
    hidden = [a for a in trial.atoms() if not trial.contains(a)]
    unions = {a | b for i, a in enumerate(hidden) for b in hidden[i + 1 :]}
    return {u for u in unions if trial.contains(u) and not oracle.contains(u)}


def reported_atoms(auditor: SpanAuditor, query: npt.NDArray[np.int64]) -> set[frozenset[int]]:
    """Every newly derivable atom with its rows: a predicate that flags them all sees them all."""
    seen: set[frozenset[int]] = set()

    def flag(atom: AtomView) -> bool:
        seen.add(frozenset(atom.rows.tolist()))
        return True

    assert len(auditor.would_disclose(query, k=0, sensitive=flag)) == len(seen)
    return seen


@st.composite
def instances(draw: st.DrawFn) -> tuple[list[int], list[Step], int]:
    n = draw(st.integers(1, 12))
    units = draw(
        st.lists(st.integers(0, max(0, n - 1 - draw(st.integers(0, n // 2)))), min_size=n, max_size=n)
    )
    steps = draw(
        st.lists(
            st.one_of(
                st.tuples(st.just(0), st.lists(st.integers(0, n - 1), max_size=n)),
                st.tuples(st.just(1), st.tuples(st.integers(0, 50), st.integers(0, 50), st.booleans())),
            ),
            min_size=1,
            max_size=14,
        )
    )
    return units, steps, draw(st.integers(0, 2**32))


def check_stream(units: list[int], steps: list[Step], seed: int) -> int:
    """Run one query stream against auditor and oracle, asserting agreement; returns #decisions."""
    n = len(units)
    rng = random.Random(seed)
    auditor = SpanAuditor(np.array(units), random_bytes=rng.randbytes)
    oracle = RationalSpan(n)
    decisions = 0
    for kind, spec in steps:
        if kind == 1 and oracle.released:
            assert isinstance(spec, tuple)
            a = oracle.released[spec[0] % len(oracle.released)]
            b = oracle.released[spec[1] % len(oracle.released)]
            rows = sorted(a ^ b if spec[2] else a | b)
        elif kind == 0:
            assert isinstance(spec, list)
            rows = sorted(set(spec))
        else:
            continue
        query = np.array(rows, dtype=np.int64)
        k = rng.randint(1, 3)
        assert auditor.implied(query) == oracle.contains(rows)
        fresh = newly_derivable(oracle, rows)
        assert reported_atoms(auditor, query) == fresh
        found = auditor.would_disclose(query, k=k)
        small = [a for a in fresh if len({units[r] for r in a}) < k]
        small += [u for u in newly_derivable_pairs(oracle, rows) if len({units[r] for r in u}) < k]
        assert sorted((d.rows, d.units) for d in found) == sorted(
            (len(a), len({units[r] for r in a})) for a in small
        )
        decisions += 1
        if not found or rng.random() < 0.3:
            auditor.release(query)
            oracle.add(rows)
            derivable = {frozenset(auditor.partition.rows(d.atom).tolist()) for d in auditor.determined()}
            assert derivable == oracle.derivable_atoms()
            assert auditor.rank == len(oracle.pivots) <= auditor.partition.atom_count
    return decisions


@settings(max_examples=300, deadline=None)
@given(instances())
def test_decisions_match_the_rational_oracle(instance: tuple[list[int], list[Step], int]) -> None:
    check_stream(*instance)


def test_thousands_of_seeded_decisions_match_the_oracle() -> None:
    rng = np.random.default_rng(2024)
    decisions = 0
    for seed in range(400):
        n = int(rng.integers(2, 13))
        units = rng.integers(0, max(1, n - int(rng.integers(0, n // 2 + 1))), n).tolist()
        steps: list[Step] = []
        for _ in range(int(rng.integers(4, 15))):
            if rng.random() < 0.35:
                steps.append((1, (int(rng.integers(50)), int(rng.integers(50)), bool(rng.random() < 0.5))))
            else:
                steps.append((0, np.flatnonzero(rng.random(n) < rng.random()).tolist()))
        decisions += check_stream(units, steps, seed)
    print(f"{decisions} decisions agreed with the rational oracle")
    assert decisions >= 3000


def test_a_fixed_small_prime_is_accepted_and_agrees() -> None:
    # 2**31 - 1: the ~31-bit regime of AUDITING.md; same decisions on the Baker pair.
    auditor = SpanAuditor(np.arange(4), prime=2**31 - 1)
    auditor.release(np.array([0, 1, 2]))
    assert [d.rows for d in auditor.would_disclose(np.array([1, 2]), k=2)] == [1]
    assert auditor.prime == 2**31 - 1
