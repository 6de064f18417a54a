"""Load a policy file into the immutable model, strictly.

Every problem is reported as ``file: key.path: message``; unknown keys are errors (a
misspelt protection setting must never be silently ignored).
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Iterator
from contextlib import contextmanager
from fractions import Fraction
from pathlib import Path
from typing import Any

import yaml

from guard.engines import ENGINE_NAMES, ENGINES, Engine
from guard.errors import PolicyError
from guard.policy.credentials import ScramVerifier, parse_verifier
from guard.policy.epsilon import as_epsilon
from guard.policy.model import (
    Analyst,
    BackendSettings,
    Column,
    HistoryMode,
    HistorySettings,
    Limits,
    LinkScope,
    NoiseMode,
    NoiseSettings,
    Policy,
    Protection,
    Role,
    Source,
    SourceKind,
    SuppressionSettings,
    Table,
)
from guard.rules import Dominance, MinimumFrequency, PPercent, PriorPosterior, Rule

__all__ = ["load_policy"]

_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


class _Reader:
    """Walks a parsed YAML document, remembering the key path for error messages."""

    def __init__(self, file_name: str) -> None:
        self.file_name = file_name
        self.path: list[str] = []

    def fail(self, message: str, key: str | None = None) -> PolicyError:
        where = ".".join([*self.path, key] if key else self.path) or "(top level)"
        return PolicyError(f"{self.file_name}: {where}: {message}")

    @contextmanager
    def at(self, key: str) -> Iterator[None]:
        self.path.append(key)
        try:
            yield
        finally:
            self.path.pop()

    def mapping(self, value: Any, allowed: tuple[str, ...], required: tuple[str, ...] = ()) -> dict[str, Any]:
        if value is None:
            value = {}
        if not isinstance(value, dict):
            raise self.fail(f"expected a mapping, got {_kind(value)}")
        for key in value:
            if not isinstance(key, str):
                raise self.fail(f"keys must be names, got {key!r}")
            if key not in allowed:
                hint = _did_you_mean(key, allowed)
                raise self.fail(f"unknown key{hint}; allowed keys: {', '.join(allowed)}", key)
        for key in required:
            if key not in value:
                raise self.fail("is required", key)
        return value

    def string(self, value: Any, key: str) -> str:
        if not isinstance(value, str) or not value:
            raise self.fail(f"expected a non-empty string, got {_kind(value)}", key)
        return value

    def name(self, value: Any, key: str) -> str:
        text = self.string(value, key)
        if not _NAME.match(text):
            raise self.fail(f"{text!r} is not a plain SQL name (letters, digits, _)", key)
        return text

    def integer(self, value: Any, key: str, minimum: int) -> int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise self.fail(f"expected a whole number, got {_kind(value)}", key)
        if value < minimum:
            raise self.fail(f"must be at least {minimum}, got {value}", key)
        return value

    def boolean(self, value: Any, key: str) -> bool:
        if not isinstance(value, bool):
            raise self.fail(f"expected true or false, got {_kind(value)}", key)
        return value

    def number(self, value: Any, key: str, minimum: float, maximum: float | None) -> float:
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise self.fail(f"expected a number, got {_kind(value)}", key)
        if value < minimum or (maximum is not None and value > maximum):
            upper = "" if maximum is None else f" and at most {maximum:g}"
            raise self.fail(f"must be at least {minimum:g}{upper}, got {value:g}", key)
        return float(value)

    def choice(self, value: Any, key: str, choices: tuple[str, ...]) -> str:
        if not isinstance(value, str) or value not in choices:
            hint = _did_you_mean(value, choices) if isinstance(value, str) else ""
            raise self.fail(f"expected one of {', '.join(choices)}{hint}", key)
        return value

    def epsilon(self, value: Any, key: str) -> Fraction:
        """A positive ε: a number, or a decimal / fraction string such as "1/3"."""
        if isinstance(value, bool) or not isinstance(value, int | float | str):
            raise self.fail(f"expected a positive number (an ε), got {_kind(value)}", key)
        try:
            return as_epsilon(value)
        except ValueError:
            raise self.fail(f"expected a positive number (an ε), got {value!r}", key) from None

    def verifier(self, value: Any, key: str) -> ScramVerifier:
        """A SCRAM-SHA-256 verifier (never a plain password: the message does not echo it)."""
        if not isinstance(value, str):
            raise self.fail(f"expected a SCRAM-SHA-256 verifier string, got {_kind(value)}", key)
        try:
            return parse_verifier(value)
        except ValueError as error:
            raise self.fail(str(error), key) from None

    def noise_mode(self, value: Any, key: str) -> NoiseMode:
        if isinstance(value, bool):  # YAML reads a bare off / on / no as a boolean
            return NoiseMode.NOISE if value else NoiseMode.OFF
        return NoiseMode(self.choice(value, key, tuple(m.value for m in NoiseMode)))

    def bounds(self, value: Any, key: str) -> tuple[float, float]:
        if (
            not isinstance(value, list)
            or len(value) != 2
            or any(isinstance(v, bool) or not isinstance(v, int | float) for v in value)
        ):
            raise self.fail("expected [low, high]", key)
        low, high = float(value[0]), float(value[1])
        if not low <= high:
            raise self.fail("expected [low, high] with low <= high", key)
        return low, high


def _kind(value: Any) -> str:
    return {dict: "a mapping", list: "a list", str: "a string", type(None): "nothing"}.get(
        type(value), type(value).__name__
    )


def _did_you_mean(word: str, choices: tuple[str, ...] | list[str]) -> str:
    close = difflib.get_close_matches(word, list(choices), n=1)
    return f" (did you mean {close[0]!r}?)" if close else ""


def load_policy(path: str | Path, state: str | Path | None = None, backend: str | None = None) -> Policy:
    """Read and validate a policy file.

    ``state`` overrides the policy's ``state`` folder (the guard's log, history, ledger);
    ``backend`` overrides the policy's engine (duckdb, postgres, spark).
    Relative paths in the file are relative to the file's folder.

    Raises:
        PolicyError: the file is missing, is not UTF-8 YAML, or breaks the schema.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise PolicyError(f"{path}: cannot read the policy file ({exc.strerror})") from None
    except UnicodeDecodeError as exc:
        line = exc.object[: exc.start].count(b"\n") + 1
        raise PolicyError(
            f"{path}: line {line}: the policy file is not UTF-8 text (byte 0x{exc.object[exc.start]:02x} at "
            f"offset {exc.start}): save it as UTF-8"
        ) from None
    try:
        document = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f"line {mark.line + 1}" if mark is not None else "(top level)"
        raise PolicyError(f"{path.name}: {where}: not valid YAML ({getattr(exc, 'problem', exc)})") from None
    return _build(document, path.resolve(), state, backend)


