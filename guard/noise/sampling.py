"""Randomness and exact noise samplers: discrete Laplace and Laplace on a grid.

Why not ``value + numpy.random.laplace(b)``: textbook floating-point Laplace samplers
leak. The set of doubles ``x + b·ln(u)`` can reach depends on ``x``, so some outputs are
possible under one database and impossible under its neighbour, and the true value can
be read off the low bits of the answer (Mironov, "On significance of the least
significant bits for differential privacy", CCS 2012). Every sampler here works on
integers and exact rationals only; floats appear solely when a finished grid point is
converted for output, which is post-processing.

Two samplers:

- ``discrete_laplace(scale)``: P(Z = z) = (1 - a)/(1 + a) · a^|z|, a = e^(-1/scale), z an integer
  (the two-sided geometric distribution), sampled exactly by Algorithms 1-2 of Canonne,
  Kamath & Steinke, "The Discrete Gaussian for Differential Privacy" (NeurIPS 2020). For
  an integer query of sensitivity Δ, adding it with scale = Δ/ε is ε-DP.

- ``grid_laplace(value, sensitivity, epsilon)``: the continuous-output Laplace mechanism.
  Choice: discretise onto a grid rather than Mironov's snapping mechanism. Snapping is
  only as sound as the platform's ``log`` (it assumes a correctly rounded logarithm and a
  uniform over all doubles in (0, 1)) and costs an ε inflation of about
  2^-49·B/λ² for clamp bound B; the grid construction reuses the exact integer sampler
  above and is exactly ε-DP with no inflation:

      g  = granularity, a positive rational (default: the largest power of two ≤ Δ/1024)
      k  = ⌊value/g + 1/2⌋                 (value rounded to the grid, exactly)
      Δg = ⌈Δ/g⌉                           (sensitivity in grid steps)
      output = g · (k + Z),  Z ~ discrete_laplace(Δg/ε)

  If |q(D) - q(D')| ≤ Δ then |k - k'| ≤ ⌈Δ/g⌉ (floor of a shifted value moves by at most
  the ceiling of the shift), so the release is ε-DP for a query of sensitivity Δ. The
  noise scale in value units is g·Δg/ε ∈ [Δ/ε, (Δ + g)/ε): with the default grid at most
  0.1 % above the Laplace scale Δ/ε. With a power-of-two g the output g·(k + Z) is exactly
  representable as a double while |k + Z| < 2^53. The output set (multiples of g) is the
  same for every database, which is what defeats the least-significant-bits attack.
  The guarantee assumes ``value`` is the exact query result (a float is taken at its
  exact binary value); a sum computed with rounding error may move by slightly more than
  Δ, so exact (integer/DECIMAL) sums upstream are preferable.
"""

from __future__ import annotations

import math
import random
import secrets
from abc import ABC, abstractmethod
from dataclasses import dataclass
from fractions import Fraction

from guard.policy.epsilon import EpsilonLike, as_epsilon

__all__ = [
    "GridSample",
    "InsecureSeededSource",
    "RandomSource",
    "SystemRandomSource",
    "bernoulli_exp",
    "default_grid",
    "default_source",
    "discrete_laplace",
    "discrete_laplace_cdf",
    "discrete_laplace_pmf",
    "grid_laplace",
    "power_of_two_at_most",
    "resolve_source",
    "round_to_grid",
]

#: the default grid puts at least this many steps into one sensitivity Δ
GRID_STEPS_PER_SENSITIVITY = 1024


class RandomSource(ABC):
    """Uniform integers; everything else is derived from ``randbelow`` exactly."""

    @abstractmethod
    def randbelow(self, n: int) -> int:
        """A uniform integer in [0, n). Raises ``ValueError`` if n ≤ 0."""

    def bernoulli(self, numerator: int, denominator: int) -> bool:
        """True with probability numerator/denominator exactly (0 ≤ numerator ≤ denominator)."""
        return self.randbelow(denominator) < numerator

    def uniform01(self) -> float:
        """A uniform double k/2^53 in [0, 1), k uniform: only for data-independent draws."""
        return self.randbelow(1 << 53) / (1 << 53)


