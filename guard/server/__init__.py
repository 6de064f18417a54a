"""The network endpoints: PostgreSQL wire protocol (``pgwire``) and HTTP (``http``).

Both are thin: they authenticate an analyst, call :meth:`guard.core.Guard.query` off the
event loop, and translate answers and :class:`guard.errors.GuardError` (its codes come
from ``guard.errors.codes_for``). All protection stays in the library.
"""
