"""History audit core: atoms, the exact span audit (Audit Expert) and overlap control.

Pure and engine-independent: everything works on query sets (surrogate row ids
``_rid``), never on values, so every decision is simulatable. Wiring into the query
path (history store, audit scopes, offline audit) lives elsewhere.
"""

from guard.audit.atoms import AtomPartition, Refinement
from guard.audit.overlap import OverlapControl, OverlapViolation
from guard.audit.rowsets import QuerySet, as_bitmap, as_row_ids
from guard.audit.span import AtomDisclosure, AtomView, SensitivePredicate, SpanAuditor

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
