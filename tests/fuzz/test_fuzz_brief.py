"""A brief run of the fuzz harness (benchmarks/fuzz) in the test suite: valid, near-valid,
hostile and byte-mutated statements through ``Guard.query``, with fixed seeds. The long
runs (100,000 statements, and both endpoints) are ``python -m benchmarks.fuzz.run``."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.fuzz.run import fuzz_in_process


@pytest.mark.parametrize("seed", [3, 29])
def test_no_internal_error_no_unlogged_request_no_leak(tmp_path: Path, seed: int) -> None:
    tally = fuzz_in_process(400, seed, tmp_path / "state", chunk=50)
    assert tally.sent == 400
    assert [f.what for f in tally.internal] == []
    assert [f.what for f in tally.unlogged] == [] and tally.logged_twice == []
    assert [f.what for f in tally.leaks] == []
    assert tally.chain == f"{tally.log_rows:,} rows verified"
    assert sum(tally.families.values()) == 400 and len(tally.families) == 4  # every family ran
