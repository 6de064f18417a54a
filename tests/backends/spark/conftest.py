"""Fixtures of the Spark tests: one JVM per run, backends over the example policies.

The first backend opened starts Spark (with the backend's own settings); later ones,
and the ``spark`` session used to create TABLE sources, reuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from guard.policy.load import load_policy
from tests.backends.spark_session import policy_copy, spark_available


@pytest.fixture(scope="session")
def policies(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Copies of the example policies with a local Spark back-end."""
    reason = spark_available()
    if reason:
        pytest.skip(reason)
    folder = tmp_path_factory.mktemp("spark-policies")
    for name in ("students", "castro", "hospital"):
        policy_copy(name, folder)
    return folder


@pytest.fixture(scope="session")
def students_spark(policies: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    """A SparkBackend over the students table, shared by the tests that only read."""
    from guard.backends.spark_backend import SparkBackend

    backend = SparkBackend(load_policy(policies / "students.yaml", state=tmp_path_factory.mktemp("state")))
    yield backend
    backend.close()


@pytest.fixture(scope="session")
def spark(students_spark: Any) -> Any:
    """The process's root SparkSession (started by the first backend)."""
    from pyspark.sql import SparkSession

    return SparkSession.builder.getOrCreate()
