"""What ``pip install .`` installs is enough to serve: every template and non-Python file the
apps load sits inside a package and is named by the package data of ``pyproject.toml``
(docs/architecture.md, the layout). A template left beside the packages works from a checkout
and fails after a plain install."""

from __future__ import annotations

import fnmatch
import subprocess
import tomllib
from pathlib import Path
from typing import cast

from django.conf import settings

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("omniroute", "resilience", "routing", "leases")


def package_data() -> dict[str, list[str]]:
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())
    data: dict[str, list[str]] = config["tool"]["setuptools"].get("package-data", {})
    return data


def shipped(path: Path) -> bool:
    """Whether ``path`` (relative to the checkout) is package data of its top-level package."""
    package, *rest = path.parts
    inside = "/".join(rest)
    return any(fnmatch.fnmatch(inside, glob) for glob in package_data().get(package, []))


def test_template_directories_are_inside_a_package() -> None:
    (engine,) = settings.TEMPLATES
    directories = cast("list[str]", engine["DIRS"])
    for directory in directories:
        relative = Path(directory).resolve().relative_to(ROOT)
        assert relative.parts[0] in PACKAGES, f"{relative} is not inside a package"


def test_every_non_python_file_of_the_packages_is_package_data() -> None:
    tracked = subprocess.run(
        ["git", "ls-files", *PACKAGES], cwd=ROOT, capture_output=True, text=True, check=True
    ).stdout.split()
    files = [Path(name) for name in tracked if not name.endswith((".py", ".pyi"))]
    missing = [str(path) for path in files if not shipped(path)]
    assert not missing, f"not installed by pip install .: {missing}"
    assert files, "no template found: the check would pass on nothing"
