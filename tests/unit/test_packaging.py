"""What a wheel holds: every file the installed packages read that is not Python is declared as package data."""

from __future__ import annotations

import tomllib
from fnmatch import fnmatch

from fixtures.paths import REPO


def test_every_data_file_of_the_packages_is_declared():
    config = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    declared = config["package-data"]
    missing = []
    for top in ("workbench", "retrievers", "dashboards"):
        for path in (REPO / top).rglob("*"):
            if not path.is_file() or path.suffix in (".py", ".pyc") or "__pycache__" in path.parts:
                continue
            rel = path.relative_to(REPO)
            covered = False
            for package, patterns in declared.items():
                folder = REPO.joinpath(*package.split("."))
                if folder in path.parents:
                    inner = path.relative_to(folder).as_posix()
                    covered = covered or any(fnmatch(inner, pattern) for pattern in patterns)
            if not covered:
                missing.append(rel.as_posix())
    assert missing == [], "declare these in [tool.setuptools.package-data] of pyproject.toml (a wheel drops them)"
    assert declared["dashboards"] == ["static/fonts/*"]
    assert (REPO / "dashboards/static/fonts/OFL-NotoSansDevanagari.txt").is_file()
