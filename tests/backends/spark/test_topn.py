"""The MAX_JOIN top-n template gives WINDOW's cells on Spark (tests/backends/topn_cases.py)."""

from __future__ import annotations

from pathlib import Path

import pytest

from guard import Guard
from tests.backends.spark_session import backend_section
from tests.backends.topn_cases import compare_templates, write_policy

pytest.importorskip("pyspark")


def test_max_join_gives_the_window_templates_cells(policies: Path, tmp_path: Path) -> None:
    # ``policies``: skips when Spark cannot run here
    policy = write_policy(tmp_path / "policy", backend_section())
    with Guard.open(policy, state=tmp_path / "state") as guard:
        assert guard.backend.capabilities.dialect == "spark"
        assert compare_templates(guard) > 50
