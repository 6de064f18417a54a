"""The policy's noise section, and noise / budget on tables and analysts, loaded strictly."""

from __future__ import annotations

import copy
from fractions import Fraction
from pathlib import Path
from typing import Any

import pytest
import yaml

from guard.errors import PolicyError
from guard.policy.load import load_policy
from guard.policy.model import NoiseMode, NoiseSettings, Policy

ROOT = Path(__file__).resolve().parents[2]
HOSPITAL_DP = ROOT / "policies" / "hospital-dp.yaml"
_BASE: dict[str, Any] = yaml.safe_load(HOSPITAL_DP.read_text())
_BASE["tables"]["hospital"]["source"]["csv"] = str(ROOT / "examples" / "hospital" / "hospital.csv")
del _BASE["state"]


def _document(**noise: Any) -> dict[str, Any]:
    """hospital-dp.yaml; ``noise`` replaces its noise section when given."""
    document = copy.deepcopy(_BASE)
    if noise:
        document["noise"] = noise
    return document


def _load(tmp_path: Path, document: dict[str, Any] | str) -> Policy:
    path = tmp_path / "policy.yaml"
    path.write_text(document if isinstance(document, str) else yaml.safe_dump(document, sort_keys=False))
    return load_policy(path, tmp_path / "state")


def _error(tmp_path: Path, document: dict[str, Any] | str) -> str:
    with pytest.raises(PolicyError) as caught:
        _load(tmp_path, document)
    message = str(caught.value)
    assert message.startswith("policy.yaml: ")
    return message


def test_hospital_dp_as_shipped() -> None:
    policy = load_policy(HOSPITAL_DP)
    noise = policy.noise
    assert noise.mode is NoiseMode.NOISE and policy.uses_noise
    assert noise.epsilon_per_query == Fraction(1)
    assert noise.analyst_budget == Fraction(10) and noise.global_budget == Fraction(20)
    assert (noise.average, noise.cells_per_unit, noise.rows_per_cell) == ("ratio", 1, 1)
    assert noise.delta == 1e-6 and noise.group_threshold is None and noise.groups == ()
    table = policy.table("hospital")
    assert table is not None and table.noise is None
    income = table.column("income")
    assert income is not None and income.bounds == (1000.0, 100000.0)
    assert [(a.name, a.noise, a.budget) for a in policy.analysts] == [
        ("alice", None, None),
        ("bob", None, None),
    ]


def test_defaults_without_a_noise_section(tmp_path: Path) -> None:
    document = _document()
    del document["noise"]
    policy = _load(tmp_path, document)
    assert policy.noise == NoiseSettings()
    assert policy.noise.mode is NoiseMode.OFF and not policy.uses_noise
    assert policy.noise.epsilon_per_query == 1 and policy.noise.delta == 1e-6
    assert (policy.noise.cells_per_unit, policy.noise.rows_per_cell) == (1, 1)


def test_an_empty_noise_section_is_the_defaults(tmp_path: Path) -> None:
    document = _document()
    document["noise"] = None
    assert _load(tmp_path, document).noise == NoiseSettings()


def test_every_key(tmp_path: Path) -> None:
    document = _document(
        mode="noise",
        epsilon_per_query="1/3",
        average="clamped_mean",
        contribution={"cells_per_unit": 3, "rows_per_cell": 2},
        group_threshold=12,
        delta=0.001,
        budgets={
            "per_analyst": 0.1,
            "global": "2.5",
            "groups": {
                "team": {"budget": 1, "members": ["alice", "bob"]},
                "solo": {"budget": 3, "members": ["bob"]},
            },
        },
    )
    noise = _load(tmp_path, document).noise
    assert noise == NoiseSettings(
        mode=NoiseMode.NOISE,
        epsilon_per_query=Fraction(1, 3),
        average="clamped_mean",
        cells_per_unit=3,
        rows_per_cell=2,
        group_threshold=12,
        delta=0.001,
        analyst_budget=Fraction(1, 10),  # the decimal written, not the nearest float
        global_budget=Fraction(5, 2),
        groups=(("team", Fraction(1), ("alice", "bob")), ("solo", Fraction(3), ("bob",))),
    )


