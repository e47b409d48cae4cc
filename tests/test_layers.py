"""The layers point one way: ``routing`` → ``leases`` → ``resilience`` (ARCHITECTURE.md,
"Layers and seams"). Nothing under ``resilience/`` imports ``routing`` or ``leases``, and
nothing under ``leases/`` imports ``routing``: what a lower layer needs from an upper one is
handed in as plain data or a callback. Read from the source with ``ast`` (imports inside
functions and ``TYPE_CHECKING`` blocks count too), so no module has to be importable."""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
FORBIDDEN = {"resilience": ("routing", "leases"), "leases": ("routing",)}


def _sources() -> list[Path]:
    return sorted(path for package in FORBIDDEN for path in (ROOT / package).rglob("*.py"))


def _absolute(node: ast.ImportFrom, package: list[str]) -> str:
    """The module a ``from ... import`` names, a relative one resolved against ``package``."""
    base = package[: len(package) - node.level + 1] if node.level else []
    return ".".join([*base, *([node.module] if node.module else [])])


def imported_modules(path: Path, root: Path = ROOT) -> Iterator[tuple[int, str]]:
    """Every module ``path`` (under ``root``) imports, with its line: import statements of any
    kind, and ``import_module("...")`` calls with a literal name."""
    package = list(path.relative_to(root).parent.parts)
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            yield from ((node.lineno, alias.name) for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = _absolute(node, package)
            yield node.lineno, module
            yield from ((node.lineno, f"{module}.{alias.name}") for alias in node.names)
        elif (name := _import_module_literal(node)) is not None:
            yield getattr(node, "lineno", 0), name


def _import_module_literal(node: ast.AST) -> str | None:
    """The module of an ``import_module("a.b")`` call (a literal name only), else None."""
    if not isinstance(node, ast.Call) or not node.args:
        return None
    called = getattr(node.func, "attr", None) or getattr(node.func, "id", None)
    first = node.args[0]
    if called != "import_module" or not isinstance(first, ast.Constant):
        return None
    return first.value if isinstance(first.value, str) else None


def _violations(path: Path) -> list[str]:
    layer = path.relative_to(ROOT).parts[0]
    return [
        f"{path.relative_to(ROOT)}:{line} imports {module}"
        for line, module in imported_modules(path)
        if module.split(".")[0] in FORBIDDEN[layer]
    ]


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(ROOT)))
def test_lower_layers_never_import_upper_ones(path: Path) -> None:
    assert _violations(path) == []


def test_the_walk_sees_the_layers() -> None:
    names = {str(p.relative_to(ROOT)) for p in _sources()}
    assert {"resilience/state.py", "leases/apps.py"} <= names


def test_the_check_catches_every_kind_of_import(tmp_path: Path) -> None:
    source = tmp_path / "resilience" / "sample.py"
    source.parent.mkdir()
    source.write_text(
        "import routing.models\n"
        "from leases import services\n"
        "def later():\n"
        "    from routing.snapshot import current_snapshot\n"
        "    return importlib.import_module('routing.selectors')\n"
        "from . import fine\n"
    )
    found = {module for _, module in imported_modules(source, root=tmp_path)}
    assert {"routing.models", "leases", "routing.snapshot", "routing.selectors"} <= found
    assert "resilience.fine" in found
