"""The rules' verdicts remembered across answers (``Verdicts``): each is the verdict
``judge`` gives the same cell, space and protection, and a guard answers the same with
them as without (a memo made for another protection is not used)."""

from __future__ import annotations

import dataclasses
import json
import random
from decimal import Decimal
from pathlib import Path

import pytest

import guard.protection.sensitivity as sensitivity
from guard import Guard
from guard.cells import Cell
from guard.errors import GuardError
from guard.policy.load import load_policy
from guard.protection.sensitivity import Verdicts, judge
from tests.protection.test_linked_oracle import _data, _policy, _questions

DIMENSIONS = ("a", "b", "c")


def _cells(rng: random.Random) -> list[Cell]:
    cells = []
    for _ in range(60):
        units = rng.choice((0, 1, 2, 3, 5, 40))
        top = tuple(sorted((float(rng.randint(1, 50)) for _ in range(min(units, 3))), reverse=True))
        value: object = sum(top) + rng.choice((0, 0, 10, 500))
        cells.append(Cell(value, units, 200, top, float(value)))  # type: ignore[arg-type]
    # the same numbers as other types: equal cells, judged apart
    cells += [dataclasses.replace(c, value=Decimal(str(c.value))) for c in cells[:5]]
    cells += [dataclasses.replace(c, value=int(c.value)) for c in cells[:5]]
    return cells


@pytest.mark.parametrize("seed", range(4))
def test_a_remembered_verdict_is_the_one_judge_gives(
    seed: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rng = random.Random(seed)
    protection = load_policy(_policy(tmp_path, _data(rng))).protection
    judged = [0]

    def counted(cell: Cell, space: str, protection: object) -> object:
        judged[0] += 1
        return judge(cell, space, protection)  # type: ignore[arg-type]

    monkeypatch.setattr(sensitivity, "judge", counted)
    memo = Verdicts(protection, limit=50)  # starts again on the way: still the same verdicts
    cells = _cells(rng)
    asked = [(c, s) for c in cells for s in ("count(*)", "sum(x)")] * 3
    rng.shuffle(asked)
    for cell, space in asked:
        assert memo(cell, space) == judge(cell, space, protection)
    assert judged[0] < len(asked)  # remembered verdicts were used
    # the same cell as a count and as a sum: rules differ (a memo without the space fails)
    assert any(judge(c, "count(*)", protection) != judge(c, "sum(x)", protection) for c in cells)


def _answers(seed: int, folder: Path, memo_for: str, secret: bytes = b"s" * 32) -> list[str]:
    """The answers to sequence ``seed``: ``memo_for`` "guard" (the guard's own memo),
    "other" (a memo made for a protection that finds every cell sensitive). The state's
    secret is given: it seeds the suppression costs, so both draw the same patterns."""
    rng = random.Random(seed)
    data = _data(rng)
    dims = tuple(d for d in DIMENSIONS if d in data)
    path = _policy(folder, data)
    (folder / "state").mkdir()
    (folder / "state" / "secret.key").write_bytes(secret)
    out = []
    with Guard.open(path, state=folder / "state") as guard:
        if memo_for == "other":
            strict = dataclasses.replace(guard.policy.protection, min_query_set_size=10_000)
            guard.linker._verdicts = Verdicts(strict)
        for _, sql in _questions(rng, dims):
            try:
                out.append(guard.query(sql, "alice").to_json())
            except GuardError as error:
                out.append(f"{type(error).__name__}: {error}")
    return out


@pytest.mark.parametrize("seed", [2, 5, 7])
def test_a_memo_made_for_another_protection_is_not_used(seed: int, tmp_path: Path) -> None:
    (tmp_path / "own").mkdir()
    (tmp_path / "other").mkdir()
    own = _answers(seed, tmp_path / "own", "guard")
    # values published, which a memo finding every cell sensitive would withhold
    published = [f[-1] == "released" for a in own if a.startswith("{") for f in json.loads(a)["flags"]]
    assert any(published)
    assert _answers(seed, tmp_path / "other", "other") == own
