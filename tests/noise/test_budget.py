"""The ledger: exact limits, clear refusals, persist-before-commit, and no overspending."""

from __future__ import annotations

import threading
import time
from fractions import Fraction

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from guard.errors import BudgetExhausted, codes_for
from guard.noise.budget import BudgetExceeded, Ledger
from guard.state.records import LedgerEntry


def _ledger(**overrides: object) -> Ledger:
    arguments: dict[str, object] = {"global_limit": 100, "analyst_limits": {"alice": 10, "bob": 10}}
    arguments.update(overrides)
    return Ledger(**arguments)  # type: ignore[arg-type]


def test_charges_add_up_exactly() -> None:
    ledger = _ledger(analyst_limits={"alice": 1})
    for _ in range(10):
        ledger.charge("alice", 0.1)
    assert ledger.spent("alice") == 1
    assert ledger.remaining("alice") == 0
    with pytest.raises(BudgetExceeded):
        ledger.charge("alice", 0.1)


def test_refusal_says_what_is_left_and_changes_nothing() -> None:
    ledger = _ledger()
    ledger.charge("alice", 9.5)
    with pytest.raises(
        BudgetExhausted, match=r"analyst 'alice' is exhausted: ε = 0.5 of 10 left, .* needs ε = 1"
    ) as info:
        ledger.charge("alice", 1)
    refusal = info.value
    assert isinstance(refusal, BudgetExceeded)
    assert (refusal.account, refusal.requested, refusal.remaining) == (
        "analyst:alice",
        Fraction(1),
        Fraction(1, 2),
    )
    assert ledger.spent("alice") == Fraction(19, 2)
    assert len(ledger.entries()) == 1
    assert codes_for(refusal) == codes_for(BudgetExhausted)


def test_global_budget_covers_collusion_without_naming_others() -> None:
    ledger = _ledger(global_limit=12)
    ledger.charge("alice", 10)
    with pytest.raises(BudgetExceeded, match="the global privacy budget, shared with other analysts") as info:
        ledger.charge("bob", 3)
    assert "alice" not in info.value.message
    assert ledger.remaining("bob") == 2
    assert ledger.remaining() == 2


def test_group_budget() -> None:
    ledger = _ledger(groups={"ward": ("5", ["alice", "bob"])})
    ledger.charge("alice", 3)
    with pytest.raises(BudgetExceeded, match="the group 'ward' privacy budget, shared") as info:
        ledger.charge("bob", 3)
    assert info.value.account == "group:ward"
    assert ledger.remaining("bob") == 2


def test_unknown_analyst_has_no_budget_unless_a_default_is_set() -> None:
    with pytest.raises(BudgetExceeded, match="analyst 'mallory' has no privacy budget"):
        _ledger().charge("mallory", 0.1)
    ledger = _ledger(default_analyst_limit="0.5")
    ledger.charge("mallory", 0.5)
    assert ledger.remaining("mallory") == 0


def test_bad_epsilon_and_limits_are_rejected() -> None:
    with pytest.raises(ValueError, match="epsilon must be > 0"):
        _ledger().charge("alice", 0)
    with pytest.raises(ValueError, match="budget of analyst 'alice' must be > 0"):
        _ledger(analyst_limits={"alice": -1})


def test_persist_runs_before_commit_and_a_failure_charges_nothing() -> None:
    persisted: list[LedgerEntry] = []

    def flaky(entry: LedgerEntry) -> None:
        if entry.note == "disk full":
            raise OSError("disk full")
        persisted.append(entry)

    ledger = _ledger(persist=flaky, clock=lambda: 1234.5)
    first = ledger.charge("alice", 1, note="q1")
    with pytest.raises(OSError):
        ledger.charge("alice", 1, note="disk full")
    second = ledger.charge("alice", 1, note="q3")
    assert persisted == [first, second]
    assert (first.sequence, second.sequence) == (1, 2)
    assert first == LedgerEntry(1, "alice", Fraction(1), 1234.5, "q1")
    assert ledger.spent("alice") == 2


def test_history_is_replayed_and_sequences_continue() -> None:
    history = [LedgerEntry(1, "alice", Fraction(4), 0.0), LedgerEntry(2, "bob", Fraction(1, 3), 0.0)]
    ledger = _ledger(history=history)
    assert ledger.spent("alice") == 4
    assert ledger.spent() == Fraction(13, 3)
    assert ledger.charge("bob", 1).sequence == 3
    assert [e.sequence for e in ledger.entries("bob")] == [2, 3]


def test_a_limit_lowered_below_the_history_leaves_nothing() -> None:
    ledger = _ledger(analyst_limits={"alice": 1}, history=[LedgerEntry(1, "alice", Fraction(4), 0.0)])
    assert ledger.remaining("alice") == 0
    with pytest.raises(BudgetExceeded, match="ε = 0 of 1 left"):
        ledger.charge("alice", 0.1)


def test_sixteen_threads_never_overspend() -> None:
    analysts = [f"a{i}" for i in range(4)]
    persisted: list[LedgerEntry] = []

    def slow_persist(entry: LedgerEntry) -> None:
        time.sleep(0)  # yield inside the critical section to invite interleaving
        persisted.append(entry)

    ledger = Ledger(global_limit=10, analyst_limits=dict.fromkeys(analysts, 4), persist=slow_persist)
    start = threading.Barrier(16)
    refusals = [0] * 16

    def spend(worker: int) -> None:
        start.wait()
        for _ in range(40):
            try:
                ledger.charge(analysts[worker % 4], 0.1)
            except BudgetExceeded:
                refusals[worker] += 1

    threads = [threading.Thread(target=spend, args=(i,)) for i in range(16)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert ledger.spent() == 10  # demand was 64: exactly the global limit is spent
    assert all(ledger.spent(a) <= 4 for a in analysts)
    assert sum(e.epsilon for e in persisted) == 10
    assert persisted == list(ledger.entries())
    assert [e.sequence for e in persisted] == list(range(1, 101))
    assert sum(refusals) == 16 * 40 - 100


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(["alice", "bob", "carol"]), st.fractions(min_value=Fraction(1, 100), max_value=3)
        ),
        max_size=40,
    )
)
def test_budget_is_never_negative_and_accepted_charges_add_up(charges: list[tuple[str, Fraction]]) -> None:
    ledger = _ledger(global_limit=12, analyst_limits={"alice": 5, "bob": 5, "carol": 5})
    accepted: dict[str, Fraction] = {}
    for analyst, eps in charges:
        try:
            ledger.charge(analyst, eps)
        except BudgetExceeded:
            continue
        accepted[analyst] = accepted.get(analyst, Fraction(0)) + eps
    for analyst in ("alice", "bob", "carol"):
        assert ledger.spent(analyst) == accepted.get(analyst, 0) <= 5
        assert ledger.remaining(analyst) >= 0
    assert ledger.spent() == sum(accepted.values(), Fraction(0)) <= 12


def test_a_pending_charge_changes_nothing_until_committed() -> None:
    ledger = Ledger(global_limit=Fraction(1), analyst_limits={"alice": Fraction(1, 2)})
    entry = ledger.pending("alice", Fraction(1, 4))
    assert ledger.entries() == ()
    ledger.commit(entry)
    assert ledger.entries() == (entry,)
    with pytest.raises(ValueError, match="stale"):
        ledger.commit(entry)
    with pytest.raises(BudgetExceeded):
        ledger.pending("alice", Fraction(1, 2))