def test_a_null_group_threshold_is_automatic(tmp_path: Path) -> None:
    document = _document(mode="noise", group_threshold=None, budgets={"per_analyst": 1})
    assert _load(tmp_path, document).noise.group_threshold is None


NOISE_ERRORS: list[tuple[dict[str, Any], str]] = [
    (
        {"epsilon_pr_query": 1},
        "noise.epsilon_pr_query: unknown key (did you mean 'epsilon_per_query'?); allowed keys: mode, "
        "epsilon_per_query, average, contribution, group_threshold, delta, budgets",
    ),
    ({"epsilon_per_query": 0}, "noise.epsilon_per_query: expected a positive number (an ε), got 0"),
    ({"epsilon_per_query": -1}, "noise.epsilon_per_query: expected a positive number (an ε), got -1"),
    ({"epsilon_per_query": "abc"}, "noise.epsilon_per_query: expected a positive number (an ε), got 'abc'"),
    ({"epsilon_per_query": True}, "noise.epsilon_per_query: expected a positive number (an ε), got bool"),
    ({"epsilon_per_query": [1]}, "noise.epsilon_per_query: expected a positive number (an ε), got a list"),
    ({"epsilon_per_query": ".inf"}, "noise.epsilon_per_query: expected a positive number (an ε)"),
    ({"average": "median"}, "noise.average: expected one of ratio, clamped_mean"),
    ({"average": "ratoi"}, "noise.average: expected one of ratio, clamped_mean (did you mean 'ratio'?)"),
    ({"mode": "nois"}, "noise.mode: expected one of off, noise (did you mean 'noise'?)"),
    ({"contribution": {"cells_per_unit": 0}}, "noise.contribution.cells_per_unit: must be at least 1, got 0"),
    ({"contribution": {"rows_per_cell": 0}}, "noise.contribution.rows_per_cell: must be at least 1, got 0"),
    ({"contribution": {"rows_per_cell": 1.5}}, "noise.contribution.rows_per_cell: expected a whole number"),
    (
        {"contribution": {"cells": 2}},
        "noise.contribution.cells: unknown key; allowed keys: cells_per_unit, rows_per_cell",
    ),
    ({"contribution": 2}, "noise.contribution: expected a mapping, got int"),
    ({"group_threshold": 0}, "noise.group_threshold: must be at least 1, got 0"),
    ({"group_threshold": "5"}, "noise.group_threshold: expected a whole number, got a string"),
    ({"delta": 0}, "noise.delta: must be > 0 (use group_threshold for a fixed threshold)"),
    ({"delta": 0.6}, "noise.delta: must be at least 0 and at most 0.5, got 0.6"),
    ({"delta": -1e-9}, "noise.delta: must be at least 0"),
    ({"budgets": {"per_analyst": 0}}, "noise.budgets.per_analyst: expected a positive number (an ε), got 0"),
    ({"budgets": {"global": "lots"}}, "noise.budgets.global: expected a positive number (an ε), got 'lots'"),
    ({"budgets": {"per_analist": 1}}, "noise.budgets.per_analist: unknown key (did you mean 'per_analyst'?)"),
    ({"budgets": {"groups": ["alice"]}}, "noise.budgets.groups: expected a mapping of group name to"),
    (
        {"budgets": {"groups": {"team": {"budget": 1, "members": ["alice", "carol"]}}}},
        "noise.budgets.groups.team.members: unknown analyst 'carol'",
    ),
    (
        {"budgets": {"groups": {"team": {"budget": 1, "members": ["alice", "bbo"]}}}},
        "noise.budgets.groups.team.members: unknown analyst 'bbo' (did you mean 'bob'?)",
    ),
    (
        {"budgets": {"groups": {"team": {"budget": 1, "members": []}}}},
        "noise.budgets.groups.team.members: expected a non-empty list of analyst names",
    ),
    (
        {"budgets": {"groups": {"team": {"members": ["alice"]}}}},
        "noise.budgets.groups.team.budget: is required",
    ),
    (
        {"budgets": {"groups": {"team": {"budget": 0, "members": ["alice"]}}}},
        "noise.budgets.groups.team.budget: expected a positive number (an ε), got 0",
    ),
]


