"""The row space of one table's audit states at the current data version.

With one data version the audit's row ids are that version's finest cells. Once the
table has changed, they are the pieces of its lineage (``lineage.py``): every version's
released query sets map onto them, so earlier answers keep constraining new ones.
"""

from __future__ import annotations

from concurrent.futures import Executor, Future
from dataclasses import dataclass
from typing import Protocol

import numpy as np
import numpy.typing as npt
from pyroaring import BitMap

from guard.backends.base import Backend
from guard.history.boxes import BoxCodes
from guard.history.finest import FinestCells
from guard.history.lineage import Lineage, VersionRows
from guard.history.rowsets import as_row_ids

__all__ = ["AuditCells", "HistoryStore", "Universe", "universe"]

Ids = npt.NDArray[np.int64]


class AuditCells(Protocol):
    """Units and rows of sets of the audit's row ids."""

    @property
    def count(self) -> int: ...

    def units(self, ids: Ids) -> int: ...

    def unit_ids(self, ids: Ids) -> BitMap: ...

    def rows(self, ids: Ids) -> int: ...

    def row_counts(self) -> Ids:
        """Rows of every audit row id (a read-only view)."""
        ...


class HistoryStore(Protocol):
    """What the history audit persists (``guard.state.store.StateStore``)."""

    def audit_sets(self, table: str, space: str, scope: str) -> list[tuple[str, bytes, float | None]]: ...

    def lineage(self, table: str) -> list[tuple[str, bytes]]: ...

    def add_lineage(self, table: str, data_version: str, identities: bytes) -> None: ...


@dataclass(frozen=True, eq=False)
class Universe:
    """``key`` names the versions it spans (a state built on another key is stale)."""

    key: tuple[str, ...]
    cells: AuditCells
    current: str
    lineage: Lineage | None
    #: the current version's identities, being stored in the background (None: stored)
    storing: Future[None] | None = None
    #: the rows' dimension values, when the rows are one version's finest cells (``boxes.py``)
    boxes: BoxCodes | None = None

    def ready(self) -> None:
        """Wait until the current version's identities are stored: before anything released
        on it is logged (raises what storing them raised)."""
        if self.storing is not None:
            self.storing.result()

    def ids(self, version: str, finest: Ids) -> Ids | None:
        """The audit's row ids of finest cells ``finest`` of ``version``; None for a version
        whose identities were never stored (released before versions were tracked)."""
        if self.lineage is None:
            return finest if version == self.current else None
        if version not in self.lineage.versions:
            return None
        return self.lineage.cells_of(version, finest)

    def stored(self, version: str, cells: bytes) -> Ids | None:
        """:meth:`ids` of a set as the store keeps it (``audit_sets``: a serialized bitmap
        of ``version``'s finest cells), sorted."""
        return self.ids(version, as_row_ids(BitMap.deserialize(cells)))


def universe(finest: FinestCells, backend: Backend, store: HistoryStore, background: Executor) -> Universe:
    """The universe of ``finest``'s table at its version. The first time the audit sees a
    version its identities are stored: in ``background`` when the table has no other
    version (nothing needs them before the next change), at once otherwise."""
    version = finest.data_version
    stored = store.lineage(finest.table)
    if version not in {v for v, _ in stored}:

        def keep() -> bytes:
            blob = finest.identities(backend).to_blob()
            store.add_lineage(finest.table, version, blob)
            return blob

        def keep_only() -> None:
            keep()

        if not stored:
            return Universe((version,), finest, version, None, background.submit(keep_only), finest.box_codes)
        stored.append((version, keep()))
    if len(stored) == 1:
        return Universe((version,), finest, version, None, boxes=finest.box_codes)
    lineage = Lineage([VersionRows.from_blob(v, b) for v, b in stored])
    return Universe(lineage.versions, lineage, version, lineage)
