"""The online history audit: no answer may complete a disclosure with earlier answers.

The core is pure and engine-independent: it works on query sets (surrogate row ids
``_rid``), never on values, so every decision is simulatable.

    atoms       the partition of rows into atoms, refined as queries arrive
    span        the exact span audit (Audit Expert) modulo a secret prime
    pairs       its search for unions of two atoms; steps: what one query would do
    exposure    the exact basis rows after a query; groups: the search for any
                combination of answers touching fewer than k privacy units
    sensitive   the finest cells the rules flag: exact and interval protection
    lineage, universe   rows across data versions: identities, pieces, the row space
    findings    what a span auditor reports (offline audit, forensics)
    basis, modular, released   the inverse basis, arithmetic mod p, stored query sets
    overlap     the overlap control; intervals: the partial-disclosure LP
    finest      query sets read from the backend as finest cells; keys: cell names
    screen      stage 6 of the query path: the checks on one answer

The offline log audit (``guard.audit``) replays logs through the same core.
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