@pytest.mark.parametrize(
    ("change", "message"),
    NOISE_ERRORS,
    ids=[f"{next(iter(c))}={c[next(iter(c))]!r}"[:40] for c, _ in NOISE_ERRORS],
)
def test_noise_section_errors(tmp_path: Path, change: dict[str, Any], message: str) -> None:
    document = _document()
    document["noise"].update(change)
    assert message in _error(tmp_path, document)


def test_the_noise_section_must_be_a_mapping(tmp_path: Path) -> None:
    document = _document()
    document["noise"] = "on"
    assert "policy.yaml: noise: expected a mapping, got a string" in _error(tmp_path, document)


def test_noise_needs_a_budget_for_every_analyst(tmp_path: Path) -> None:
    document = _document(mode="noise")
    assert (
        "policy.yaml: analysts.alice.budget: noise mode is used but this analyst has no privacy budget: "
        "set noise.budgets.per_analyst, or a budget on the analyst"
    ) in _error(tmp_path, document)
    document["analysts"]["alice"]["budget"] = 2
    assert "analysts.bob.budget: noise mode is used" in _error(tmp_path, document)
    document["analysts"]["bob"]["budget"] = "0.5"
    policy = _load(tmp_path, document)
    assert [a.budget for a in policy.analysts] == [Fraction(2), Fraction(1, 2)]


def test_a_budget_is_needed_even_when_only_one_table_uses_noise(tmp_path: Path) -> None:
    document = _document(mode="off")
    document["tables"]["hospital"]["noise"] = "noise"
    assert "analysts.alice.budget: noise mode is used" in _error(tmp_path, document)


def test_budgets_are_not_needed_without_noise(tmp_path: Path) -> None:
    policy = _load(tmp_path, _document(mode="off"))
    assert not policy.uses_noise and policy.noise.analyst_budget is None


def test_a_measure_with_low_equal_to_high_is_an_error_under_noise_only(tmp_path: Path) -> None:
    document = _document()
    document["tables"]["hospital"]["columns"]["income"]["bounds"] = [5000, 5000]
    assert (
        "policy.yaml: tables.hospital.columns.income.bounds: noise mode needs low < high: "
        "the noise scale is computed from the bounds"
    ) in _error(tmp_path, document)
    document["noise"]["mode"] = "off"
    income = _load(tmp_path, document).tables[0].column("income")
    assert income is not None and income.bounds == (5000.0, 5000.0)


@pytest.mark.parametrize(
    ("written", "mode"),
    [
        ("off", NoiseMode.OFF),
        ("no", NoiseMode.OFF),
        ("false", NoiseMode.OFF),
        ("'off'", NoiseMode.OFF),
        ("noise", NoiseMode.NOISE),
        ("on", NoiseMode.NOISE),
        ("yes", NoiseMode.NOISE),
        ("true", NoiseMode.NOISE),
    ],
)
def test_noise_on_tables_and_analysts_reads_yaml_booleans(
    tmp_path: Path, written: str, mode: NoiseMode
) -> None:
    text = HOSPITAL_DP.read_text().replace(
        "csv: ../examples/hospital/hospital.csv", f"csv: {ROOT / 'examples' / 'hospital' / 'hospital.csv'}"
    )
    text = text.replace(
        "    privacy_unit: patient_id\n", f"    privacy_unit: patient_id\n    noise: {written}\n"
    )
    text = text.replace("  alice:\n    description: demo analyst\n", f"  alice:\n    noise: {written}\n")
    text = text.replace("  mode: noise ", f"  mode: {written} ")
    policy = _load(tmp_path, text)
    table = policy.table("hospital")
    alice = policy.analyst("alice")
    assert table is not None and alice is not None
    assert table.noise is mode and alice.noise is mode and policy.noise.mode is mode


