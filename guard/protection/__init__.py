"""Cell protection of one answer: sensitivity rules, primary and secondary suppression
over the answer and the linked earlier releases, and the LP audit.

* :mod:`~guard.protection.keys` — the key space where cells of different answers meet;
* :mod:`~guard.protection.sensitivity` — the verdict of the rules on one cell;
* :mod:`~guard.protection.decide` — which cells to withhold, and why.
"""
