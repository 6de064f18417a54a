"""The ``derived:`` section of a table, read strictly into derived dimensions.

What can be checked without the data is checked here (names, sources, band order, map
files); what needs the source's type (a band of a text column, a map key that is not a
number for a numeric column, a value the map does not cover) is checked when the
snapshot is built (``guard.backends.derive``), with the same ``file: key.path`` form.
"""

from __future__ import annotations

import csv
import math
from dataclasses import replace
from pathlib import Path
from typing import Any

from guard.policy.derivation import Band, Derivation, DerivationKind, MapKey
from guard.policy.model import Column, Role
from guard.policy.reader import Reader, did_you_mean, kind_of

__all__ = ["read_derived"]

_KINDS = ("bands", "map", "map_file", "labels")
#: a map file larger than this is refused: the snapshot computes a map as one CASE
MAX_MAP_ENTRIES = 100_000


def read_derived(r: Reader, value: Any, columns: tuple[Column, ...], base: Path) -> tuple[Column, ...]:
    """The derived dimensions of one table as columns (role dimension), in the policy's
    order. ``columns`` are the table's declared columns; ``base`` the policy's folder."""
    if not isinstance(value, dict) or not value:
        raise r.fail("expected a mapping of derived dimension name to {from: column, bands | map | labels}")
    taken = {c.name.lower(): c for c in columns}
    derived: list[Column] = []
    for name, spec in value.items():
        r.name(name, str(name))
        with r.at(name):
            if name.lower() in taken:
                raise r.fail(
                    f"{name!r} is already a column of the table: give the derived dimension another name"
                )
            m = r.mapping(spec, ("from", "description", "other", *_KINDS), required=("from",))
            source = _source(r, m["from"], columns, {str(n).lower() for n in value})
            given = [k for k in _KINDS if k in m]
            if len(given) != 1:
                raise r.fail(f"give exactly one of {', '.join(_KINDS)} (got {', '.join(given) or 'none'})")
            kind = given[0]
            with r.at(kind):
                derivation = _derivation(r, kind, m[kind], source, base)
            if "other" in m:
                if derivation.kind is DerivationKind.BANDS:
                    raise r.fail(
                        "bands cover every value (the last band has no bound): remove other", "other"
                    )
                derivation = replace(derivation, other=_label(r, m["other"], "other"))
            # by default the catalog's comment on the column says where it comes from
            default = f"{derivation.kind.value} of {source}"
            description = r.string(m["description"], "description") if "description" in m else default
            column = Column(name, Role.DIMENSION, description=description, derived=derivation)
            derived.append(column)
            taken[name.lower()] = column
    return tuple(derived)


def _source(r: Reader, value: Any, columns: tuple[Column, ...], derived: set[str]) -> str:
    name = r.string(value, "from")
    found = next((c for c in columns if c.name.lower() == name.lower()), None)
    if found is None:
        if name.lower() in derived:
            raise r.fail(
                f"{name!r} is itself derived: derive from the declared column it comes from "
                "(map the finest level to each coarser one)",
                "from",
            )
        hint = did_you_mean(name, [c.name for c in columns if c.role is not Role.IDENTIFIER])
        raise r.fail(f"{name!r} is not a declared column{hint}", "from")
    if found.role is Role.IDENTIFIER:
        raise r.fail(
            f"{found.name!r} is an identifier, which no query may read, not even through a derived "
            "dimension: derive from a dimension or a measure",
            "from",
        )
    return found.name


def _derivation(r: Reader, kind: str, value: Any, source: str, base: Path) -> Derivation:
    if kind == "bands":
        return Derivation(DerivationKind.BANDS, source, bands=_bands(r, value))
    if kind == "map_file":
        path = (base / r.string(value, "map_file")).resolve() if isinstance(value, str) else None
        if path is None:
            raise r.fail(f"expected the path of a CSV file with two columns, got {kind_of(value)}")
        return Derivation(DerivationKind.MAP, source, mapping=_map_file(r, path), file=path)
    mapping = _mapping(r, value)
    if kind == "labels":
        seen: dict[str, MapKey] = {}
        for key, label in mapping:
            if label in seen:
                raise r.fail(
                    f"{seen[label]!r} and {key!r} both have the label {label!r}: value labels name one "
                    "code each; use map: for a many-to-one grouping"
                )
            seen[label] = key
        return Derivation(DerivationKind.LABELS, source, mapping=mapping)
    return Derivation(DerivationKind.MAP, source, mapping=mapping)


