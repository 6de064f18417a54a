"""statguard: a statistical database guard.

Analysts send aggregate SQL; the guard answers with protected aggregates and refuses
what would disclose a respondent. Start with :meth:`Guard.open`.
"""

from guard.core import Guard
from guard.errors import (
    AccessDenied,
    BackendError,
    BudgetExhausted,
    GuardError,
    PolicyError,
    QueryRefused,
    QueryRejected,
)
from guard.result import ProtectedResult

__all__ = [
    "AccessDenied",
    "BackendError",
    "BudgetExhausted",
    "Guard",
    "GuardError",
    "PolicyError",
    "ProtectedResult",
    "QueryRefused",
    "QueryRejected",
]

__version__ = "0.1.0"
