"""Rows across data versions: the history audit's unknowns when the data changes.

An answer released on one data version stays an equation after the data changes: a
refused difference must not become answerable because one unrelated row was appended.
So the audit's unknowns are not one version's finest cells but *row identities* across
versions, grouped into pieces.

Row identity. A row is identified by a digest of its content — the privacy unit's key
(``_ukey``, a hash of the unit's own id, stable when other units come or go), every
dimension and every measure read from the source (not the derived dimensions, which the
policy may redefine: new bands are a new version of the same rows) — with an occurrence
number among identical rows. A row that is unchanged between versions is the same unknown
in both; an appended row is a new one; a deleted row stays an unknown that later
versions no longer contain; a changed row (any value) ends one unknown and starts
another, so before and after are two values of the same respondent, never one. The
digest is computed by the engine (md5) and only its first 64 bits leave it; measures
never do.

Pieces. Identities with the same finest-cell key (dimension values and NULL-ness of the
measures) in every version they are in, and present in exactly the same versions, form
a piece (a key can change between versions when the policy's derived dimensions do);
each version's finest cell is the union of the pieces with its key present in that version, so every
query set of every version is a union of pieces, and the span audit runs over pieces. A
table with one version has one piece per finest cell (the identity map, built without
reading identities).

Each version's identities are persisted (``audit_lineage`` in the state store) the first
time the history audit uses that version: the next version's rows are compared with them
after the old snapshot is gone.
"""

from __future__ import annotations

import io
from dataclasses import dataclass

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.arrays import distinct, runs

__all__ = ["Lineage", "VersionRows"]

Ids = npt.NDArray[np.int64]
Keys = npt.NDArray[np.uint64]


@dataclass(frozen=True, eq=False)
class VersionRows:
    """One data version's rows: per finest cell its key digest; per row its finest cell,
    content digest and unit key."""

    version: str
    cell_keys: Keys
    row_cell: Ids
    row_hash: Keys
    unit_key: Keys

    def to_blob(self) -> bytes:
        buffer = io.BytesIO()
        np.savez(
            buffer,
            cell_keys=self.cell_keys,
            row_cell=self.row_cell.astype(np.int32 if self.cell_keys.size < 2**31 else np.int64),
            row_hash=self.row_hash,
            unit_key=self.unit_key,
        )
        return buffer.getvalue()

    @classmethod
    def from_blob(cls, version: str, blob: bytes) -> VersionRows:
        with np.load(io.BytesIO(blob)) as arrays:
            return cls(
                version,
                arrays["cell_keys"].astype(np.uint64),
                arrays["row_cell"].astype(np.int64),
                arrays["row_hash"].astype(np.uint64),
                arrays["unit_key"].astype(np.uint64),
            )


class Lineage:
    """The pieces of one table over the versions ``versions`` (oldest first; the last is
    current). ``cells_of(version)`` maps that version's finest-cell ids to pieces."""

    def __init__(self, versions: list[VersionRows]) -> None:
        if not versions:
            raise ValueError("a lineage needs at least one version")
        self.versions = tuple(v.version for v in versions)
        identity_hash, identity_of = _identities(versions)
        rng = np.random.default_rng(0x5EED)  # presence signatures: any fixed distinct keys do
        marks = rng.integers(1, np.iinfo(np.int64).max, size=len(versions), dtype=np.int64)
        n = identity_hash.size
        presence = np.zeros(n, dtype=np.int64)
        key_of = np.zeros(n, dtype=np.uint64)
        unit_of = np.zeros(n, dtype=np.uint64)
        for mark, rows, ids in zip(marks, versions, identity_of, strict=True):
            presence[ids] ^= mark
            # the keys of every version an identity is in, folded: a row's finest cell can
            # change with the policy (new bands of a measure), so one version's key alone
            # could join rows that an earlier version's cells tell apart
            key_of[ids] = _mix(key_of[ids] ^ _mix(rows.cell_keys[rows.row_cell] ^ np.uint64(mark)))
            unit_of[ids] = rows.unit_key
        pieces, piece_of = np.unique(np.stack([key_of.view(np.int64), presence]), axis=1, return_inverse=True)
        piece_of = piece_of.reshape(-1).astype(np.int64)
        self._count = int(pieces.shape[1])
        self._rows = np.bincount(piece_of, minlength=self._count).astype(np.int64)
        _, dense_unit = np.unique(unit_of, return_inverse=True)
        order = np.lexsort((dense_unit.reshape(-1), piece_of))
        bounds = np.searchsorted(piece_of[order], np.arange(self._count + 1))
        units = dense_unit.reshape(-1)[order]
        self._units = [BitMap(units[bounds[i] : bounds[i + 1]].tolist()) for i in range(self._count)]
        self._cells: dict[str, tuple[Ids, Ids]] = {}
        for rows, ids in zip(versions, identity_of, strict=True):
            pairs = np.unique(np.stack([rows.row_cell, piece_of[ids]]), axis=1)
            cell_count = rows.cell_keys.size
            pointer = np.searchsorted(pairs[0], np.arange(cell_count + 1)).astype(np.int64)
            self._cells[rows.version] = (pointer, pairs[1].astype(np.int64))

    @property
    def count(self) -> int:
        """Number of pieces: the audit's row ids are 0 .. count - 1."""
        return self._count

    def cells_of(self, version: str, cells: Ids) -> Ids:
        """The pieces that make up finest cells ``cells`` of ``version`` (sorted)."""
        pointer, pieces = self._cells[version]
        cells = np.asarray(cells, dtype=np.int64)
        if not cells.size:
            return cells
        starts, ends = pointer[cells], pointer[cells + 1]
        lengths = ends - starts
        return distinct(pieces[runs(starts, lengths)])

    def units(self, ids: Ids) -> int:
        return len(self.unit_ids(ids))

    def unit_ids(self, ids: Ids) -> BitMap:
        return BitMap.union(BitMap(), *(self._units[int(i)] for i in ids))

    def rows(self, ids: Ids) -> int:
        return int(self._rows[np.asarray(ids, dtype=np.int64)].sum())

    def row_counts(self) -> Ids:
        view = self._rows.view()
        view.flags.writeable = False
        return view


def _mix(values: Keys) -> Keys:
    """splitmix64's finaliser: a bijection of 64-bit keys that scatters their bits."""
    with np.errstate(over="ignore"):
        z = values.astype(np.uint64)
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _identities(versions: list[VersionRows]) -> tuple[Keys, list[Ids]]:
    """Identity ids (row digest, occurrence number) shared across versions: the distinct
    identities' digests, and per version each row's identity id."""
    keyed = []
    for rows in versions:
        order = np.argsort(rows.row_hash, kind="stable")
        sorted_hash = rows.row_hash[order]
        first = np.searchsorted(sorted_hash, sorted_hash, side="left")
        occurrence = np.empty(order.size, dtype=np.int64)
        occurrence[order] = np.arange(order.size) - first
        keyed.append(np.stack([rows.row_hash.view(np.int64), occurrence]))
    together = np.concatenate(keyed, axis=1)
    distinct, inverse = np.unique(together, axis=1, return_inverse=True)
    inverse = inverse.reshape(-1).astype(np.int64)
    splits = np.cumsum([k.shape[1] for k in keyed])[:-1]
    return distinct[0].view(np.uint64), list(np.split(inverse, splits))
