"""Derived dimensions in the policy: valid declarations load into derived columns, each
mistake is `file: tables.t.derived.name.key: message` saying what to change."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from guard.errors import PolicyError
from guard.policy.derivation import Band, DerivationKind
from guard.policy.load import load_policy
from guard.policy.model import Role

OVERLAP = [{"upto": 64, "label": "a"}, {"upto": 17, "label": "b"}, {"label": "c"}]
EQUAL = [{"upto": 17, "label": "a"}, {"below": 17, "label": "b"}, {"label": "c"}]
BANDS = [{"upto": 17, "label": "0-17"}, {"upto": 64, "label": "18-64"}, {"label": "65+"}]

BASE: dict[str, Any] = {
    "name": "people",
    "tables": {
        "people": {
            "source": {"csv": "people.csv"},
            "privacy_unit": "pid",
            "columns": {
                "pid": {"role": "identifier"},
                "region": {"role": "dimension"},
                "age": {"role": "dimension"},
                "health": {"role": "dimension"},
                "income": {"role": "measure", "bounds": [0, 1000]},
            },
            "derived": {
                "age_band": {"from": "age", "bands": BANDS, "description": "age in three bands"},
                "country": {"from": "region", "map": {"North": "UK", "South": "UK", "Bavaria": "DE"}},
                "health_label": {"from": "health", "labels": {1: "very poor", 2: "poor"}, "other": "unknown"},
            },
        }
    },
    "analysts": {"alice": {}},
}


def _load(tmp_path: Path, change: Any = None) -> Any:
    document = copy.deepcopy(BASE)
    if change is not None:
        change(document["tables"]["people"])
    path = tmp_path / "people.yaml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return load_policy(path)


def test_valid_declarations_become_derived_dimension_columns(tmp_path: Path) -> None:
    (tmp_path / "regions.csv").write_text("region,country\nNorth,UK\nSouth,UK\n")

    def change(table: dict[str, Any]) -> None:
        table["derived"]["nation"] = {"from": "region", "map_file": "regions.csv", "other": "abroad"}
        table["derived"]["income_band"] = {
            "from": "income",
            "bands": [{"below": 100, "label": "low"}, {"upto": 100, "label": "100"}, {"label": "high"}],
        }

    table = _load(tmp_path, change).table("people")
    derived = ("age_band", "country", "health_label", "nation", "income_band")
    assert table.names() == ("pid", "region", "age", "health", "income", *derived)
    assert table.names(Role.DIMENSION)[-5:] == derived
    assert [c.name for c in table.stored] == ["pid", "region", "age", "health", "income"]
    band = table.column("AGE_BAND")
    assert band.role is Role.DIMENSION and band.description == "age in three bands"
    assert band.derived.kind is DerivationKind.BANDS and band.derived.source == "age"
    assert band.derived.bands == (Band("0-17", 17.0), Band("18-64", 64.0), Band("65+"))
    assert table.column("country").derived.mapping == (("North", "UK"), ("South", "UK"), ("Bavaria", "DE"))
    labels = table.column("health_label").derived
    assert labels.kind is DerivationKind.LABELS and labels.mapping == ((1, "very poor"), (2, "poor"))
    assert labels.other == "unknown"
    nation = table.column("nation").derived
    assert nation.kind is DerivationKind.MAP and nation.file == (tmp_path / "regions.csv").resolve()
    assert nation.mapping == (("North", "UK"), ("South", "UK"))
    point = table.column("income_band").derived.bands
    assert [(b.upper, b.inclusive) for b in point] == [(100.0, False), (100.0, True), (None, True)]


def _set(path: str, value: Any) -> Any:
    def change(table: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = table
        for key in parents:
            node = node[key]
        if value is None:
            del node[last]
        else:
            node[last] = value

    return change


ERRORS = [
    (
        "overlapping bands",
        _set("derived.age_band.bands", OVERLAP),
        "people.yaml: tables.people.derived.age_band.bands.1.upto: bands overlap or are out of order: upto "
        "17 does not lie above the previous band's bound 64; list bands lowest first with increasing bounds",
    ),
    (
        "equal bounds",
        _set("derived.age_band.bands", EQUAL),
        "people.yaml: tables.people.derived.age_band.bands.1.below: bands overlap or are out of order",
    ),
    (
        "an infinite bound",
        _set("derived.age_band.bands", [{"upto": float("inf"), "label": "a"}, {"label": "b"}]),
        "people.yaml: tables.people.derived.age_band.bands.0.upto: expected a finite number",
    ),
    (
        "a bounded last band",
        _set("derived.age_band.bands", [{"upto": 17, "label": "a"}, {"upto": 64, "label": "b"}]),
        "people.yaml: tables.people.derived.age_band.bands.1.upto: the last band takes every larger value: "
        "remove upto (add a band after it for the values above)",
    ),
    (
        "a middle band without a bound",
        _set("derived.age_band.bands", [{"label": "a"}, {"label": "b"}]),
        "people.yaml: tables.people.derived.age_band.bands.0: give exactly one of upto (value <= bound) or "
        "below (value < bound)",
    ),
    (
        "a repeated band label",
        _set("derived.age_band.bands", [{"upto": 17, "label": "a"}, {"label": "a"}]),
        "people.yaml: tables.people.derived.age_band.bands.1.label: the label 'a' is already used",
    ),
    (
        "one band",
        _set("derived.age_band.bands", [{"label": "all"}]),
        "people.yaml: tables.people.derived.age_band.bands: expected a list of at least two bands",
    ),
    (
        "unknown source",
        _set("derived.age_band.from", "ages"),
        "people.yaml: tables.people.derived.age_band.from: 'ages' is not a declared column (did you mean "
        "'age'?)",
    ),
    (
        "identifier source",
        _set("derived.country.from", "pid"),
        "people.yaml: tables.people.derived.country.from: 'pid' is an identifier, which no query may read, "
        "not even through a derived dimension: derive from a dimension or a measure",
    ),
    (
        "derived source",
        _set("derived.continent", {"from": "country", "map": {"UK": "Europe"}}),
        "people.yaml: tables.people.derived.continent.from: 'country' is itself derived",
    ),
    (
        "name clash",
        _set("derived.Region", {"from": "region", "map": {"North": "UK"}}),
        "people.yaml: tables.people.derived.Region: 'Region' is already a column of the table: give the "
        "derived dimension another name",
    ),
    (
        "two kinds",
        _set("derived.country.labels", {"North": "n"}),
        "people.yaml: tables.people.derived.country: give exactly one of bands, map, map_file, labels "
        "(got map, labels)",
    ),
    (
        "a number as label",
        _set("derived.country.map", {"North": 1}),
        "people.yaml: tables.people.derived.country.map.North: expected a non-empty text label, got int "
        '(quote it: "1")',
    ),
    (
        "a null key",
        _set("derived.country.map", {None: "UK"}),
        "people.yaml: tables.people.derived.country.map: the key nothing (NULL) cannot be matched",
    ),
    (
        "two codes with one value label",
        _set("derived.health_label.labels", {1: "poor", 2: "poor"}),
        "people.yaml: tables.people.derived.health_label.labels: 1 and 2 both have the label 'poor': value "
        "labels name one code each; use map: for a many-to-one grouping",
    ),
    (
        "other with bands",
        _set("derived.age_band.other", "x"),
        "people.yaml: tables.people.derived.age_band.other: bands cover every value",
    ),
    (
        "a missing map file",
        _set("derived.country", {"from": "region", "map_file": "nowhere.csv"}),
        "people.yaml: tables.people.derived.country.map_file: cannot read the map file",
    ),
    (
        "an unknown key",
        _set("derived.country.maps", {}),
        "people.yaml: tables.people.derived.country.maps: unknown key (did you mean 'map'?)",
    ),
]


@pytest.mark.parametrize(("case", "change", "message"), ERRORS, ids=[e[0] for e in ERRORS])
def test_invalid_declarations(tmp_path: Path, case: str, change: Any, message: str) -> None:
    with pytest.raises(PolicyError) as error:
        _load(tmp_path, change)
    assert str(error.value).startswith(message), str(error.value)


@pytest.mark.parametrize(
    ("content", "message"),
    [
        ("region\nNorth\n", "needs a header row naming two columns (source value, label)"),
        ("region,country\n", "needs a header row naming two columns (source value, label) and at least one"),
        ("region,country\nNorth,UK\nSouth\n", "regions.csv line 3: expected two non-empty values"),
        (
            "region,country\nNorth,UK\nNorth,DE\n",
            "regions.csv line 3: the value 'North' is already mapped on",
        ),
        (b"region,country\nN\xf6rth,UK\n", "the map file regions.csv is not UTF-8 text: save it as UTF-8"),
    ],
)
def test_bad_map_files(tmp_path: Path, content: str | bytes, message: str) -> None:
    path = tmp_path / "regions.csv"
    if isinstance(content, bytes):
        path.write_bytes(content)
    else:
        path.write_text(content)
    with pytest.raises(PolicyError) as error:
        _load(tmp_path, _set("derived.country", {"from": "region", "map_file": "regions.csv"}))
    text = str(error.value)
    assert text.startswith("people.yaml: tables.people.derived.country.map_file: "), text
    assert message in text, text
