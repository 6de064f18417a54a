"""SpanAuditor's contract at the edges: configuration errors, empty sets, accounting."""

from __future__ import annotations

import random

import numpy as np
import pytest

from guard.history import SpanAuditor


def test_configuration_errors_are_explained() -> None:
    with pytest.raises(ValueError, match=r"prime=91 is not a prime below 2\*\*50"):
        SpanAuditor(np.arange(3), prime=91)
    with pytest.raises(ValueError, match=r"prime=2305843009213693951 is not a prime below"):
        SpanAuditor(np.arange(3), prime=2**61 - 1)  # prime, but beyond exact int64 arithmetic
    with pytest.raises(ValueError, match="copies=0: at least one random weighting"):
        SpanAuditor(np.arange(3), copies=0)


def test_row_ids_outside_the_table_are_rejected() -> None:
    auditor = SpanAuditor(np.arange(3))
    with pytest.raises(ValueError, match="row id 3 outside"):
        auditor.would_disclose(np.array([1, 3]), k=2)


def test_the_empty_set_is_implied_and_the_state_starts_empty() -> None:
    auditor = SpanAuditor(np.arange(5))
    assert auditor.implied(np.array([], dtype=np.int64))
    assert auditor.release(np.array([], dtype=np.int64)) is False
    assert (auditor.rank, auditor.partition.atom_count, auditor.determined()) == (0, 1, [])


def test_seeded_entropy_reproduces_the_secret_prime() -> None:
    first = SpanAuditor(np.arange(4), random_bytes=random.Random(3).randbytes)
    again = SpanAuditor(np.arange(4), random_bytes=random.Random(3).randbytes)
    assert first.prime == again.prime
    assert SpanAuditor(np.arange(4)).prime != SpanAuditor(np.arange(4)).prime  # ~1e-13 to collide


def test_one_copy_still_decides_exactly() -> None:
    auditor = SpanAuditor(np.arange(4), copies=1)
    auditor.release(np.array([0, 1]))
    auditor.release(np.array([2, 3]))
    assert auditor.implied(np.array([3, 2, 1, 0, 0]))  # any order, duplicates collapse
    assert auditor.would_disclose(np.array([1, 2]), k=2) == []  # x0+x1, x2+x3, x1+x2: one degree left
    auditor.release(np.array([1, 2]))
    assert sorted(d.rows for d in auditor.would_disclose(np.array([0]), k=2)) == [1, 1, 1, 1]


def test_memory_accounting() -> None:
    auditor = SpanAuditor(np.arange(1000))
    auditor.release(np.arange(0, 1000, 2))
    assert auditor.nbytes() > 0 and auditor.history_nbytes() > 0
