"""The protection, history, limits and noise sections of a policy, read strictly, and
what noise mode needs of the rest of the policy."""

from __future__ import annotations

from fractions import Fraction
from typing import Any

from guard.policy.model import (
    Analyst,
    HistoryMode,
    HistorySettings,
    Limits,
    LinkScope,
    NoiseMode,
    NoiseSettings,
    Policy,
    Protection,
    Role,
    SuppressionSettings,
)
from guard.policy.reader import Reader, did_you_mean, kind_of
from guard.rules import Dominance, MinimumFrequency, PPercent, PriorPosterior, Rule

__all__ = ["check_history_groups", "check_noise", "read_limits", "read_noise", "read_protection"]

_RULE_KEYS = ("threshold", "dominance", "p_percent", "pq")


def read_noise(r: Reader, value: Any, analysts: tuple[Analyst, ...]) -> NoiseSettings:
    default = NoiseSettings()
    m = r.mapping(
        value,
        ("mode", "epsilon_per_query", "average", "contribution", "group_threshold", "delta", "budgets"),
    )
    mode = r.noise_mode(m.get("mode", default.mode.value), "mode")
    epsilon = r.epsilon(m.get("epsilon_per_query", 1), "epsilon_per_query")
    average = r.choice(m.get("average", default.average), "average", ("ratio", "clamped_mean"))
    with r.at("contribution"):
        c = r.mapping(m.get("contribution"), ("cells_per_unit", "rows_per_cell"))
        cells = r.integer(c.get("cells_per_unit", default.cells_per_unit), "cells_per_unit", 1)
        rows = r.integer(c.get("rows_per_cell", default.rows_per_cell), "rows_per_cell", 1)
    threshold = None
    if m.get("group_threshold") is not None:
        threshold = r.integer(m["group_threshold"], "group_threshold", 1)
    delta = r.number(m.get("delta", default.delta), "delta", 0.0, 0.5)
    if delta == 0:
        raise r.fail("must be > 0 (use group_threshold for a fixed threshold)", "delta")
    with r.at("budgets"):
        b = r.mapping(m.get("budgets"), ("per_analyst", "global", "groups"))
        per_analyst = r.epsilon(b["per_analyst"], "per_analyst") if "per_analyst" in b else None
        global_budget = r.epsilon(b["global"], "global") if "global" in b else None
        with r.at("groups"):
            groups = _budget_groups(r, b.get("groups"), analysts)
    return NoiseSettings(
        mode=mode,
        epsilon_per_query=epsilon,
        average=average,
        cells_per_unit=cells,
        rows_per_cell=rows,
        group_threshold=threshold,
        delta=delta,
        analyst_budget=per_analyst,
        global_budget=global_budget,
        groups=groups,
    )


