"""The privacy-budget ledger: per-analyst, per-group and global limits, never overspent.

A pure in-memory model; the state store plugs in through two seams:

- ``history``: entries read back at start-up, replayed to rebuild what was spent;
- ``persist(entry)``: called inside the ledger's lock, after every limit has been checked
  and before anything changes in memory. If it raises, the charge did not happen (the
  exception propagates and the totals are untouched). When it returns, the charge is
  durable, and only then is the answer allowed to leave: a crash can lose an answer,
  never the record of one.

One lock makes check-and-spend atomic, so concurrent queries cannot jointly pass a limit
that each would pass alone. Amounts are exact rationals (see ``composition``). Charges
are never refunded: an answer computed but not delivered may still have leaked through
timing or logs, so it is paid for.

The global account covers collusion: analysts who pool their answers still face one
limit (docs/ARCHITECTURE.md).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterable, Mapping
from fractions import Fraction

from guard.errors import BudgetExhausted
from guard.noise.composition import format_epsilon
from guard.policy.epsilon import EpsilonLike, as_epsilon
from guard.state.records import LedgerEntry

__all__ = ["BudgetExceeded", "Ledger"]


class BudgetExceeded(BudgetExhausted):
    """A charge would pass a limit. Carries what is left, for the result notes.

    The message names only the analyst's own account, or says that a shared (group or
    global) budget is the binding one; it never describes other analysts' queries.
    """

    def __init__(self, message: str, *, account: str, requested: Fraction, remaining: Fraction) -> None:
        super().__init__(message)
        #: ``"analyst:<name>"``, ``"group:<name>"`` or ``"global"``
        self.account = account
        self.requested = requested
        self.remaining = remaining


class Ledger:
    """Budgets with exact arithmetic and an atomic, persist-before-commit ``charge``.

    ``analyst_limits`` maps analyst → ε budget; analysts not listed get
    ``default_analyst_limit`` or, if that is None, cannot spend at all. ``groups`` maps a
    group name → (limit, member analysts); a member's charge also spends from each of its
    groups. ``global_limit`` bounds the sum of all charges. ``history`` may already spend
    more than a (since lowered) limit: that account then simply has nothing left.
    Raises ``ValueError`` for a limit that is not > 0.
    """

    def __init__(
        self,
        *,
        global_limit: EpsilonLike,
        analyst_limits: Mapping[str, EpsilonLike],
        default_analyst_limit: EpsilonLike | None = None,
        groups: Mapping[str, tuple[EpsilonLike, Iterable[str]]] | None = None,
        history: Iterable[LedgerEntry] = (),
        persist: Callable[[LedgerEntry], None] | None = None,
        clock: Callable[[], float] = time.time,
    ) -> None:
        self._limits: dict[str, Fraction] = {"global": as_epsilon(global_limit, name="global budget")}
        for analyst, limit in analyst_limits.items():
            self._limits[_analyst(analyst)] = as_epsilon(limit, name=f"budget of analyst {analyst!r}")
        self._default = (
            None
            if default_analyst_limit is None
            else as_epsilon(default_analyst_limit, name="default analyst budget")
        )
        self._groups_of: dict[str, list[str]] = {}
        for group, (limit, members) in (groups or {}).items():
            self._limits[_group(group)] = as_epsilon(limit, name=f"budget of group {group!r}")
            for member in members:
                self._groups_of.setdefault(member, []).append(_group(group))
        self._spent: dict[str, Fraction] = {}
        self._entries: list[LedgerEntry] = []
        self._persist = persist
        self._clock = clock
        self._lock = threading.Lock()
        self._last_sequence = 0
        for entry in history:
            self._apply(entry)

    def charge(
        self,
        analyst: str,
        epsilon: EpsilonLike,
        *,
        note: str = "",
        accounts: Mapping[str, Fraction] | None = None,
        persist: Callable[[LedgerEntry], None] | None = None,
    ) -> LedgerEntry:
        """Spend ``epsilon`` from the analyst's, their groups' and the global budget, atomically.

        ``accounts`` overrides the amount for shared accounts (``"global"``,
        ``"group:<name>"``; 0 allowed): what a group or everyone already paid for is not
        paid again. ``persist`` (else the ledger's own) runs before anything changes.
        Returns the committed entry. Raises ``BudgetExceeded`` (a ``BudgetExhausted``)
        and changes nothing if any of those budgets has less than its amount left;
        ``ValueError`` if ε is not > 0 or an override is negative or names no account of
        the analyst; whatever ``persist`` raises, also changing nothing.
        """
        with self._lock:
            entry = self._checked(analyst, as_epsilon(epsilon), note, accounts)
            writer = persist or self._persist
            if writer is not None:
                writer(entry)
            self._apply(entry)
            return entry

    def pending(
        self,
        analyst: str,
        epsilon: EpsilonLike,
        *,
        note: str = "",
        accounts: Mapping[str, Fraction] | None = None,
    ) -> LedgerEntry:
        """The entry :meth:`charge` would commit, checked against every budget but not
        applied: the caller records it durably, then calls :meth:`commit`. Both must
        happen under one lock of the caller's (the guard's release lock), so that no
        other charge comes between.

        Raises:
            BudgetExceeded: as :meth:`charge`, changing nothing.
        """
        with self._lock:
            return self._checked(analyst, as_epsilon(epsilon), note, accounts)

    def commit(self, entry: LedgerEntry) -> LedgerEntry:
        """Apply a :meth:`pending` entry once it is recorded.

        Raises:
            ValueError: another charge was committed since the entry was made.
        """
        with self._lock:
            if entry.sequence != self._last_sequence + 1:
                raise ValueError(f"ledger entry {entry.sequence} is stale: {self._last_sequence} is the last")
            self._apply(entry)
            return entry

    def _checked(
        self, analyst: str, eps: Fraction, note: str, accounts: Mapping[str, Fraction] | None
    ) -> LedgerEntry:
        """The next entry, if every account it draws on can pay (hold the lock)."""
        overrides = tuple(sorted((accounts or {}).items()))
        names = self._accounts(analyst)
        for account, amount in overrides:
            if account not in names[1:] or amount < 0:
                raise ValueError(f"cannot charge {amount} to {account!r} for analyst {analyst!r}")
        entry = LedgerEntry(self._last_sequence + 1, analyst, eps, self._clock(), note, overrides)
        for account in names:
            amount = entry.amount(account)
            left = self._limit(account, analyst) - self._spent.get(account, Fraction(0))
            if amount > left:
                raise self._refusal(account, analyst, amount, max(left, Fraction(0)))
        return entry

    def check(self, analyst: str, epsilon: Fraction, accounts: Mapping[str, Fraction] | None = None) -> None:
        """Raise ``BudgetExceeded`` if ``charge`` with these amounts would; change nothing.

        A pre-check only (the guard draws no noise for a query it cannot pay for):
        ``charge`` checks again under the lock.
        """
        with self._lock:
            for account in self._accounts(analyst):
                amount = (accounts or {}).get(account, epsilon)
                left = self._limit(account, analyst) - self._spent.get(account, Fraction(0))
                if amount > left:
                    raise self._refusal(account, analyst, amount, max(left, Fraction(0)))

    def remaining_after(
        self, analyst: str, epsilon: Fraction, accounts: Mapping[str, Fraction] | None = None
    ) -> Fraction:
        """What ``analyst`` could still spend after a charge of these amounts."""
        with self._lock:
            return max(
                min(
                    self._limit(account, analyst)
                    - self._spent.get(account, Fraction(0))
                    - (accounts or {}).get(account, epsilon)
                    for account in self._accounts(analyst)
                ),
                Fraction(0),
            )

    def groups_of(self, analyst: str) -> tuple[str, ...]:
        """The budget groups ``analyst`` belongs to (accounts ``"group:<name>"``)."""
        return tuple(account.split(":", 1)[1] for account in self._groups_of.get(analyst, ()))

    def balances(self) -> list[tuple[str, Fraction | None, Fraction]]:
        """(account, limit or None when the account has none, spent) for every account
        with a limit or a charge: ``"global"``, ``"group:<name>"``, ``"analyst:<name>"``."""
        with self._lock:
            names = sorted(set(self._limits) | set(self._spent), key=lambda a: (a != "global", a))
            return [(a, self._limits.get(a), self._spent.get(a, Fraction(0))) for a in names]

    def limit_of(self, analyst: str) -> Fraction:
        """The analyst's own budget (0 when they have none)."""
        with self._lock:
            return self._limit(_analyst(analyst), analyst)

    def spent(self, analyst: str | None = None) -> Fraction:
        """ε spent by ``analyst``, or by everyone when None."""
        with self._lock:
            return self._spent.get("global" if analyst is None else _analyst(analyst), Fraction(0))

    def remaining(self, analyst: str | None = None) -> Fraction:
        """ε ``analyst`` can still spend (the tightest of their accounts), or globally when None."""
        with self._lock:
            accounts = ["global"] if analyst is None else self._accounts(analyst)
            left = min(
                self._limit(account, analyst or "") - self._spent.get(account, Fraction(0))
                for account in accounts
            )
            return max(left, Fraction(0))

    def entries(self, analyst: str | None = None) -> tuple[LedgerEntry, ...]:
        """The committed charges, oldest first; only ``analyst``'s when given."""
        with self._lock:
            return tuple(e for e in self._entries if analyst is None or e.analyst == analyst)

    def _accounts(self, analyst: str) -> list[str]:
        return [_analyst(analyst), *self._groups_of.get(analyst, ()), "global"]

    def _limit(self, account: str, analyst: str) -> Fraction:
        limit = self._limits.get(account, self._default if account == _analyst(analyst) else None)
        return Fraction(0) if limit is None else limit

    def _apply(self, entry: LedgerEntry) -> None:
        for account in self._accounts(entry.analyst):
            self._spent[account] = self._spent.get(account, Fraction(0)) + entry.amount(account)
        self._entries.append(entry)
        self._last_sequence = max(self._last_sequence, entry.sequence)

    def _refusal(self, account: str, analyst: str, needed: Fraction, left: Fraction) -> BudgetExceeded:
        need = f"this query needs ε = {format_epsilon(needed)}"
        if account == _analyst(analyst) and account not in self._limits and self._default is None:
            message = (
                f"analyst {analyst!r} has no privacy budget; give them one under the policy's noise budgets"
            )
        elif account == _analyst(analyst):
            message = (
                f"privacy budget of analyst {analyst!r} is exhausted: ε = {format_epsilon(left)} of "
                f"{format_epsilon(self._limit(account, analyst))} left, {need}; "
                f"ask the data steward for more budget"
            )
        else:
            shared = "global" if account == "global" else f"group {account.split(':', 1)[1]!r}"
            message = (
                f"the {shared} privacy budget, shared with other analysts, has ε = {format_epsilon(left)} "
                f"left, {need}; ask the data steward for more budget"
            )
        return BudgetExceeded(message, account=account, requested=needed, remaining=left)


def _analyst(name: str) -> str:
    return f"analyst:{name}"


def _group(name: str) -> str:
    return f"group:{name}"
