"""The image installs the project with `pip install .`, not editable: a file that is not a Python module
(the dashboard page, the migration template) is in that install only if package-data lists it."""

import fnmatch
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_every_data_file_of_the_packages_is_package_data():
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    patterns = config.get("package-data", {})
    missing = []
    for top in ("compiler", "runner", "tuner"):
        for path in (ROOT / top).rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            relative = path.relative_to(ROOT / top).as_posix()
            if not any(fnmatch.fnmatch(relative, p) for p in patterns.get(top, [])):
                missing.append(f"{top}/{relative}")
    assert not missing, f"add to [tool.setuptools.package-data] in pyproject.toml: {missing}"


def test_every_directory_of_python_modules_is_a_package():
    """`packages.find` takes only directories with an __init__.py: a namespace package works in the
    editable install of the tests and is missing from the image's."""
    from setuptools import find_packages

    found = set(find_packages(ROOT, include=["compiler*", "runner*", "tuner*"]))
    holding_modules = {
        ".".join(path.parent.relative_to(ROOT).parts)
        for top in ("compiler", "runner", "tuner")
        for path in (ROOT / top).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert holding_modules <= found, f"add an __init__.py to: {sorted(holding_modules - found)}"
