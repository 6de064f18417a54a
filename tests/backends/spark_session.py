"""Spark for the back-end tests: whether it can run here, and the policy's section.

Spark starts one JVM per test process (several seconds); every SparkBackend in the run
then reuses it through ``SparkSession.builder.getOrCreate()``, in a session of its own.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
from pathlib import Path
from typing import Any

from tests.backends import policy_copies as copies

__all__ = ["MASTER", "backend_section", "policy_copy", "spark_available"]

#: two cores at most: the test machines are shared
MASTER = "local[2]"


def spark_available() -> str | None:
    """None when a local Spark can start here, else why not (a skip reason)."""
    if importlib.util.find_spec("pyspark") is None:
        return "pyspark is not installed: pip install 'statguard[spark]'"
    java_home = os.environ.get("JAVA_HOME")
    java = Path(java_home) / "bin" / "java" if java_home else None
    if not (java and java.is_file()) and shutil.which("java") is None:
        return "Java is not installed (Spark needs Java 17+): apt-get install default-jre-headless"
    return None


def backend_section(master: str = MASTER) -> dict[str, str]:
    """The policy's ``backend:`` mapping for a local Spark."""
    return {"engine": "spark", "master": master}


def policy_copy(name: str, folder: Path, backend: dict[str, Any] | None = None) -> Path:
    """A copy of ``policies/<name>.yaml`` in ``folder`` on a local Spark unless ``backend``."""
    return copies.policy_copy(name, folder, backend if backend is not None else backend_section())
