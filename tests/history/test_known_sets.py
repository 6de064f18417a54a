"""Sets asked again are answered from what the audit state remembers (guard.history.known),
with the same verdicts as the exact rational oracle, and without a step.

The streams mix fresh subsets, repeats of released sets, and unions / differences of
released sets (often implied), so that both kinds of remembered set come back.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from guard.history import SpanAuditor, known

from .oracle import RationalSpan


def _stream(rng: random.Random, n: int, length: int) -> list[list[int]]:
    asked: list[list[int]] = []
    for _ in range(length):
        roll = rng.random()
        if asked and roll < 0.35:
            asked.append(list(rng.choice(asked)))  # the same set again
        elif len(asked) >= 2 and roll < 0.6:
            a, b = rng.sample(asked, 2)
            joined = sorted(set(a) | set(b)) if rng.random() < 0.5 else sorted(set(a) ^ set(b))
            asked.append(joined or [rng.randrange(n)])
        else:
            asked.append(sorted(rng.sample(range(n), rng.randint(1, n))))
    return asked


class _Counted(SpanAuditor):
    steps = 0

    def _planned(self, rows):  # type: ignore[no-untyped-def]
        self.steps += 1
        return super()._planned(rows)


@pytest.mark.parametrize("seed", range(40))
def test_verdicts_match_the_oracle_and_repeats_take_no_step(seed: int) -> None:
    rng = random.Random(seed)
    n = rng.randint(3, 14)
    auditor = _Counted(np.arange(n), prime=1_125_899_906_842_597)
    oracle = RationalSpan(n)
    seen: list[frozenset[int]] = []
    for rows in _stream(rng, n, 40):
        query = np.array(rows, dtype=np.int64)
        expected = oracle.contains(rows)
        before = auditor.steps
        assert auditor.implied(query) == expected, (seed, rows)
        asked_before = frozenset(rows) in seen
        if asked_before:
            # released or found implied before: in the span, answered without a step
            assert expected and auditor.steps == before, (seed, rows)
        released = auditor.release(query)
        assert released == (not expected)
        if asked_before:
            assert auditor.steps == before
        if released:
            oracle.add(rows)
        seen.append(frozenset(rows))
        assert auditor.rank == len(oracle.pivots)


@pytest.mark.parametrize("seed", range(20))
def test_a_digest_shared_by_different_sets_changes_no_verdict(
    monkeypatch: pytest.MonkeyPatch, seed: int
) -> None:
    # every set gets the same digest: only the comparison of rows tells them apart
    monkeypatch.setattr(known, "fingerprint", lambda rows: b"same")
    rng = random.Random(1000 + seed)
    n = rng.randint(3, 14)
    auditor = SpanAuditor(np.arange(n), prime=1_125_899_906_842_597)
    oracle = RationalSpan(n)
    for rows in _stream(rng, n, 40):
        query = np.array(rows, dtype=np.int64)
        expected = oracle.contains(rows)
        assert auditor.implied(query) == expected, (seed, rows)
        if auditor.release(query):
            oracle.add(rows)
        assert auditor.rank == len(oracle.pivots)


def test_copies_of_implied_sets_stop_at_their_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(known, "MAX_IMPLIED_ROWS", 5)
    auditor = _Counted(np.arange(6), prime=1_125_899_906_842_597)
    auditor.release(np.array([0, 1, 2]))
    auditor.release(np.array([3, 4, 5]))
    whole = np.arange(6)  # implied: the sum of both, 6 rows, over the bound
    assert auditor.implied(whole)
    before = auditor.steps
    assert auditor.implied(whole)  # not kept: derived again, still implied
    assert auditor.steps == before + 1


def test_asking_whether_a_set_is_implied_derives_no_growth() -> None:
    grew: list[int] = []

    class _Grown(SpanAuditor):
        def _growth(self, plan):  # type: ignore[no-untyped-def]
            grew.append(1)
            return super()._growth(plan)

    auditor = _Grown(np.arange(6), prime=1_125_899_906_842_597)
    auditor.release(np.array([0, 1, 2]))
    assert len(grew) == 1
    assert not auditor.implied(np.array([0, 1]))  # cuts an atom: independent, no growth yet
    assert not auditor.implied(np.array([3, 4]))  # new rows
    assert len(grew) == 1
    assert auditor.exposure(np.array([0, 1])) is not None  # the release's growth, when asked
    assert len(grew) == 2


def test_a_digest_is_reused_only_for_equal_row_ids() -> None:
    """fingerprint remembers the last array it hashed: the digest comes back for equal row
    ids (another array object, another integer type), never for an array changed in
    place since, nor for one that differs in one id or in length."""
    import hashlib

    from guard.history.rowsets import fingerprint

    def hashed(rows: np.ndarray) -> bytes:
        return hashlib.blake2b(np.asarray(rows, dtype=np.int64).tobytes(), digest_size=16).digest()

    rows = np.arange(0, 5000, 3, dtype=np.int64)
    assert fingerprint(rows) == hashed(rows)
    assert fingerprint(rows.copy()) == hashed(rows) and fingerprint(rows.astype(np.int32)) == hashed(rows)
    rows[7] += 1  # the same object, other ids: hashed anew
    assert fingerprint(rows) == hashed(rows) != hashed(np.arange(0, 5000, 3))
    longer = np.append(rows, 6000)
    assert fingerprint(longer) == hashed(longer) and fingerprint(rows[:-1]) == hashed(rows[:-1])
    assert fingerprint(np.array([], dtype=np.int64)) == hashed(np.array([], dtype=np.int64))
