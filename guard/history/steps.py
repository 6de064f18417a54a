"""What one query would do to a span auditor, computed before anything changes: the
atoms it cuts and, for an independent query, how the basis grows."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import numpy.typing as npt

from guard.history.atoms import Refinement
from guard.history.basis import Border

__all__ = ["Growth", "Ids", "Planned", "Residues", "Step"]

Ids = npt.NDArray[np.int64]
Residues = npt.NDArray[np.int64]


@dataclass(frozen=True, eq=False)
class Growth:
    """What an independent query adds: cut atoms' part weights, the new basis atom, new y."""

    weight_in: Residues  # per cut atom: weight of its inside part (the outside keeps the id)
    weight_out: Residues
    new_atom: int  # c, the atom joining the basis
    border: Border
    y: Residues  # (r + 1) x K after the release
    changed: Ids  # basis positions whose atom is cut or new: "derivable before" says nothing


@dataclass(frozen=True, eq=False)
class Step:
    """The effect one query set would have; computed without changing the auditor."""

    cut: Refinement
    in_query: Ids  # basis positions of the atoms the query covers whole
    growth: Growth | None  # None: implied by earlier releases


@dataclass(frozen=True, eq=False)
class Planned:
    """The first half of a step: how a query set cuts the atoms and whether it is implied.
    Whether it is implied needs no growth (the residual of its weight on the basis is
    enough), so a set asked only to be checked costs no growth when it is implied or cuts
    something (a query set withheld before, asked again)."""

    key: tuple[int, ...]  # (auditor version, size, secret weight sums)
    cut: Refinement
    in_query: Ids
    query_weight: Residues
    basis_weight: Residues
    implied: bool
