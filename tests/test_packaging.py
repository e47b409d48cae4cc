"""What ``pip install .`` installs is enough to serve: every template the apps load is reached
from inside a package and named by the package data of ``pyproject.toml``. The templates live
in the top-level ``templates/`` (docs/architecture.md, the layout); ``omniroute/templates`` is a
link to it, which the build follows. A template only beside the packages works from a checkout
and fails after a plain install."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import cast

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("omniroute", "resilience", "routing", "leases")
TEMPLATES = ROOT / "templates"


def tracked(*paths: str) -> list[str]:
    return subprocess.run(
        ["git", "ls-files", *paths], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()


def package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data: dict[str, list[str]] = config["tool"]["setuptools"].get("package-data", {})
    return data


def shipped(path: Path) -> bool:
    """Whether ``path`` (relative to the checkout) is package data of its top-level package."""
    package, *rest = path.parts
    inside = "/".join(rest)
    return any(fnmatch.fnmatch(inside, glob) for glob in package_data().get(package, []))


def package_files() -> Iterator[Path]:
    """The non-Python files of the packages as the build sees them: a linked directory's files
    under the link's own path."""
    for name in tracked(*PACKAGES):
        path = ROOT / name
        if path.is_symlink() and path.is_dir():
            yield from (Path(name) / f.relative_to(path) for f in path.rglob("*") if f.is_file())
        elif not name.endswith((".py", ".pyi")):
            yield Path(name)


def test_template_directories_are_inside_a_package() -> None:
    (engine,) = settings.TEMPLATES
    for directory in cast("list[str]", engine["DIRS"]):
        relative = Path(directory).relative_to(ROOT)
        assert relative.parts[0] in PACKAGES, f"{relative} is not inside a package"


def test_every_template_is_reached_from_a_package() -> None:
    templates = tracked("templates")
    assert templates, "no template found: the check would pass on nothing"
    reached = {str(path) for path in package_files()}
    missing = [t for t in templates if f"omniroute/{t}" not in reached]
    assert not missing, f"not inside the omniroute package: {missing}"


def test_every_non_python_file_of_the_packages_is_package_data() -> None:
    files = list(package_files())
    missing = [str(path) for path in files if not shipped(path)]
    assert not missing, f"not installed by pip install .: {missing}"
    assert files, "no file found: the check would pass on nothing"
