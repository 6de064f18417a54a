"""A fuzz harness for the guard's SQL front door (issue 18).

``strategies.py`` generates statements (valid, near-valid, hostile, byte-mutated) from the
example policies' tables; ``run.py`` drives them through ``Guard.query`` and, optionally,
through both endpoints of ``guard serve``, and reports internal errors, requests without
a log row and messages that carry a confidential value. ``tests/fuzz`` runs it briefly.
"""