class SystemRandomSource(RandomSource):
    """The production source: the operating system's CSPRNG via ``secrets``.

    It takes no seed and has no ``seed`` method, so nothing can make it reproducible by
    accident (``random.SystemRandom.seed`` would be a silent no-op; here it is absent).
    """

    __slots__ = ()

    def randbelow(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"randbelow needs n > 0, got {n}")
        return secrets.randbelow(n)


class InsecureSeededSource(RandomSource):
    """A reproducible source for tests ONLY: its output is predictable from the seed.

    Never used unless passed explicitly; the guard's default is ``default_source()``.
    """

    __slots__ = ("_generator",)

    def __init__(self, seed: int) -> None:
        self._generator = random.Random(seed)

    def randbelow(self, n: int) -> int:
        if n <= 0:
            raise ValueError(f"randbelow needs n > 0, got {n}")
        return self._generator.randrange(n)


_DEFAULT_SOURCE = SystemRandomSource()


def default_source() -> RandomSource:
    """The process-wide secure source (stateless, safe to share between threads)."""
    return _DEFAULT_SOURCE


def resolve_source(rng: RandomSource | None) -> RandomSource:
    """``rng`` if given, else the secure default. Raises ``TypeError`` for anything else
    (notably an int: a seed is not a source, and silently seeding must be impossible)."""
    if rng is None:
        return _DEFAULT_SOURCE
    if not isinstance(rng, RandomSource):
        raise TypeError(f"rng must be a RandomSource, not {type(rng).__name__}")
    return rng


def _bernoulli_exp_at_most_one(numerator: int, denominator: int, rng: RandomSource) -> bool:
    # CKS 2020 Algorithm 1 for gamma = numerator/denominator ∈ [0, 1]: with K the first k such
    # that Bernoulli(gamma/k) fails, P(K odd) = Σ_j (-gamma)^j / j! = e^(-gamma).
    k = 1
    while rng.bernoulli(numerator, denominator * k):
        k += 1
    return k % 2 == 1


def bernoulli_exp(numerator: int, denominator: int, rng: RandomSource) -> bool:
    """True with probability exp(-numerator/denominator) exactly (integers, gamma ≥ 0)."""
    if numerator < 0 or denominator <= 0:
        raise ValueError(f"bernoulli_exp needs gamma = {numerator}/{denominator} ≥ 0")
    # e^(-gamma) = (e^(-1))^⌊gamma⌋ · e^(-(gamma-⌊gamma⌋)), so only gamma ≤ 1 ever reaches Algorithm 1
    while numerator > denominator:
        if not _bernoulli_exp_at_most_one(1, 1, rng):
            return False
        numerator -= denominator
    return _bernoulli_exp_at_most_one(numerator, denominator, rng)


def discrete_laplace(scale: Fraction, rng: RandomSource | None = None) -> int:
    """One exact draw of Z with P(Z = z) = (1 - a)/(1 + a) · a^|z|, a = e^(-1/scale).

    ``scale`` > 0 is a rational (write it as t/s); CKS 2020 Algorithm 2. Raises
    ``ValueError`` if scale ≤ 0.
    """
    if scale <= 0:
        raise ValueError(f"discrete Laplace needs scale > 0, got {scale}")
    source = resolve_source(rng)
    t, s = scale.numerator, scale.denominator
    while True:
        u = source.randbelow(t)
        if not bernoulli_exp(u, t, source):
            continue
        v = 0
        while bernoulli_exp(1, 1, source):
            v += 1
        # X = U + tV is geometric with P(X = x) ∝ e^(-x/t); ⌊X/s⌋ then has ratio e^(-s/t)
        magnitude = (u + t * v) // s
        negative = source.randbelow(2) == 1
        if negative and magnitude == 0:
            continue  # otherwise 0 would be drawn twice as often as it should
        return -magnitude if negative else magnitude


def discrete_laplace_pmf(z: int, scale: float) -> float:
    """P(Z = z) = (1 - a)/(1 + a) · a^|z| with a = e^(-1/scale) (float, for tests and δ)."""
    a = math.exp(-1.0 / scale)
    return (1.0 - a) / (1.0 + a) * a ** abs(z)


