"""One growth rule for the history audit's per-atom and per-position arrays: atoms and
basis positions are only ever added, so each array doubles its capacity when it runs
out (amortized O(1) per entry added) instead of being copied on every addition."""

from __future__ import annotations

from typing import Any

import numpy as np
import numpy.typing as npt

__all__ = ["grown"]


def grown(
    array: npt.NDArray[Any], needed: int, fill: int = 0, at_most: int | None = None
) -> npt.NDArray[Any]:
    """``array`` with at least ``needed`` rows: itself when it has them, else a copy with
    ``max(needed, 2 x its rows)`` rows, the new ones set to ``fill`` (same dtype), or
    ``at_most`` rows if fewer (a count known never to pass it, e.g. atoms, never more
    than rows: doubling past it only wastes memory)."""
    if needed <= array.shape[0]:
        return array
    rows = max(needed, 2 * array.shape[0] if at_most is None else min(2 * array.shape[0], at_most))
    out = np.full((rows, *array.shape[1:]), fill, dtype=array.dtype)
    out[: array.shape[0]] = array
    return out
