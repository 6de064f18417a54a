"""Cell protection of one answer: sensitivity rules, primary and secondary suppression
over the answer and the linked earlier releases, and the LP audit.

* :mod:`~guard.protection.keys` — the key space where cells of different answers meet;
* :mod:`~guard.protection.sensitivity` — the verdict of the rules on one cell;
* :mod:`~guard.protection.linking` — the earlier releases an answer is protected with;
* :mod:`~guard.protection.relations` — additive relations between patterns of keys;
* :mod:`~guard.protection.decide` — which cells to withhold, and why;
* :mod:`~guard.protection.answer` — the protected answer: rows, flags, order, notes;
* :mod:`~guard.protection.explain` — each withheld cell's interval, for data stewards.
"""
