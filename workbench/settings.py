"""Where the workbench finds its corpora and keeps what it builds.

Resolution order, the same for the CLI, the tests, notebooks and the dashboard:

* data directory: the ``WORKBENCH_DATA`` environment variable, else ``[paths] data``
  in the config file, else an error naming both ways to set it;
* home directory (built datasets, caches, tracking): ``WORKBENCH_HOME``, else
  ``[paths] home`` in the config file, else ``~/.workbench``;
* config file: ``WORKBENCH_CONFIG``, else ``./workbench.toml`` when it exists.

Relative paths in the config file are taken relative to the config file's folder.
"""

from __future__ import annotations

import os
import tomllib
from dataclasses import dataclass
from pathlib import Path

from workbench.errors import ConfigError

#: The repository (or unpacked source) root: datasets/, experiments/ and dashboards/ sit here.
PROJECT_ROOT = Path(__file__).resolve().parent.parent

#: Each source folder under the data directory and the files a loader needs in it.
EXPECTED_FILES: dict[str, tuple[str, ...]] = {
    "suttacentral-bilara": (
        "root/pli/ms/sutta/mn/mn10_root-pli-ms.json",
        "translation/en/sujato/sutta/mn/mn10_translation-en-sujato.json",
        "reference/pli/ms/sutta/mn/mn10_reference.json",
    ),
    "cst4-tipitaka-xml": ("cscd/s0201m.mul0.xml", "cscd/s0201a.att0.xml"),
    "gita": ("data/verse.json", "archive/translation_old.json", "data/chapters.json"),
    "ms-dpd": (
        "ms-dpd-2.54.0/dpd/index.mjs",
        "ms-dpd-2.54.0/dpd/definition-pali.mjs",
        "ms-dpd-en-2.53.0/definition-en.mjs",
        "ms-dpd-ru-2.53.0/definition-ru.mjs",
    ),
}

#: Optional sources: used when present, never required.
OPTIONAL_FILES: dict[str, tuple[str, ...]] = {
    "suttacentral-bilara-ru-sv": (),
    "sanskritsahitya-bhagavatam": ("srimadbhaagavatam/srimadbhaagavatam.json",),
}


def _config_path() -> Path | None:
    env = os.environ.get("WORKBENCH_CONFIG")
    if env:
        p = Path(env).expanduser()
        if not p.is_file():
            raise ConfigError(f"WORKBENCH_CONFIG points at {p}, which is not a file; fix the path or unset it")
        return p
    p = Path.cwd() / "workbench.toml"
    return p if p.is_file() else None


def _read_config() -> tuple[dict, Path | None]:
    path = _config_path()
    if path is None:
        return {}, None
    fix = "fix the file or point WORKBENCH_CONFIG elsewhere"
    try:
        with path.open("rb") as fh:
            return tomllib.load(fh), path
    except UnicodeDecodeError as exc:
        raise ConfigError(f"config file {path} is not UTF-8 text ({exc.reason} at byte {exc.start}); {fix}") from exc
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"config file {path} is not valid TOML: {exc}; {fix}") from exc
    except IsADirectoryError as exc:
        raise ConfigError(f"config file {path} is a folder, not a file; {fix}") from exc
    except OSError as exc:
        raise ConfigError(f"config file {path} cannot be read ({exc.strerror or exc}); {fix}") from exc


def _from_config(key: str) -> Path | None:
    cfg, path = _read_config()
    section = cfg.get("paths")
    if section is None:
        return None
    if not isinstance(section, dict):
        raise ConfigError(f"`paths` in {path} must be a table (`[paths]` with `data = \"...\"`, `home = \"...\"`), "
                          f"got {section!r}; fix the file")
    value = section.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"[paths] {key} in {path} must be a non-empty string path, got {value!r}; fix the file")
    p = Path(value).expanduser()
    if not p.is_absolute() and path is not None:
        p = path.parent / p
    return p


@dataclass(frozen=True)
class Paths:
    """The resolved data and home directories (absolute)."""

    data: Path
    home: Path

    @property
    def built(self) -> Path:
        """Folder of built datasets and query sets: ``<home>/datasets``."""
        return self.home / "datasets"


