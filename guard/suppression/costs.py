"""Cell costs for choosing complementary cells, with secret random perturbation.

Seed 004 shows that any *deterministic* choice of complementary cells leaks: an
attacker who knows the algorithm re-runs it on every candidate table consistent with
the release and drops the candidates that would not reproduce the observed pattern.
So the costs the solvers minimise are the information-loss weights multiplied by
``1 + perturbation * u_i``, ``u_i ~ U[0, 1)`` drawn from a generator seeded with a
secret: ``seed`` when given (the guard derives it from its secret key and the table's
fingerprint, so one table always gets one pattern), else 128 fresh bits from
:mod:`secrets`. Without the seed an attacker must accept every candidate for which
*some* perturbation reproduces the pattern.
"""

from __future__ import annotations

import secrets

import numpy as np

from guard.suppression.model import Weight
from guard.suppression.table import Table

__all__ = ["base_weights", "perturbed_costs"]

#: share of the mean weight added to every cell so that empty cells are not free
_FLOOR = 1e-3


def base_weights(table: Table, weight: Weight) -> np.ndarray:
    """Unperturbed information-loss weight ``w_i`` of each cell.

    COUNT: ``w_i = 1``. VALUE: ``w_i = |a_i| + 0.001 * mean|a|`` (the small floor keeps
    zero cells from being withheld for free).
    """
    a: np.ndarray = np.abs(table.arrays[0])
    if weight is Weight.COUNT:
        return np.ones(len(a))
    mean = float(a.mean()) if len(a) else 0.0
    weights: np.ndarray = a + _FLOOR * max(mean, 1e-12)
    return weights


def perturbed_costs(table: Table, weight: Weight, perturbation: float, seed: int | None) -> np.ndarray:
    """``w_i * (1 + perturbation * u_i)``; ``perturbation = 0`` returns ``w`` unchanged.

    Raises:
        ValueError: ``perturbation`` is negative.
    """
    if perturbation < 0:
        raise ValueError("perturbation must be >= 0")
    w = base_weights(table, weight)
    if perturbation == 0:
        return w
    rng = np.random.default_rng(secrets.randbits(128) if seed is None else seed)
    return w * (1.0 + perturbation * rng.random(len(w)))
