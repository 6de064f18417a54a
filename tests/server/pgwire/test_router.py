"""The router remembers the queries it sent to the guard, by their PostgreSQL tokens, and
never sends a catalog query to the guard or the guard's queries to the catalog."""

from __future__ import annotations

from guard.server.pgwire.answers import CatalogPlan, GuardPlan, Router, route

GUARDED = "SELECT major, COUNT(*) FROM students GROUP BY major"


def test_a_guard_query_is_remembered_by_its_tokens() -> None:
    router = Router()
    assert router.route(GUARDED) == GuardPlan(GUARDED)
    assert router._guarded  # remembered
    tagged = "/* dashboard 3 */ SELECT major,\n COUNT(*) FROM students GROUP BY major -- x"
    assert router.route(tagged) == GuardPlan(tagged)  # the text as sent goes on
    assert len(router._guarded) == 1


def test_catalog_queries_and_other_tokens_are_routed_anew() -> None:
    router = Router()
    router.route(GUARDED)
    for sql in (
        "SELECT count(*) FROM pg_class",
        "SELECT 1",
        "SELECT version()",
        "SELECT * FROM pg_catalog.pg_type",
    ):
        assert isinstance(router.route(sql), CatalogPlan)
        assert isinstance(router.route(sql), CatalogPlan) and route(sql) == router.route(sql)
    # the same words naming a catalog table are other tokens
    assert isinstance(router.route(GUARDED.replace("students", "pg_class")), CatalogPlan)


def test_texts_that_do_not_parse_are_not_remembered() -> None:
    router = Router()
    assert router.route("SELECT FROM WHERE") == GuardPlan("SELECT FROM WHERE")
    assert not router._guarded


def test_remembered_reads_memory_only() -> None:
    router = Router()
    tagged = GUARDED + " /* request 1 */"
    assert router.remembered(tagged) is None  # not routed yet: a worker routes it
    assert router.route(tagged) == GuardPlan(tagged)
    other = GUARDED + " /* request 2 */"
    assert router.remembered(other) == GuardPlan(other)  # the text as sent goes on
    assert router.remembered(GUARDED) is None  # untagged: another text, not yet seen
    router.route(GUARDED)
    assert router.remembered(GUARDED) == GuardPlan(GUARDED)
    # catalog queries are never remembered: always routed (their tree is handed on)
    router.route("SELECT count(*) FROM pg_class /* request 3 */")
    assert router.remembered("SELECT count(*) FROM pg_class /* request 4 */") is None
    # tokens remembered for a text that does not parse do not make it the guard's
    router.route("SELECT FROM WHERE /* request 5 */")
    assert router.remembered("SELECT FROM WHERE /* request 6 */") is None