def _build(document: Any, path: Path, state: str | Path | None, engine: str | None = None) -> Policy:
    r = _Reader(path.name)
    base = path.parent
    top = r.mapping(
        document,
        ("name", "description", "state", "backend", "protection", "noise", "limits", "tables", "analysts"),
        required=("tables", "analysts"),
    )
    name = r.string(top.get("name", path.stem), "name")
    if "description" in top:
        r.string(top["description"], "description")
    with r.at("backend"):
        backend = _backend(r, top.get("backend", Engine.DUCKDB.value), engine)
    if state is not None:
        state_dir = Path(state).resolve()
    else:
        state_dir = (base / r.string(top.get("state", f"state/{name}"), "state")).resolve()
    with r.at("protection"):
        protection = _protection(r, top.get("protection"))
    with r.at("limits"):
        limits = _limits(r, top.get("limits"))
    with r.at("tables"):
        tables = _tables(r, top["tables"], base)
    with r.at("analysts"):
        analysts = _analysts(r, top["analysts"], tables)
    with r.at("noise"):
        noise = _noise(r, top.get("noise"), analysts)
    policy = Policy(
        name=name,
        path=path,
        state_dir=state_dir,
        backend=backend,
        tables=tables,
        protection=protection,
        limits=limits,
        analysts=analysts,
        noise=noise,
    )
    if policy.uses_noise:
        _check_noise(r, policy)
    _check_history_groups(r, policy)
    return policy


def _backend(r: _Reader, value: Any, engine: str | None) -> BackendSettings:
    """``backend: duckdb`` or ``backend: {engine: postgres, dsn: ...}``; ``engine``
    (the CLI's --backend) replaces the policy's engine and keeps its options. The engines
    and their options are :data:`guard.engines.ENGINES`."""
    supported = ", ".join(ENGINE_NAMES)
    if isinstance(value, str):
        if engine is None and value not in ENGINE_NAMES:
            raise r.fail(f"unknown backend {value!r}; supported: {supported}")
        value = {"engine": value}
    known = ("engine", *sorted({key for entry in ENGINES.values() for key in entry.options}))
    m = r.mapping(value, known, required=("engine",))
    chosen = engine if engine is not None else r.string(m["engine"], "engine")
    if chosen not in ENGINE_NAMES:
        raise r.fail(f"unknown backend {chosen!r}; supported: {supported}", "engine")
    entry = ENGINES[Engine(chosen)]
    options = {}
    for key, text in m.items():
        if key == "engine":
            continue
        if engine is not None and key not in entry.options:
            continue  # the policy's options for its own engine, overridden on the command line
        if key not in entry.options:
            allowed = ", ".join(entry.options) or "none"
            raise r.fail(f"{key!r} is not an option of the {chosen} backend (its options: {allowed})", key)
        options[key] = r.string(text, key)
    missing = [key for key in entry.required if key not in options]
    if missing:
        raise r.fail(f"the {chosen} backend needs {', '.join(missing)}: add it under backend:")
    for group in entry.exclusive:
        given = [key for key in group if key in options]
        if len(given) > 1:
            raise r.fail(f"give one of {' or '.join(group)} under backend:, not several")
    return BackendSettings(engine=chosen, options=options)