def discrete_laplace_cdf(z: int, scale: float) -> float:
    """P(Z ≤ z): a^|z|/(1 + a) for z < 0, and 1 - a^(z+1)/(1 + a) for z ≥ 0."""
    a = math.exp(-1.0 / scale)
    if z < 0:
        return a ** (-z) / (1.0 + a)
    return 1.0 - a ** (z + 1) / (1.0 + a)


@dataclass(frozen=True)
class GridSample:
    """One release of ``grid_laplace``."""

    #: g·(k + Z): the noisy value, a multiple of ``granularity``
    value: float
    #: noise scale in value units, g·⌈Δ/g⌉/ε (≥ the Laplace scale Δ/ε)
    scale: Fraction
    #: the grid step g
    granularity: Fraction
    #: ε of this release
    epsilon: Fraction


def power_of_two_at_most(x: Fraction) -> Fraction:
    """The largest power of two (any integer exponent) that is ≤ x. Requires x > 0."""
    if x <= 0:
        raise ValueError(f"power_of_two_at_most needs x > 0, got {x}")
    exponent = x.numerator.bit_length() - x.denominator.bit_length()
    # the bit-length estimate is off by at most one; fix it so that 2^e ≤ x < 2^(e+1)
    if _power_of_two(exponent) > x:
        exponent -= 1
    return _power_of_two(exponent)


def _power_of_two(exponent: int) -> Fraction:
    return Fraction(1 << exponent) if exponent >= 0 else Fraction(1, 1 << -exponent)


def default_grid(sensitivity: Fraction) -> Fraction:
    """The largest power of two g ≤ Δ/1024, so ⌈Δ/g⌉ ∈ [1024, 2048]. Requires Δ > 0."""
    return power_of_two_at_most(sensitivity / GRID_STEPS_PER_SENSITIVITY)


def round_to_grid(value: float | int | Fraction, granularity: Fraction) -> int:
    """⌊value/g + 1/2⌋ exactly: the index of the grid point nearest to ``value``."""
    v, g = _exact(value, "value"), granularity
    # integer form of ⌊v/g + 1/2⌋, which runs far faster than Fraction arithmetic
    return (2 * v.numerator * g.denominator + v.denominator * g.numerator) // (
        2 * v.denominator * g.numerator
    )


def _exact(value: float | int | Fraction, name: str) -> Fraction:
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"{name} must be finite, got {value!r}")
    return Fraction(value)


def grid_laplace(
    value: float | int | Fraction,
    sensitivity: float | int | Fraction,
    epsilon: EpsilonLike,
    rng: RandomSource | None = None,
    *,
    granularity: float | int | Fraction | None = None,
) -> GridSample:
    """ε-DP Laplace-like release of ``value`` (a query of L1 sensitivity Δ) on a grid.

    See the module docstring for the construction and its guarantee. ``granularity``
    overrides the default grid (use 1 for integer-valued queries with integer Δ: then the
    mechanism is exactly the geometric mechanism with scale Δ/ε). Raises ``ValueError``
    for a non-finite value, Δ ≤ 0, ε ≤ 0 or granularity ≤ 0.
    """
    eps = as_epsilon(epsilon)
    delta = _exact(sensitivity, "sensitivity")
    if delta <= 0:
        raise ValueError(f"sensitivity must be > 0, got {sensitivity!r}")
    grid = default_grid(delta) if granularity is None else _exact(granularity, "granularity")
    if grid <= 0:
        raise ValueError(f"granularity must be > 0, got {granularity!r}")
    on_grid = round_to_grid(value, grid)
    steps = -(-delta.numerator * grid.denominator // (delta.denominator * grid.numerator))  # ⌈Δ/g⌉
    noise = discrete_laplace(Fraction(steps * eps.denominator, eps.numerator), rng)
    return GridSample(
        # int / int is correctly rounded, and exact for a power-of-two g while |k + Z| < 2^53
        value=(on_grid + noise) * grid.numerator / grid.denominator,
        scale=grid * steps / eps,
        granularity=grid,
        epsilon=eps,
    )
