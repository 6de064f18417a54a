"""``released.product_mod``: residues times a 0/1 matrix mod p, exactly, in one int64
product up to ``ONE_PRODUCT`` sets and in 25-bit halves beyond (against Python integers)."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.sparse import csr_matrix

from guard.history.modular import ONE_PRODUCT, random_prime
from guard.history.released import product_mod


@pytest.mark.parametrize("sets", [300, ONE_PRODUCT, ONE_PRODUCT + 1, 3 * ONE_PRODUCT])
def test_the_product_is_the_exact_sum_mod_p(sets: int) -> None:
    rng = np.random.default_rng(sets)
    p = random_prime()
    m, columns = 3, 4
    # residues near p, on most sets: sums that overflow int64 unless split
    picked = np.where(rng.random((m, sets)) < 0.9, p - 1 - rng.integers(0, 1000, (m, sets)), 0).astype(
        np.int64
    )
    member = (rng.random((sets, columns)) < 0.8).astype(np.int64)
    member[:, 0] = 1  # one column every set holds
    got = product_mod(csr_matrix(picked), csr_matrix(member), p).toarray()
    want = [
        [sum(int(picked[i, j]) for j in range(sets) if member[j, c]) % p for c in range(columns)]
        for i in range(m)
    ]
    assert got.tolist() == want