def _bands(r: Reader, value: Any) -> tuple[Band, ...]:
    example = '[{upto: 17, label: "0-17"}, {upto: 64, label: "18-64"}, {label: "65+"}]'
    if not isinstance(value, list) or len(value) < 2:
        raise r.fail(f"expected a list of at least two bands, lowest first, e.g. {example}")
    bands: list[Band] = []
    labels: set[str] = set()
    for i, item in enumerate(value):
        with r.at(str(i)):
            m = r.mapping(item, ("upto", "below", "label"), required=("label",))
            label = _label(r, m["label"], "label")
            if label in labels:
                raise r.fail(
                    f"the label {label!r} is already used by an earlier band: labels must differ", "label"
                )
            labels.add(label)
            last = i == len(value) - 1
            bounds = [k for k in ("upto", "below") if k in m]
            if last:
                if bounds:
                    raise r.fail(
                        f"the last band takes every larger value: remove {bounds[0]} (add a band after it "
                        "for the values above)",
                        bounds[0],
                    )
                bands.append(Band(label))
                continue
            if len(bounds) != 1:
                raise r.fail("give exactly one of upto (value <= bound) or below (value < bound)")
            key = bounds[0]
            upper = r.number(m[key], key, float("-inf"), None)
            if not math.isfinite(upper):
                raise r.fail("expected a finite number", key)
            inclusive = key == "upto"
            if bands:
                previous = bands[-1]
                assert previous.upper is not None
                # a band after `below: x` may end at `upto: x` (the single value x)
                touching = upper == previous.upper and not previous.inclusive and inclusive
                if upper < previous.upper or (upper == previous.upper and not touching):
                    raise r.fail(
                        f"bands overlap or are out of order: {key} {upper:g} does not lie above the previous "
                        f"band's bound {previous.upper:g}; list bands lowest first with increasing bounds",
                        key,
                    )
            bands.append(Band(label, upper, inclusive))
    return tuple(bands)


def _mapping(r: Reader, value: Any) -> tuple[tuple[MapKey, str], ...]:
    if not isinstance(value, dict) or not value:
        raise r.fail(
            f"expected a mapping of source value to label, e.g. {{North: UK, South: UK}}, "
            f"got {kind_of(value)}"
        )
    entries = []
    for key, label in value.items():
        if key is None or isinstance(key, bool) or not isinstance(key, int | float | str):
            shown = "nothing (NULL)" if key is None else repr(key)
            raise r.fail(
                f"the key {shown} cannot be matched: keys are numbers or texts (quote yes/no/on/off/null; "
                "NULL always stays NULL)"
            )
        with r.at(str(key)):
            entries.append((key, _label(r, label, None)))
    return tuple(entries)


def _label(r: Reader, value: Any, key: str | None) -> str:
    if not isinstance(value, str) or not value:
        hint = (
            f' (quote it: "{value}")'
            if isinstance(value, int | float) and not isinstance(value, bool)
            else ""
        )
        raise r.fail(f"expected a non-empty text label, got {kind_of(value)}{hint}", key)
    return value


def _map_file(r: Reader, path: Path) -> tuple[tuple[MapKey, str], ...]:
    """A CSV file (UTF-8, a header row naming two columns): source value, label."""
    try:
        with path.open(encoding="utf-8", newline="") as handle:
            rows = list(csv.reader(handle))
    except OSError as exc:
        raise r.fail(f"cannot read the map file {path} ({exc.strerror}): fix the path") from None
    except UnicodeDecodeError:
        raise r.fail(f"the map file {path.name} is not UTF-8 text: save it as UTF-8") from None
    except csv.Error as exc:
        raise r.fail(f"the map file {path.name} is not valid CSV ({exc})") from None
    if len(rows) < 2 or len(rows[0]) != 2:
        raise r.fail(
            f"the map file {path.name} needs a header row naming two columns (source value, label) and "
            "at least one row below it"
        )
    if len(rows) - 1 > MAX_MAP_ENTRIES:
        raise r.fail(f"the map file {path.name} has more than {MAX_MAP_ENTRIES:,} rows")
    entries: list[tuple[MapKey, str]] = []
    seen: dict[str, int] = {}
    for line, row in enumerate(rows[1:], start=2):
        if len(row) != 2 or not row[0] or not row[1]:
            raise r.fail(f"{path.name} line {line}: expected two non-empty values (source value, label)")
        if row[0] in seen:
            raise r.fail(
                f"{path.name} line {line}: the value {row[0]!r} is already mapped on line {seen[row[0]]}: "
                "each value has one label"
            )
        seen[row[0]] = line
        entries.append((row[0], row[1]))
    return tuple(entries)
