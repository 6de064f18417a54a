"""A table as the suppression stage sees it: cells, bounds, and additive relations.

Cells are keyed by tuples over the dimensions of the protected table. The marker
:data:`TOTAL` in position ``j`` means "all values of dimension j", which is what
``GROUP BY ROLLUP / CUBE / GROUPING SETS`` produce (``NULL`` with ``GROUPING() = 1``).
Every relation says ``total cell = sum of member cells``:

    for each cell t with TOTAL in position j, and the set M of cells that have the same
    key as t except a concrete (non-TOTAL) value in position j:  a_t = Σ_{m in M} a_m

This covers 1-D tables (grand total = Σ categories), 2-D and 3-D tables with all
marginals (one relation per total cell and per TOTAL position), and hierarchies
written as ROLLUP over nested columns, e.g. ``(year, month)``: ``(y, TOTAL) = Σ_m (y, m)``
and ``(TOTAL, TOTAL) = Σ_y (y, TOTAL)``.

Completeness assumption: a relation is derived whenever the total cell and at least one
member are present, and it asserts that the present members are *all* the non-empty
cells of that total. GROUP BY output guarantees this (an absent group is empty, i.e. 0,
and an attacker knows it); cells of a query filtered on a dimension must not be mixed
into the same key space, or the derived relation is false. :meth:`Table.from_cells`
checks every derived relation against the values and raises if one does not add up.

Cells of different queries over the same protected table live in one key space: one
position per dimension of the table, TOTAL where a query does not group by it. Then two
tables sharing a marginal share those cells, and :func:`union` treats identical keys as
the same variable (linked tables).
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from types import MappingProxyType
from typing import TypeVar

import numpy as np
from scipy import sparse

__all__ = ["TOTAL", "K", "Key", "Margin", "Relation", "Table", "derive_relations", "union"]


class Margin(Enum):
    """Marker for "all values of this dimension" in a cell key."""

    TOTAL = "TOTAL"

    # a member is a singleton, equal only to itself: hash it by identity, in C. Enum's
    # own __hash__ hashes the name in Python, and keys holding TOTAL are hashed millions
    # of times on a large linked problem
    __hash__ = object.__hash__

    def __repr__(self) -> str:
        return "TOTAL"


#: "all values of this dimension" in a cell key
TOTAL = Margin.TOTAL

Key = tuple[Hashable, ...]
#: any key type: mappings are invariant in their keys, so APIs taking a mapping of
#: cells are generic (a ``dict[tuple[str, str], float]`` is not a ``Mapping[Key, float]``)
K = TypeVar("K", bound=Key)
_L = TypeVar("_L", bound=Key)
_U = TypeVar("_U", bound=Key)

#: relative tolerance when checking that relations add up and merged cells agree
_REL_TOL = 1e-9


@dataclass(frozen=True)
class Relation:
    """``total = Σ members``: one additive relation between cells of a table."""

    total: Key
    members: tuple[Key, ...]


def derive_relations(keys: Iterable[Key]) -> tuple[Relation, ...]:
    """Every relation "cell with TOTAL in position j = Σ cells with a concrete value in j
    and the same other positions" whose total cell and at least one member are present.

    Keys of different lengths never relate. Relations come out in a stable order
    (first appearance of the total, then position j).

    Raises:
        ValueError: a key is not a tuple.
    """
    present: dict[Key, None] = {}
    for key in keys:
        if not isinstance(key, tuple):
            raise ValueError(f"cell keys must be tuples, got {key!r}")
        present[key] = None
    members: dict[tuple[Key, int], list[Key]] = {}
    for key in present:
        for j, value in enumerate(key):
            if value is TOTAL:
                continue
            parent = (*key[:j], TOTAL, *key[j + 1 :])
            if parent in present:
                members.setdefault((parent, j), []).append(key)
    order = {key: i for i, key in enumerate(present)}
    ordered = sorted(members, key=lambda pj: (order[pj[0]], pj[1]))
    return tuple(Relation(total, tuple(members[(total, j)])) for total, j in ordered)


@dataclass(frozen=True)
class Table:
    """Cells with values ``a_i``, bounds ``lb_i <= a_i <= ub_i``, and relations.

    Build with :meth:`from_cells`. Bounds are what an attacker knows a priori (default
    ``[0, +inf)``: magnitudes are non-negative); signed measures need explicit bounds.
    """

    keys: tuple[Key, ...]
    values: tuple[float, ...]
    lower: tuple[float, ...]
    upper: tuple[float, ...]
    relations: tuple[Relation, ...]
    _index: dict[Key, int] = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        n = len(self.keys)
        if not len(self.values) == len(self.lower) == len(self.upper) == n:
            raise ValueError("keys, values, lower and upper must have the same length")
        index = {key: i for i, key in enumerate(self.keys)}
        if len(index) != n:
            raise ValueError("cell keys must be unique")
        object.__setattr__(self, "_index", index)
        for key, a, lo, hi in zip(self.keys, self.values, self.lower, self.upper, strict=True):
            if math.isnan(a) or math.isinf(a):
                raise ValueError(f"cell {key!r}: value must be finite")
            if not lo <= a <= hi:
                raise ValueError(f"cell {key!r}: value outside its bounds; widen the bounds")
        for relation in self.relations:
            for k in (relation.total, *relation.members):
                if k not in index:
                    raise ValueError(f"relation of {relation.total!r} names unknown cell {k!r}")
            total = self.values[index[relation.total]]
            parts = [self.values[index[m]] for m in relation.members]
            scale = max(1.0, abs(total), math.fsum(abs(p) for p in parts))
            if abs(total - math.fsum(parts)) > _REL_TOL * scale:
                raise ValueError(
                    f"cell {relation.total!r} is not the sum of its members; a table must list "
                    "every non-empty cell of each grouping (no filtered queries in one key space)"
                )

    @classmethod
    def from_cells(
        cls,
        values: Mapping[K, float],
        *,
        lower: Mapping[_L, float] | None = None,
        upper: Mapping[_U, float] | None = None,
        relations: Iterable[Relation] | None = None,
    ) -> Table:
        """A table of ``values``; relations derived from the keys unless given.

        ``lower`` / ``upper`` override the default bounds ``0`` / ``+inf`` per cell.

        Raises:
            ValueError: a value is outside its bounds or not finite, a key is not a
                tuple, or a relation does not add up (see the module docstring).
        """
        keys = tuple(values)
        lo: dict[Key, float] = {k: v for k, v in (lower or {}).items()}
        hi: dict[Key, float] = {k: v for k, v in (upper or {}).items()}
        rels = derive_relations(keys) if relations is None else tuple(relations)
        return cls(
            keys=keys,
            values=tuple(float(values[k]) for k in keys),
            lower=tuple(float(lo.get(k, 0.0)) for k in keys),
            upper=tuple(float(hi.get(k, math.inf)) for k in keys),
            relations=rels,
        )

    def __len__(self) -> int:
        return len(self.keys)

    def __contains__(self, key: object) -> bool:
        return key in self._index

    def index(self, key: Key) -> int:
        """Position of ``key``.

        Raises:
            ValueError: ``key`` is not a cell of this table.
        """
        try:
            return self._index[key]
        except KeyError:
            raise ValueError(f"{key!r} is not a cell of this table") from None

    def value(self, key: Key) -> float:
        """Value of the cell ``key``. Raises ValueError for an unknown cell."""
        return self.values[self.index(key)]

    def with_relations(self, extra: Iterable[Relation]) -> Table:
        """This table with more relations (duplicates dropped)."""
        return Table(self.keys, self.values, self.lower, self.upper, _dedupe((*self.relations, *extra)))

    @cached_property
    def matrix(self) -> sparse.csr_matrix:
        """``A`` with one row per relation: +1 at the total, -1 at each member (A a = 0)."""
        rows: list[int] = []
        cols: list[int] = []
        data: list[float] = []
        for r, relation in enumerate(self.relations):
            rows.append(r)
            cols.append(self._index[relation.total])
            data.append(1.0)
            for m in relation.members:
                rows.append(r)
                cols.append(self._index[m])
                data.append(-1.0)
        shape = (len(self.relations), len(self.keys))
        return sparse.csr_matrix((np.array(data), (np.array(rows), np.array(cols))), shape=shape)

    @cached_property
    def csc(self) -> sparse.csc_matrix:
        """:attr:`matrix` by columns (read-only: shared by every solver of this table)."""
        return self.matrix.tocsc()

    @cached_property
    def position(self) -> Mapping[Key, int]:
        """Each key's position (read-only)."""
        return MappingProxyType(self._index)

    @cached_property
    def parents(self) -> dict[int, list[int]]:
        """Per member cell, the totals of the relations it is in (read-only)."""
        parents: dict[int, list[int]] = {}
        for cells in self.relation_cells:
            for m in cells[1:]:
                parents.setdefault(m, []).append(cells[0])
        return parents

    @cached_property
    def lines(self) -> dict[tuple[Key, int], list[int]]:
        """Per (key with position j blanked to None, j): the cells on that line (read-only)."""
        lines: dict[tuple[Key, int], list[int]] = {}
        for i, key in enumerate(self.keys):
            for j in range(len(key)):
                lines.setdefault(((*key[:j], None, *key[j + 1 :]), j), []).append(i)
        return lines

    @cached_property
    def relation_cells(self) -> tuple[tuple[int, ...], ...]:
        """Per relation, the positions of its cells: the total first, then the members."""
        index = self._index
        return tuple((index[r.total], *[index[m] for m in r.members]) for r in self.relations)

    @cached_property
    def arrays(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """``(a, lb, ub)`` as float arrays."""
        return (np.array(self.values), np.array(self.lower), np.array(self.upper))


def _dedupe(relations: Iterable[Relation]) -> tuple[Relation, ...]:
    seen: dict[tuple[Key, frozenset[Key]], Relation] = {}
    for relation in relations:
        seen.setdefault((relation.total, frozenset(relation.members)), relation)
    return tuple(seen.values())


def union(*tables: Table, derive: bool = True) -> Table:
    """One table over the cells of all ``tables``; identical keys are one variable.

    Values of a shared cell must agree; its bounds are intersected. Relations are the
    tables' own plus (``derive=True``) every relation derived from the union of the
    keys, which an attacker holding all the tables can also write down.

    Raises:
        ValueError: a shared cell has different values, or a derived relation does
            not add up (the tables were not computed over the same rows).
    """
    values: dict[Key, float] = {}
    lower: dict[Key, float] = {}
    upper: dict[Key, float] = {}
    for table in tables:
        for key, a, lo, hi in zip(table.keys, table.values, table.lower, table.upper, strict=True):
            if key in values:
                if abs(values[key] - a) > _REL_TOL * max(1.0, abs(a)):
                    raise ValueError(f"cell {key!r} has different values in the linked tables")
                lower[key] = max(lower[key], lo)
                upper[key] = min(upper[key], hi)
            else:
                values[key], lower[key], upper[key] = a, lo, hi
    relations = [r for t in tables for r in t.relations]
    if derive:
        relations.extend(derive_relations(values))
    return Table.from_cells(values, lower=lower, upper=upper, relations=_dedupe(relations))