def _noise(r: _Reader, value: Any, analysts: tuple[Analyst, ...]) -> NoiseSettings:
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
    r: _Reader, value: Any, analysts: tuple[Analyst, ...]
) -> tuple[tuple[str, Fraction, tuple[str, ...]], ...]:
    if value is None:
        return ()
    if not isinstance(value, dict):
        raise r.fail(f"expected a mapping of group name to {{budget, members}}, got {_kind(value)}")
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
                    raise r.fail(f"unknown analyst {member!r}{_did_you_mean(member, names)}", "members")
            groups.append((str(group), budget, tuple(members)))
    return tuple(groups)


def _check_noise(r: _Reader, policy: Policy) -> None:
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


def _protection(r: _Reader, value: Any) -> Protection:
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


def _history(r: _Reader, value: Any) -> HistorySettings:
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


def _check_history_groups(r: _Reader, policy: Policy) -> None:
    names = [a.name for a in policy.analysts]
    seen: dict[str, str] = {}
    with r.at("protection"), r.at("history"), r.at("groups"):
        for group, members in policy.protection.history.groups:
            for member in members:
                if member not in names:
                    raise r.fail(f"unknown analyst {member!r}{_did_you_mean(member, names)}", group)
                if member in seen:
                    raise r.fail(
                        f"analyst {member!r} is in groups {seen[member]!r} and {group!r}: "
                        "an analyst feeds exactly one audit state",
                        group,
                    )
                seen[member] = group


_RULE_KEYS = ("threshold", "dominance", "p_percent", "pq")


def _rules(r: _Reader, value: Any) -> tuple[Rule, ...]:
    if value is None:
        return ()
    if not isinstance(value, list):
        raise r.fail(f"expected a list of rules (each one of {', '.join(_RULE_KEYS)}), got {_kind(value)}")
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


def _rule(r: _Reader, kind: str, value: Any) -> Rule:
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


def _suppression(r: _Reader, value: Any) -> SuppressionSettings:
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


def _limits(r: _Reader, value: Any) -> Limits:
    default = Limits()
    m = r.mapping(value, ("max_sql_length", "max_syntax_nodes", "max_in_values"))
    return Limits(
        max_sql_length=r.integer(m.get("max_sql_length", default.max_sql_length), "max_sql_length", 16),
        max_syntax_nodes=r.integer(
            m.get("max_syntax_nodes", default.max_syntax_nodes), "max_syntax_nodes", 8
        ),
        max_in_values=r.integer(m.get("max_in_values", default.max_in_values), "max_in_values", 1),
    )


def _tables(r: _Reader, value: Any, base: Path) -> tuple[Table, ...]:
    if not isinstance(value, dict) or not value:
        raise r.fail("expected a mapping of table name to table settings, with at least one table")
    tables = []
    for table_name, spec in value.items():
        r.name(table_name, str(table_name))
        with r.at(table_name):
            tables.append(_table(r, table_name, spec, base))
    lowered = [t.name.lower() for t in tables]
    if len(set(lowered)) != len(lowered):
        raise r.fail("table names must differ in more than letter case")
    return tuple(tables)


def _table(r: _Reader, name: str, value: Any, base: Path) -> Table:
    m = r.mapping(
        value,
        ("source", "privacy_unit", "columns", "description", "noise"),
        required=("source", "privacy_unit", "columns"),
    )
    with r.at("source"):
        source = _source(r, m["source"], base)
    with r.at("columns"):
        columns = _columns(r, m["columns"])
    unit = r.name(m["privacy_unit"], "privacy_unit")
    by_name = {c.name.lower(): c for c in columns}
    if unit.lower() not in by_name:
        hint = _did_you_mean(unit, [c.name for c in columns])
        raise r.fail(f"{unit!r} is not a declared column{hint}", "privacy_unit")
    if by_name[unit.lower()].role is not Role.IDENTIFIER:
        raise r.fail(f"the privacy unit {unit!r} must have role identifier", "privacy_unit")
    if not any(c.role is not Role.IDENTIFIER for c in columns):
        raise r.fail("declare at least one dimension or measure column", "columns")
    description = r.string(m["description"], "description") if "description" in m else ""
    return Table(
        name=name,
        source=source,
        privacy_unit=by_name[unit.lower()].name,
        columns=columns,
        description=description,
        noise=r.noise_mode(m["noise"], "noise") if "noise" in m else None,
    )