def data_dir(*, check: bool = True, sources: tuple[str, ...] | None = None) -> Path:
    """Return the corpus directory (``WORKBENCH_DATA`` or ``[paths] data``).

    With ``check`` (default), verify that every source in ``sources`` (default: all
    required sources) has its expected files.

    Raises:
        ConfigError: no data directory is configured.
        DataError: the directory or an expected file is missing; the message lists
            the path and every missing file.
    """
    from workbench.errors import DataError

    env = os.environ.get("WORKBENCH_DATA")
    path: Path | None
    if env is not None and env.strip():
        path = Path(env).expanduser()
        origin = "WORKBENCH_DATA"
    else:
        path = _from_config("data")
        origin = f"[paths] data in {_config_path()}"
    if path is None:
        raise ConfigError(
            "no data directory is set: export WORKBENCH_DATA=/path/to/shared/data "
            "or put `[paths] data = \"...\"` in workbench.toml"
        )
    path = path.resolve()
    if not check:
        return path
    if path.exists() and not path.is_dir():
        raise DataError(
            f"data directory {path} (from {origin}) is a file, not a folder; set WORKBENCH_DATA to the folder holding "
            + ", ".join(f"{s}/" for s in EXPECTED_FILES)
        )
    if not path.is_dir():
        raise DataError(
            f"data directory {path} (from {origin}) does not exist; set WORKBENCH_DATA to the folder holding "
            + ", ".join(f"{s}/" for s in EXPECTED_FILES)
        )
    if sources is not None:
        unknown = [s for s in sources if s not in EXPECTED_FILES]
        if unknown:
            raise ConfigError(f"unknown data source(s) {unknown}; known: {', '.join(EXPECTED_FILES)}")
    wanted = EXPECTED_FILES if sources is None else {s: EXPECTED_FILES[s] for s in sources}
    missing = [f"{src}/{f}" for src, files in wanted.items() for f in files if not (path / src / f).is_file()]
    if missing:
        raise DataError(
            f"data directory {path} is incomplete; missing: " + ", ".join(missing)
            + ". Point WORKBENCH_DATA at a full copy of the corpora (see its README.md)."
        )
    return path


def home_dir() -> Path:
    """Return the workbench home (``WORKBENCH_HOME``, ``[paths] home`` or ``~/.workbench``), created if absent."""
    env = os.environ.get("WORKBENCH_HOME")
    if env is not None and env.strip():
        path = Path(env).expanduser()
    else:
        path = _from_config("home") or Path.home() / ".workbench"
    path = path.resolve()
    try:
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            path.mkdir(mode=0o700)  # private: the servers' sockets, secrets and lock files live below it
    except FileExistsError:
        pass  # another process made it meanwhile
    except OSError as exc:
        raise ConfigError(f"cannot create the workbench home {path}: {exc}; set WORKBENCH_HOME to a writable folder") from exc
    check_home_owner(path)
    return path


def check_home_owner(path: Path) -> None:
    """Refuse a home this user does not own, or that other users may write into.

    The workbench writes lock files, caches, secrets and server data below its home, as this
    user (often root); in a folder another user controls, that user could plant a link that
    turns such a write onto any file of this one. So, as ``ssh`` does with ``~/.ssh``: the
    home must belong to this user and be writable by nobody else (group write is accepted only
    for this user's own primary group).

    Raises:
        ConfigError: naming the home, its owner or mode, and the fix.
    """
    import stat as _stat

    try:
        st = os.stat(path)
    except OSError:
        return
    if not _stat.S_ISDIR(st.st_mode):
        raise ConfigError(f"the workbench home {path} is not a folder; set WORKBENCH_HOME to a folder")
    if st.st_uid != os.geteuid():
        import pwd

        try:
            owner = pwd.getpwuid(st.st_uid).pw_name
        except KeyError:
            owner = f"uid {st.st_uid}"
        raise ConfigError(f"the workbench home {path} belongs to {owner}, not to you; the workbench writes there as "
                          "you, so use a home you own (set WORKBENCH_HOME), or chown it")
    mode = _stat.S_IMODE(st.st_mode)
    if mode & 0o002 or (mode & 0o020 and st.st_gid != os.getegid()):
        raise ConfigError(f"the workbench home {path} can be written by other users (mode {mode:o}); "
                          f"run `chmod go-w {path}` (or set WORKBENCH_HOME to a private folder)")


def paths(*, check: bool = True) -> Paths:
    """Resolve both directories at once (see :func:`data_dir` and :func:`home_dir`)."""
    return Paths(data=data_dir(check=check), home=home_dir())
