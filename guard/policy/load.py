"""Load a policy file into the immutable model, strictly.

Every problem is reported as ``file: key.path: message``; unknown keys are errors (a
misspelt protection setting must never be silently ignored).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from guard.engines import ENGINE_NAMES, ENGINES, Engine
from guard.errors import PolicyError
from guard.policy.dimensions import read_derived
from guard.policy.model import (
    Analyst,
    BackendSettings,
    Column,
    Policy,
    Role,
    Source,
    SourceKind,
    Table,
)
from guard.policy.reader import NAME, Reader, did_you_mean
from guard.policy.settings import check_history_groups, check_noise, read_limits, read_noise, read_protection

__all__ = ["load_policy"]


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
    r = Reader(path.name)
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
        protection = read_protection(r, top.get("protection"))
    with r.at("limits"):
        limits = read_limits(r, top.get("limits"))
    with r.at("tables"):
        tables = _tables(r, top["tables"], base)
    with r.at("analysts"):
        analysts = _analysts(r, top["analysts"], tables)
    with r.at("noise"):
        noise = read_noise(r, top.get("noise"), analysts)
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
        check_noise(r, policy)
    check_history_groups(r, policy)
    return policy


def _backend(r: Reader, value: Any, engine: str | None) -> BackendSettings:
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


def _tables(r: Reader, value: Any, base: Path) -> tuple[Table, ...]:
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


def _table(r: Reader, name: str, value: Any, base: Path) -> Table:
    m = r.mapping(
        value,
        ("source", "privacy_unit", "columns", "derived", "description", "noise"),
        required=("source", "privacy_unit", "columns"),
    )
    with r.at("source"):
        source = _source(r, m["source"], base)
    with r.at("columns"):
        columns = _columns(r, m["columns"])
    if "derived" in m:
        with r.at("derived"):
            # appended after the declared columns: a derived dimension is a column of the
            # table as analysts see it
            columns += read_derived(r, m["derived"], columns, base)
    unit = r.name(m["privacy_unit"], "privacy_unit")
    by_name = {c.name.lower(): c for c in columns}
    if unit.lower() not in by_name:
        hint = did_you_mean(unit, [c.name for c in columns])
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


def _source(r: Reader, value: Any, base: Path) -> Source:
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


def _engine_table(r: Reader, value: Any) -> str:
    text = r.string(value, "table")
    parts = text.split(".")
    if not 1 <= len(parts) <= 3 or not all(NAME.fullmatch(p) for p in parts):
        raise r.fail(
            f"{text!r}: name the engine's table as [catalog.][schema.]table with plain identifiers", "table"
        )
    return text


def _columns(r: Reader, value: Any) -> tuple[Column, ...]:
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
                    f"unknown role {role_text!r}{did_you_mean(role_text, roles)}; "
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


def _analysts(r: Reader, value: Any, tables: tuple[Table, ...]) -> tuple[Analyst, ...]:
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
                        raise r.fail(f"unknown table {t!r}{did_you_mean(t, table_names)}", "tables")
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
