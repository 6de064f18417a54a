"""Exact arithmetic modulo a secret random prime, vectorized on int64 numpy arrays.

The span audit works over GF(p) instead of the rationals (exact, but too slow) or floats
(fast, but a rounding error is a missed disclosure). p is drawn at random and kept
secret, so nobody can craft queries whose determinants p happens to divide.

Why p < 2**50: products of two residues do not fit in 64 bits, so ``mul_mod`` takes the
quotient from float64 (error < 1/4 when p < 2**50) and the remainder from wrapping
uint64 arithmetic, which is exact. Sums of at most ``SUM_CHUNK`` residues stay below
2**62, which is why ``sum_mod`` reduces in chunks.
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

import numpy as np
import numpy.typing as npt

__all__ = [
    "HALF",
    "LOW",
    "ONE_PRODUCT",
    "PRIME_BITS",
    "SUM_CHUNK",
    "add_outer_mod",
    "inverse_mod",
    "is_probable_prime",
    "mul_mod",
    "random_prime",
    "sum_mod",
]

Residues = npt.NDArray[np.int64]

#: bit length of the primes ``random_prime`` draws: in [2**49, 2**50)
PRIME_BITS = 50
#: how many residues < 2**50 can be added in int64 before reducing (2**12 * 2**50 = 2**62)
SUM_CHUNK = 1 << 12
#: residues one int64 sum may add exactly: (2**13 - 1) below 2**50 stay below 2**63
ONE_PRODUCT = (1 << (63 - PRIME_BITS)) - 1
#: bits of the low half of a residue split for exact sums beyond that (25-bit halves sum
#: exactly in int64 over 2**38 terms, in float64 over 2**28)
HALF = 25
LOW = (1 << HALF) - 1

#: entries of the matrix ``add_outer_mod`` updates per block (512 KB per temporary)
_OUTER_BLOCK = 1 << 16

# Deterministic Miller-Rabin witnesses for every n < 3.3 * 10**24 (Sorenson & Webster).
_WITNESSES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37, 41)


def is_probable_prime(n: int) -> bool:
    """Miller-Rabin with fixed witnesses: exact for n < 3.3 * 10**24, which covers our primes."""
    if n < 2:
        return False
    for w in _WITNESSES:
        if n % w == 0:
            return n == w
    d, s = n - 1, 0
    while d % 2 == 0:
        d, s = d // 2, s + 1
    for w in _WITNESSES:
        x = pow(w, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def random_prime(bits: int = PRIME_BITS, random_bytes: Callable[[int], bytes] = secrets.token_bytes) -> int:
    """A uniformly random prime in [2**(bits-1), 2**bits); ``bits`` in 3..50 (``mul_mod``'s bound)."""
    if not 3 <= bits <= PRIME_BITS:
        raise ValueError(
            f"prime bit length {bits} is outside 3..{PRIME_BITS}; mul_mod is exact only below 2**50"
        )
    nbytes = (bits + 7) // 8
    while True:
        candidate = int.from_bytes(random_bytes(nbytes), "big") % (1 << (bits - 1))
        candidate |= (1 << (bits - 1)) | 1
        if is_probable_prime(candidate):
            return candidate


def mul_mod(a: Residues | int, b: Residues | int, p: int) -> Residues:
    """(a * b) mod p elementwise (broadcasting), for residues in [0, p) with p < 2**50."""
    a_arr = np.asarray(a, dtype=np.int64)
    b_arr = np.asarray(b, dtype=np.int64)
    quotient = np.floor(a_arr.astype(np.float64) * b_arr.astype(np.float64) / float(p))
    # The true remainder lies in [-p, 2p): exact in wrapping uint64, then fixed by one step.
    wrapped = a_arr.astype(np.uint64) * b_arr.astype(np.uint64) - quotient.astype(np.uint64) * np.uint64(p)
    remainder = wrapped.view(np.int64)
    remainder = np.where(remainder < 0, remainder + p, remainder)
    return np.where(remainder >= p, remainder - p, remainder)


def add_outer_mod(matrix: Residues, u: Residues, v: Residues, p: int) -> None:
    """matrix <- (matrix + u v^T) mod p in place: the rank-one update.

    Only the rows where u != 0 and the columns where v != 0 change. A dense update is
    done in blocks of about ``_OUTER_BLOCK`` entries: each of the ~12 passes then works on
    temporaries that stay in cache instead of allocating r x r arrays (10x faster at
    r = 5,000). The quotient's float error stays below 1/2, as in ``mul_mod``.
    """
    touched_rows, touched_columns = np.flatnonzero(u), np.flatnonzero(v)
    if touched_rows.size * touched_columns.size * 4 < matrix.size:
        # u and v are usually sparse (M^-1 of 0/1 query rows): update only the entries
        # where u v^T is nonzero, a small dense block
        entries = np.ix_(touched_rows, touched_columns)
        part = matrix[entries]
        add_outer_mod(part, u[touched_rows], v[touched_columns], p)
        matrix[entries] = part
        return
    rows = max(1, _OUTER_BLOCK // max(1, matrix.shape[1]))
    scaled_v = v.astype(np.float64) / float(p)
    wide_v = v.astype(np.uint64)
    reciprocal = 1.0 / float(p)
    for begin in range(0, matrix.shape[0], rows):
        block = matrix[begin : begin + rows]
        part = u[begin : begin + rows]
        quotient = np.multiply.outer(part.astype(np.float64), scaled_v)
        quotient += block * reciprocal
        np.floor(quotient, out=quotient)
        wrapped = np.multiply.outer(part.astype(np.uint64), wide_v)
        wrapped += block.view(np.uint64)
        wrapped -= quotient.astype(np.uint64) * np.uint64(p)
        remainder = wrapped.view(np.int64)  # in [-p, 2p): one conditional add, subtract, add
        remainder += (remainder >> 63) & p
        remainder -= p
        remainder += (remainder >> 63) & p
        block[...] = remainder


def sum_mod(values: Residues, p: int, axis: int = 0) -> Residues:
    """Sum of residues along ``axis``, mod p, without int64 overflow for any length."""
    moved = np.moveaxis(np.asarray(values, dtype=np.int64), axis, 0)
    total = np.zeros(moved.shape[1:], dtype=np.int64)
    for begin in range(0, moved.shape[0], SUM_CHUNK):
        total = (total + moved[begin : begin + SUM_CHUNK].sum(axis=0)) % p
    return total


def inverse_mod(value: int, p: int) -> int:
    """The multiplicative inverse of ``value`` mod prime p; ValueError when value = 0 mod p."""
    if value % p == 0:
        raise ValueError("zero has no inverse modulo a prime")
    return pow(value, -1, p)
