"""The online history audit: no answer may complete a disclosure with earlier answers.

The core (atoms, the exact span audit after Audit Expert, overlap control) is pure and
engine-independent; ``finest`` reads query sets from the backend and ``screen`` wires
the checks into the query path (stage 6).

Pure and engine-independent: everything works on query sets (surrogate row ids
``_rid``), never on values, so every decision is simulatable. Wiring into the query
path is ``screen``; the offline log audit (``guard.audit``) replays logs through the
same core.
"""

from guard.history.atoms import AtomPartition, Refinement
from guard.history.overlap import OverlapControl, OverlapViolation
from guard.history.rowsets import QuerySet, as_bitmap, as_row_ids
from guard.history.span import AtomDisclosure, AtomView, SensitivePredicate, SpanAuditor

__all__ = [
    "AtomDisclosure",
    "AtomPartition",
    "AtomView",
    "OverlapControl",
    "OverlapViolation",
    "QuerySet",
    "Refinement",
    "SensitivePredicate",
    "SpanAuditor",
    "as_bitmap",
    "as_row_ids",
]
