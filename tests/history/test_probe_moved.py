"""The atoms' probe carried across releases (``Probe.moved``: only cut atoms'
representatives change) is the probe built afresh, field for field."""

from __future__ import annotations

import numpy as np
import pytest

from guard.history.released import Probe
from guard.history.span import SpanAuditor


@pytest.mark.parametrize("seed", range(5))
def test_the_carried_probe_is_the_fresh_one(seed: int, monkeypatch: pytest.MonkeyPatch) -> None:
    moves = [0]
    inner = Probe.moved

    def counted(self: Probe, before: np.ndarray, after: np.ndarray) -> Probe:
        moves[0] += 1
        return inner(self, before, after)

    monkeypatch.setattr(Probe, "moved", counted)
    rng = np.random.default_rng(8100 + seed)
    n = 3_000
    auditor = SpanAuditor(np.arange(n))
    carried = 0
    for _ in range(40):
        if rng.random() < 0.5:
            q = np.sort(rng.choice(n, size=int(rng.integers(2, 400)), replace=False))
        else:
            start = int(rng.integers(0, n - 2))
            q = np.arange(start, int(rng.integers(start + 1, n)) + 1)
        auditor.release(q)
        if rng.random() < 0.3:
            continue  # two releases between reads: the probe moves over both cuts
        probe = auditor.atom_probe()
        count = auditor.partition.atom_count
        fresh = Probe.of(auditor.partition.representatives(np.arange(count, dtype=np.int64)))
        assert np.array_equal(probe.rows, fresh.rows)
        assert np.array_equal(probe.order, fresh.order)
        assert probe.bitmap == fresh.bitmap
        assert np.array_equal(probe.places_of(probe.rows), fresh.places_of(fresh.rows))
        assert (probe.slot is None) == (fresh.slot is None)
        carried += 1
    assert carried > 10
    assert moves[0] > 5  # carried, not rebuilt