def _source(r: _Reader, value: Any, base: Path) -> Source:
    kinds = tuple(k.value for k in SourceKind if k is not SourceKind.TABLE)
    m = r.mapping(value, (*kinds, "table"))
    given = [k for k in kinds if k in m]
    if not given and "table" in m:
        # a table of the back-end's own engine, e.g. {table: public.people}
        return Source(kind=SourceKind.TABLE, path=None, table=_engine_table(r, m["table"]))
    if len(given) != 1:
        raise r.fail(
            f"give exactly one of {', '.join(kinds)} (a file path), or table (a table in the engine)"
        )
    kind = SourceKind(given[0])
    file_path = (base / r.string(m[kind.value], kind.value)).resolve()
    table = None
    if kind is SourceKind.DUCKDB:
        table = r.name(m.get("table"), "table") if "table" in m else None
    elif "table" in m:
        raise r.fail("only a duckdb source names a table inside the file", "table")
    return Source(kind=kind, path=file_path, table=table)


def _engine_table(r: _Reader, value: Any) -> str:
    text = r.string(value, "table")
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(_NAME.fullmatch(p) for p in parts):
        raise r.fail(
            f"{text!r}: name the engine's table as [catalog.][schema.]table with plain identifiers", "table"
        )
    return text


def _columns(r: _Reader, value: Any) -> tuple[Column, ...]:
    if not isinstance(value, dict) or not value:
        raise r.fail("expected a mapping of column name to {role: ...}")
    roles = tuple(role.value for role in Role)
    columns = []
    for column_name, spec in value.items():
        r.name(column_name, str(column_name))
        with r.at(column_name):
            m = r.mapping(spec, ("role", "bounds", "description", "noise"), required=("role",))
            role_text = r.string(m["role"], "role")
            if role_text not in roles:
                raise r.fail(
                    f"unknown role {role_text!r}{_did_you_mean(role_text, roles)}; "
                    f"expected one of {', '.join(roles)}",
                    "role",
                )
            role = Role(role_text)
            bounds = None
            if role is Role.MEASURE:
                if "bounds" not in m:
                    raise r.fail("expected [low, high]: every measure declares its bounds", "bounds")
                bounds = r.bounds(m["bounds"], "bounds")
            elif "bounds" in m:
                raise r.fail("only measures have bounds", "bounds")
            description = r.string(m["description"], "description") if "description" in m else ""
            noise = None
            if "noise" in m:
                if role is not Role.MEASURE:
                    raise r.fail("only measures have a noise mode of their own", "noise")
                noise = r.noise_mode(m["noise"], "noise")
            columns.append(Column(column_name, role, bounds, description, noise))
    lowered = [c.name.lower() for c in columns]
    if len(set(lowered)) != len(lowered):
        raise r.fail("column names must differ in more than letter case")
    return tuple(columns)


def _analysts(r: _Reader, value: Any, tables: tuple[Table, ...]) -> tuple[Analyst, ...]:
    if not isinstance(value, dict) or not value:
        raise r.fail("expected a mapping of analyst name to settings, with at least one analyst")
    table_names = [t.name for t in tables]
    analysts = []
    for analyst_name, spec in value.items():
        r.string(analyst_name, str(analyst_name))
        with r.at(str(analyst_name)):
            m = r.mapping(spec, ("tables", "description", "noise", "budget", "password"))
            allowed: tuple[str, ...] | None = None
            if "tables" in m:
                if not isinstance(m["tables"], list) or not all(isinstance(t, str) for t in m["tables"]):
                    raise r.fail("expected a list of table names", "tables")
                for t in m["tables"]:
                    if t.lower() not in (n.lower() for n in table_names):
                        raise r.fail(f"unknown table {t!r}{_did_you_mean(t, table_names)}", "tables")
                allowed = tuple(m["tables"])
            description = r.string(m["description"], "description") if "description" in m else ""
            analysts.append(
                Analyst(
                    str(analyst_name),
                    allowed,
                    description,
                    noise=r.noise_mode(m["noise"], "noise") if "noise" in m else None,
                    budget=r.epsilon(m["budget"], "budget") if "budget" in m else None,
                    password=r.verifier(m["password"], "password") if "password" in m else None,
                )
            )
    return tuple(analysts)