def _budget_groups(
    r: Reader, value: Any, analysts: tuple[Analyst, ...]
) -> tuple[tuple[str, Fraction, tuple[str, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise r.fail(f"expected a mapping of group name to {{budget, members}}, got {kind_of(value)}")
    names = [a.name for a in analysts]
    groups = []
    for group, spec in value.items():
        r.string(group, str(group))
        with r.at(str(group)):
            m = r.mapping(spec, ("budget", "members"), required=("budget", "members"))
            budget = r.epsilon(m["budget"], "budget")
            members = m["members"]
            if not isinstance(members, list) or not members or not all(isinstance(x, str) for x in members):
                raise r.fail("expected a non-empty list of analyst names", "members")
            for member in members:
                if member not in names:
                    raise r.fail(f"unknown analyst {member!r}{did_you_mean(member, names)}", "members")
            groups.append((str(group), budget, tuple(members)))
    return tuple(groups)


def check_noise(r: Reader, policy: Policy) -> None:
    """What noise mode needs of the rest of the policy, checked once at load."""
    noise = policy.noise
    narrow = [
        f"{t.name}.{c.name}"
        for t in policy.tables
        for c in t.columns
        if c.noise is None and c.protection is NoiseMode.NOISE
    ]
    for analyst in policy.analysts:
        if analyst.budget is None and noise.analyst_budget is None:
            with r.at("analysts"), r.at(analyst.name):
                if narrow:
                    raise r.fail(
                        f"the measure {narrow[0]} has a range at most 1 wide (a 0/1 flag) and is answered "
                        "with noise, because exact sums of such a measure over enough overlapping groups "
                        "reveal every value: give analysts a privacy budget (noise.budgets.per_analyst, or "
                        "a budget on the analyst), or declare the measure with noise: off to answer it "
                        "exactly (policies/README.md, narrow measures)",
                        "budget",
                    )
                raise r.fail(
                    "noise mode is used but this analyst has no privacy budget: set noise.budgets."
                    "per_analyst, or a budget on the analyst",
                    "budget",
                )
    for table in policy.tables:
        for column in table.columns:
            if column.role is Role.MEASURE and column.bounds is not None:
                low, high = column.bounds
                if not low < high:
                    with r.at("tables"), r.at(table.name), r.at("columns"), r.at(column.name):
                        raise r.fail(
                            "noise mode needs low < high: the noise scale is computed from the bounds",
                            "bounds",
                        )


def read_protection(r: Reader, value: Any) -> Protection:
    m = r.mapping(value, ("min_query_set_size", "allow_full_population", "rules", "suppression", "history"))
    default = Protection()
    k = r.integer(m.get("min_query_set_size", default.min_query_set_size), "min_query_set_size", 1)
    full = r.boolean(m.get("allow_full_population", default.allow_full_population), "allow_full_population")
    with r.at("rules"):
        rules = _rules(r, m.get("rules"))
    with r.at("suppression"):
        suppression = _suppression(r, m.get("suppression"))
    with r.at("history"):
        history = _history(r, m.get("history"))
    return Protection(
        min_query_set_size=k,
        allow_full_population=full,
        rules=rules,
        suppression=suppression,
        history=history,
    )


def _history(r: Reader, value: Any) -> HistorySettings:
    m = r.mapping(value, ("audit", "k", "max_overlap", "tolerance", "groups"))
    audit = m.get("audit", HistoryMode.EXACT.value)
    if isinstance(audit, bool):  # YAML reads a bare off as false
        audit = HistoryMode.EXACT.value if audit else HistoryMode.OFF.value
    mode = HistoryMode(r.choice(audit, "audit", tuple(a.value for a in HistoryMode)))
    k = r.integer(m["k"], "k", 1) if m.get("k") is not None else None
    overlap = r.integer(m["max_overlap"], "max_overlap", 0) if m.get("max_overlap") is not None else None
    tolerance = r.number(m["tolerance"], "tolerance", 0.0, 1.0) if m.get("tolerance") is not None else None
    groups: list[tuple[str, tuple[str, ...]]] = []
    raw = m.get("groups") or {}
    if not isinstance(raw, dict):
        raise r.fail("expected a mapping of group name to a list of analysts", "groups")
    with r.at("groups"):
        for group, members in raw.items():
            r.name(group, str(group))
            if not isinstance(members, list) or not members or not all(isinstance(a, str) for a in members):
                raise r.fail("expected a non-empty list of analyst names", str(group))
            groups.append((group, tuple(members)))
    return HistorySettings(mode, k, overlap, tolerance, tuple(groups))


def check_history_groups(r: Reader, policy: Policy) -> None:
    names = [a.name for a in policy.analysts]
    seen: dict[str, str] = {}
    with r.at("protection"), r.at("history"), r.at("groups"):
        for group, members in policy.protection.history.groups:
            for member in members:
                if member not in names:
                    raise r.fail(f"unknown analyst {member!r}{did_you_mean(member, names)}", group)
                if member in seen:
                    raise r.fail(
                        f"analyst {member!r} is in groups {seen[member]!r} and {group!r}: "
                        "an analyst feeds exactly one audit state",
                        group,
                    )
                seen[member] = group


def _rules(r: Reader, value: Any) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise r.fail(f"expected a list of rules (each one of {', '.join(_RULE_KEYS)}), got {kind_of(value)}")
    rules: list[Rule] = []
    for position, item in enumerate(value):
        with r.at(str(position)):
            m = r.mapping(item, _RULE_KEYS)
            if len(m) != 1:
                raise r.fail(f"each list item names exactly one rule: one of {', '.join(_RULE_KEYS)}")
            ((kind, settings),) = m.items()
            with r.at(kind):
                rules.append(_rule(r, kind, settings))
    names = [rule.name for rule in rules]
    if len(set(names)) != len(names):
        raise r.fail("a rule is listed twice with the same parameters")
    return tuple(rules)


def _rule(r: Reader, kind: str, value: Any) -> Rule:
    if kind == "threshold":
        if isinstance(value, int) and not isinstance(value, bool):
            value = {"n": value}
        m = r.mapping(value, ("n", "protection", "floor"), required=("n",))
        fraction = r.number(m.get("protection", 0.1), "protection", 0.0, None)
        floor = r.number(m.get("floor", 0.0), "floor", 0.0, None)
        if fraction == 0 and floor == 0:
            raise r.fail("protection and floor cannot both be 0: a sensitive cell would get no interval")
        return MinimumFrequency(r.integer(m["n"], "n", 1), fraction=fraction, floor=floor)
    if kind == "dominance":
        m = r.mapping(value, ("n", "k"), required=("n", "k"))
        k = r.number(m["k"], "k", 0.0, 1.0)
        if k == 0:
            raise r.fail("must be a fraction in (0, 1], e.g. 0.5 for 50 %", "k")
        return Dominance(r.integer(m["n"], "n", 1), k)
    m = r.mapping(value, ("p", "q", "coalition") if kind == "pq" else ("p", "coalition"), required=("p",))
    coalition = r.integer(m.get("coalition", 1), "coalition", 0)
    p = r.number(m["p"], "p", 0.0, 100.0)
    if kind == "p_percent":
        if not 0 < p < 100:
            raise r.fail("must be a percentage strictly between 0 and 100", "p")
        return PPercent(p, coalition)
    if "q" not in m:
        raise r.fail("is required (the prior precision in percent, p < q <= 100)", "q")
    q = r.number(m["q"], "q", 0.0, 100.0)
    if not 0 < p < q:
        raise r.fail("needs 0 < p < q <= 100 (percent)")
    return PriorPosterior(p, q, coalition)


def _suppression(r: Reader, value: Any) -> SuppressionSettings:
    default = SuppressionSettings()
    m = r.mapping(value, ("weight", "method", "optimal_limit", "time_limit", "linked", "audit_limit"))
    return SuppressionSettings(
        weight=r.choice(m.get("weight", default.weight), "weight", ("value", "count")),
        method=r.choice(m.get("method", default.method), "method", ("auto", "optimal", "heuristic")),
        optimal_limit=r.integer(m.get("optimal_limit", default.optimal_limit), "optimal_limit", 0),
        time_limit=r.number(m.get("time_limit", default.time_limit), "time_limit", 0.1, 3600.0),
        audit_limit=r.integer(m.get("audit_limit", default.audit_limit), "audit_limit", 0),
        linked=LinkScope(
            r.choice(m.get("linked", default.linked.value), "linked", tuple(s.value for s in LinkScope))
        ),
    )


def read_limits(r: Reader, value: Any) -> Limits:
    default = Limits()
    m = r.mapping(value, ("max_sql_length", "max_syntax_nodes", "max_in_values"))
    return Limits(
        max_sql_length=r.integer(m.get("max_sql_length", default.max_sql_length), "max_sql_length", 16),
        max_syntax_nodes=r.integer(
            m.get("max_syntax_nodes", default.max_syntax_nodes), "max_syntax_nodes", 8
        ),
        max_in_values=r.integer(m.get("max_in_values", default.max_in_values), "max_in_values", 1),
    )
