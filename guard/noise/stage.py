"""Noise mode of the query path: measure bounded statistics, charge, draw, answer.

The guard calls :meth:`NoiseStage.measure` (one backend query, no lock held), then,
holding its release lock, :meth:`NoiseStage.release`: costs from the cache and what the
analyst (and their budget groups) already received, a budget check, noise for what was
never drawn, and the answer with what the store must record of it. The guard's recorder
writes the ledger charge, the draws, what the analyst received and the log row in one
transaction, then :meth:`NoiseStage.committed` applies them in memory. Only after that
commit does the answer leave, so a crash can lose an answer, never the record or the
charge of one; and no two queries can pass a limit together, since check and charge
happen under one lock.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import hashlib
import hmac
from collections import ChainMap
from collections.abc import Callable
from dataclasses import dataclass
from fractions import Fraction
from typing import Any

from sqlglot import exp

from guard.backends.base import DUCKDB_CAPABILITIES, Capabilities, ResultSet, TableInfo
from guard.noise.budget import Ledger
from guard.noise.release import Prepared, prepare, spent_note
from guard.noise.sampling import RandomSource
from guard.noise.statistics import NoiseConfig, statistics_for
from guard.plan.noisy import noisy_rewrite
from guard.policy.model import Analyst, Policy, Role, Table
from guard.query.shape import QueryShape
from guard.result import ProtectedResult
from guard.state.records import Draw, NoiseWrite
from guard.state.store import StateStore

__all__ = ["NoiseStage", "NoisyRelease"]


@dataclass(frozen=True)
class NoisyRelease:
    """A noisy answer and what the store records with it (charge, draws, received keys)."""

    result: ProtectedResult
    write: NoiseWrite
    analyst: str


class NoiseStage:
    """Ledger, draw cache and received-sets of one guard; thread-safe under the guard's
    release lock (``release`` must be called holding it)."""

    def __init__(
        self, policy: Policy, store: StateStore, secret: bytes, rng: RandomSource | None = None
    ) -> None:
        self.policy = policy
        self.store = store
        self._rng = rng
        noise = policy.noise
        limits: dict[str, Fraction] = {}
        for analyst in policy.analysts:
            limit = analyst.budget or noise.analyst_budget
            if limit is not None:
                limits[analyst.name] = limit
        global_limit = noise.global_budget or sum(limits.values(), Fraction(0)) or Fraction(1)
        self.ledger = Ledger(
            global_limit=global_limit,
            analyst_limits=limits,
            groups={name: (budget, members) for name, budget, members in noise.groups},
            history=store.ledger(),
        )
        self._members = {name: members for name, _, members in noise.groups}
        # picks which cells a unit keeps under the L0 bound: fixed per store, secret
        digest = hmac.new(secret, b"statguard/unit-cells", hashlib.sha256).digest()
        self._salt = int.from_bytes(digest[:4], "big") >> 1
        self._draws: dict[tuple[str, str], dict[str, Draw]] = {}
        self._received: dict[tuple[str, str], dict[str, set[str]]] = {}
        #: per scope: every key anyone received (what the global account has paid for)
        self._ever: dict[tuple[str, str], set[str]] = {}

    def config(self, table: Table, info: TableInfo) -> NoiseConfig:
        noise = self.policy.noise
        bounds = {c.name: c.bounds for c in table.columns if c.role is Role.MEASURE and c.bounds is not None}
        return NoiseConfig(
            epsilon=noise.epsilon_per_query,
            average=noise.average,
            cells_per_unit=noise.cells_per_unit,
            rows_per_cell=noise.rows_per_cell,
            group_threshold=noise.group_threshold,
            delta=noise.delta,
            bounds=bounds,
            types=info.types,
        )

    def measure(
        self,
        shape: QueryShape,
        table: Table,
        info: TableInfo,
        execute: Callable[[exp.Select], ResultSet],
        capabilities: Capabilities = DUCKDB_CAPABILITIES,
    ) -> Prepared:
        """Stages 5-6: the bounded statistics of every cell, and what each would cost."""
        config = self.config(table, info)
        statistics = statistics_for(shape, config.average)
        plan = noisy_rewrite(
            shape,
            info,
            statistics,
            config.bounds,
            cells_per_unit=config.cells_per_unit,
            rows_per_cell=config.rows_per_cell,
            salt=self._salt,
            capabilities=capabilities,
        )
        rows = list(execute(plan.query).rows)
        if plan.grouping_slot is not None and () in shape.levels:
            # the grand total exists whatever the data: the engine gives no row for it
            # when no unit is selected (panel data), so it is added here
            full = (1 << len(shape.group_by)) - 1
            if not any(int(row[plan.grouping_slot]) == full for row in rows):
                total: list[Any] = [None] * (max(plan.grouping_slot, *plan.slots.values()) + 1)
                total[plan.grouping_slot] = full
                rows.append(tuple(total))
        return prepare(shape, rows, plan.key_slots, plan.slots, plan.grouping_slot, config, scope=())

    def release(self, prepared: Prepared, info: TableInfo, who: Analyst) -> NoisyRelease:
        """Stage 6 of noise mode (hold the guard's release lock until :meth:`committed`):
        costs, the budget check, draws for what was never drawn, the answer, and what
        the store must record with it. Nothing in memory changes yet.

        Raises:
            BudgetExhausted: an account has less ε left than the query needs (nothing
                is drawn, charged or released).
        """
        scope = (info.data_version, info.name)
        drawn = self._draws_of(scope)
        received = self._received_of(scope)
        mine = received.get(who.name, set())
        by_group = {
            group: set().union(*(received.get(m, set()) for m in self._members[group]))
            for group in self.ledger.groups_of(who.name)
        }
        costs = prepared.costs(drawn, mine, by_group, self._ever_of(scope))
        accounts = {"global": costs.fresh, **{f"group:{g}": c for g, c in costs.groups.items()}}
        # checked before any noise is drawn: no draw for a query that cannot be paid for
        charge = None
        if costs.analyst > 0:
            charge = self.ledger.pending(who.name, costs.analyst, accounts=accounts)
        fresh = prepared.draw(drawn, self._rng)
        new = sorted(prepared.received_keys - mine)
        left = self.ledger.remaining_after(who.name, costs.analyst, accounts)
        note = spent_note(costs.analyst, left, self.ledger.limit_of(who.name), who.name)
        result = prepared.answer(ChainMap(fresh, drawn), [note])
        write = NoiseWrite(info.data_version, info.name, charge, fresh, new)
        return NoisyRelease(result, write, who.name)

    def committed(self, release: NoisyRelease, log_id: int) -> None:
        """The store recorded ``release`` as log row ``log_id``: memory may say so now
        (the charge is linked to its log row at once, as after a restart)."""
        write = release.write
        if write.charge is not None:
            self.ledger.commit(dataclasses.replace(write.charge, note=f"log {log_id}"))
        scope = (write.data_version, write.table)
        self._draws_of(scope).update(write.draws)
        self._received_of(scope).setdefault(release.analyst, set()).update(write.received)
        self._ever_of(scope).update(write.received)

    def report(self, analyst: str | None = None) -> dict[str, Any]:
        """Budgets spent and left, and every charge (only ``analyst``'s, and only their
        own and shared accounts, when given): what ``guard budget`` shows."""
        groups = set(self.ledger.groups_of(analyst)) if analyst is not None else None
        accounts = []
        for account, limit, spent in self.ledger.balances():
            kind, _, name = account.partition(":")
            if analyst is not None and not (
                account == "global"
                or (kind == "analyst" and name == analyst)
                or (kind == "group" and name in (groups or ()))
            ):
                continue
            left = None if limit is None else max(limit - spent, Fraction(0))
            accounts.append(
                {
                    "account": account,
                    "limit": None if limit is None else _exact(limit),
                    "spent": _exact(spent),
                    "remaining": None if left is None else _exact(left),
                }
            )
        log = {record["id"]: record["sql"] for record in self.store.log(analyst=analyst)}
        charges = []
        for entry in self.ledger.entries(analyst):
            log_id = int(entry.note.split()[-1]) if entry.note.startswith("log ") else None
            charges.append(
                {
                    "sequence": entry.sequence,
                    "time": dt.datetime.fromtimestamp(entry.at, dt.UTC).isoformat(timespec="seconds"),
                    "analyst": entry.analyst,
                    "epsilon": _exact(entry.epsilon),
                    "global": _exact(entry.amount("global")),
                    "log_id": log_id,
                    "sql": log.get(log_id) if log_id is not None else None,
                }
            )
        return {"accounts": accounts, "charges": charges}

    def _draws_of(self, scope: tuple[str, str]) -> dict[str, Draw]:
        if scope not in self._draws:
            self._draws[scope] = self.store.noise_draws(*scope)
        return self._draws[scope]

    def _ever_of(self, scope: tuple[str, str]) -> set[str]:
        if scope not in self._ever:
            self._ever[scope] = set().union(*self._received_of(scope).values())
        return self._ever[scope]

    def _received_of(self, scope: tuple[str, str]) -> dict[str, set[str]]:
        if scope not in self._received:
            self._received[scope] = self.store.noise_received(*scope)
        return self._received[scope]


def _exact(value: Fraction) -> dict[str, Any]:
    """An ε for reports: exact ("1/3") and as a number."""
    return {"exact": str(value), "value": float(value)}
