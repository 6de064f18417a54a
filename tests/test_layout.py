"""The layout holds: small modules, no private names across packages, no cycles between
packages (docs/ARCHITECTURE.md, "Dependency direction")."""

from __future__ import annotations

import ast
import importlib
import importlib.util
import itertools
from pathlib import Path

GUARD = Path(__file__).resolve().parent.parent / "guard"
#: STYLE.md: modules with one job, under about 400 lines
MAX_LINES = 420


def _modules() -> dict[str, Path]:
    found = {}
    for path in GUARD.rglob("*.py"):
        parts = path.relative_to(GUARD.parent).with_suffix("").parts
        name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
        found[name] = path
    return found


def _package(module: str) -> str:
    """``guard.plan.rewrite`` -> ``guard.plan``; a top-level module is its own package."""
    parts = module.split(".")
    return ".".join(parts[:2])


def _imports(path: Path, module: str) -> list[tuple[str, str | None]]:
    """(imported module, imported name or None) of every guard import, type-only ones too."""
    tree = ast.parse(path.read_text())
    found: list[tuple[str, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module and node.module.startswith("guard"):
            found.extend((node.module, alias.name) for alias in node.names)
        elif isinstance(node, ast.Import):
            found.extend((alias.name, None) for alias in node.names if alias.name.startswith("guard"))
    return found


def test_no_module_is_over_the_size_limit() -> None:
    sizes = {name: len(path.read_text().splitlines()) for name, path in _modules().items()}
    assert {name: n for name, n in sizes.items() if n > MAX_LINES} == {}


def test_no_private_name_crosses_a_package() -> None:
    crossing = []
    for module, path in _modules().items():
        for imported, name in _imports(path, module):
            private = bool(name) and name.startswith("_") and not name.startswith("__")
            if private and _package(imported) != _package(module):
                crossing.append(f"{module} imports {imported}.{name}")
    assert crossing == []


def test_no_test_or_benchmark_imports_a_private_guard_name() -> None:
    """STYLE.md: tests go through what a module offers (a helper worth testing on its own
    is public, with its contract); patching a private name to break it on purpose is not
    an import and stays allowed."""
    crossing = []
    for folder in ("tests", "benchmarks"):
        for path in sorted((GUARD.parent / folder).rglob("*.py")):
            for imported, name in _imports(path, path.stem):
                if name and name.startswith("_") and not name.startswith("__"):
                    crossing.append(f"{path.relative_to(GUARD.parent)} imports {imported}.{name}")
    assert crossing == []


def test_every_guard_name_a_benchmark_or_test_imports_exists() -> None:
    """A name moved between modules breaks the imports inside functions only when they
    run: a benchmark's rarely taken path failed, or was skipped as "unavailable", for a
    session after ``with_sums`` moved (imported here without running anything else)."""
    missing = []
    for folder in ("tests", "benchmarks"):
        for path in sorted((GUARD.parent / folder).rglob("*.py")):
            for imported, name in _imports(path, path.stem):
                if name is None or name == "*":
                    continue
                module = importlib.import_module(imported)
                if not hasattr(module, name) and importlib.util.find_spec(f"{imported}.{name}") is None:
                    missing.append(f"{path.relative_to(GUARD.parent)} imports {imported}.{name}")
    assert missing == []


def test_no_import_cycle_between_packages() -> None:
    edges: dict[str, set[str]] = {}
    for module, path in _modules().items():
        for imported, _ in _imports(path, module):
            source, target = _package(module), _package(imported)
            if source != target and target != "guard":
                edges.setdefault(source, set()).add(target)
    cycles = []
    for a, b in itertools.permutations(edges, 2):
        if b in edges.get(a, set()) and _reaches(edges, b, a):
            cycles.append(f"{a} -> {b} -> ... -> {a}")
    assert cycles == []


def test_endpoints_depend_on_the_guard_never_the_reverse() -> None:
    for module, path in _modules().items():
        if _package(module) in ("guard.cli", "guard.server"):
            continue
        for imported, _ in _imports(path, module):
            assert _package(imported) not in ("guard.cli", "guard.server"), f"{module} imports {imported}"


def _reaches(edges: dict[str, set[str]], start: str, goal: str) -> bool:
    seen, stack = {start}, [start]
    while stack:
        node = stack.pop()
        if node == goal:
            return True
        for nxt in edges.get(node, ()):
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False