@pytest.mark.parametrize("where", ["table", "analyst"])
def test_an_unknown_noise_mode_names_its_key(tmp_path: Path, where: str) -> None:
    document = _document()
    if where == "table":
        document["tables"]["hospital"]["noise"] = "laplace"
        expected = "policy.yaml: tables.hospital.noise: expected one of off, noise"
    else:
        document["analysts"]["bob"] = {"noise": 1}
        expected = "policy.yaml: analysts.bob.noise: expected one of off, noise"
    assert expected in _error(tmp_path, document)


@pytest.mark.parametrize(
    ("budget", "message"),
    [
        (0, "analysts.alice.budget: expected a positive number (an ε), got 0"),
        (-3, "analysts.alice.budget: expected a positive number (an ε), got -3"),
        ("much", "analysts.alice.budget: expected a positive number (an ε), got 'much'"),
    ],
)
def test_analyst_budget_errors(tmp_path: Path, budget: object, message: str) -> None:
    document = _document()
    document["analysts"]["alice"]["budget"] = budget
    assert message in _error(tmp_path, document)


def test_an_analyst_budget_overrides_per_analyst(tmp_path: Path) -> None:
    document = _document()
    document["analysts"]["alice"]["budget"] = "0.3"
    policy = _load(tmp_path, document)
    alice, bob = policy.analysts
    assert alice.budget == Fraction(3, 10) and bob.budget is None
    assert policy.noise.analyst_budget == 10


@pytest.mark.parametrize(
    ("policy_mode", "table_mode", "analyst_mode", "expected"),
    [
        ("off", None, None, NoiseMode.OFF),
        ("noise", None, None, NoiseMode.NOISE),
        ("off", "noise", None, NoiseMode.NOISE),
        ("noise", "off", None, NoiseMode.OFF),
        ("off", "off", "noise", NoiseMode.NOISE),
        ("noise", "noise", "off", NoiseMode.OFF),
        ("noise", None, "off", NoiseMode.OFF),
        ("off", None, "noise", NoiseMode.NOISE),
    ],
)
def test_noise_mode_analyst_over_table_over_policy(
    tmp_path: Path, policy_mode: str, table_mode: str | None, analyst_mode: str | None, expected: NoiseMode
) -> None:
    document = _document(mode=policy_mode, budgets={"per_analyst": 1})
    if table_mode is not None:
        document["tables"]["hospital"]["noise"] = table_mode
    if analyst_mode is not None:
        document["analysts"]["alice"]["noise"] = analyst_mode
    policy = _load(tmp_path, document)
    table, alice, bob = policy.tables[0], policy.analysts[0], policy.analysts[1]
    assert policy.noise_mode(table, alice) is expected
    # bob says nothing: the table's mode, else the policy's
    assert policy.noise_mode(table, bob) is NoiseMode(table_mode or policy_mode)


@pytest.mark.parametrize(
    ("policy_mode", "table_mode", "analyst_mode", "uses"),
    [
        ("off", None, None, False),
        ("off", "off", "off", False),
        ("noise", None, None, True),
        ("off", "noise", None, True),
        ("off", None, "noise", True),
        # a mode that no answer can get still counts: noise settings are then checked
        ("noise", "off", "off", True),
    ],
)
def test_uses_noise(
    tmp_path: Path, policy_mode: str, table_mode: str | None, analyst_mode: str | None, uses: bool
) -> None:
    document = _document(mode=policy_mode, budgets={"per_analyst": 1})
    if table_mode is not None:
        document["tables"]["hospital"]["noise"] = table_mode
    if analyst_mode is not None:
        document["analysts"]["alice"]["noise"] = analyst_mode
    assert _load(tmp_path, document).uses_noise is uses
