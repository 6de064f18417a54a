"""Post-processing: queries computed on protected answers.

A function of a protected answer cannot reveal more than the answer itself (the
post-processing property of every disclosure control the guard applies: suppression
withholds cells, noise is paid for when drawn). So a query whose aggregates are computed
on — ``ROUND(AVG(x), -3)``, ``SUM(x) / COUNT(*)``, ``HAVING``, shares over a window,
subqueries in FROM, CTEs, UNION and joins of aggregate queries — is answered in two
parts:

    plan.py    the inner queries (each a plain aggregate query: ``split.py`` splits a
               SELECT that computes on its own aggregates, ``outer.py`` finds the
               SELECTs that read tables) and the outer query, checked (``allow.py``),
               qualified and graded (``taint.py``)
    run.py     the outer query on the protected answers only, in a fresh locked-down
               in-memory DuckDB; flags carried through (``taint.py``)

``Guard.query`` asks each inner query as its own request (protected, logged and
audited as if asked alone) before the outer query runs.
"""
