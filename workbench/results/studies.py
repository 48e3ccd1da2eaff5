"""Tuning studies for the dashboard: the study folders ``workbench tune`` writes and their Optuna storage.

A study folder is ``<home>/studies/<name>/`` with ``journal.log`` (the default Optuna
storage) and one output folder per storage (``latest/``, ``latest-memory/``,
``latest-<hash>/``: ``report.json``, ``export.json``, ``trials.csv``, ``plots.html``).
``report.json`` is a :class:`workbench.tuning.report.StudyReport` (read with ``StudyReport.load``, written
with ``StudyReport.save``). The Optuna study is read from the storage the report names: the journal file, or a
``postgresql://`` URL; a study that ran in memory has only its output files, and the page
shows those. Figures: :func:`workbench.tuning.outputs.study_figures` (the same as ``plots.html``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import DataError
from workbench.tuning.report import StudyReport


@dataclass(frozen=True)
class StudyOutputs:
    """One output folder of one study."""

    name: str
    folder: Path
    storage: str  # "journal", "memory", "journal:PATH" or a URL (password masked)

    @property
    def label(self) -> str:
        return self.name if self.folder.name == "latest" else f"{self.name} ({self.folder.name})"


def find(home: Path) -> list[StudyOutputs]:
    """Every study output folder under ``<home>/studies``, newest report first."""
    found = []
    for report in sorted((home / "studies").glob("*/latest*/report.json")):
        storage = StudyReport.storage_of(report)  # "" when unreadable: listed anyway, the page says what is wrong
        if not storage:  # reports written before the storage was recorded: infer from the folder name
            storage = {"latest": "journal", "latest-memory": "memory"}.get(report.parent.name, "")
        found.append((report.stat().st_mtime, StudyOutputs(report.parent.parent.name, report.parent, storage)))
    return [s for _, s in sorted(found, key=lambda x: -x[0])]


def report(outputs: StudyOutputs) -> StudyReport:
    """``report.json``: chosen trial and params, notes, sensitivity, dev/test measures with CIs.

    Raises:
        DataError: the file is missing or unreadable, lacks ``chosen_trial`` / ``chosen_params``, or has a
            malformed part (the message names the file).
    """
    return StudyReport.load(outputs.folder / "report.json")


def export_text(outputs: StudyOutputs) -> str:
    """``export.json`` as written (the production config), or ``""`` when absent.

    Raises:
        DataError: the file is not a JSON object.
    """
    path = outputs.folder / "export.json"
    if not path.is_file():
        return ""
    text = path.read_text(encoding="utf-8", errors="replace")
    try:
        ok = isinstance(json.loads(text), dict)
    except ValueError:
        ok = False
    if not ok:
        raise DataError(f"{path} is not a production config (JSON object); `workbench export STUDY.toml -o FILE` "
                        "writes a fresh one")
    return text


def parity_reports(home: Path, name: str) -> dict[str, dict[str, Any]]:
    """The parity reports of the study's (or config's) engine-native exports: format (``postgres``,
    ``opensearch``) → the report ``workbench export --verify`` kept in ``<home>/exports/<name>.<format>.json``
    (:class:`workbench.export.parity.ParityReport` as JSON); formats never verified, or whose file does not
    read as a JSON object, are left out."""
    import json

    out: dict[str, dict[str, Any]] = {}
    for fmt in ("postgres", "opensearch"):
        path = home / "exports" / f"{name}.{fmt}.json"
        try:
            doc = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):
            continue
        if isinstance(doc, dict):
            out[fmt] = doc
    return out


def trials(outputs: StudyOutputs) -> pd.DataFrame:
    """``trials.csv`` (Optuna's ``trials_dataframe``), empty when absent.

    Raises:
        DataError: the file cannot be parsed.
    """
    path = outputs.folder / "trials.csv"
    if not path.is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except (ValueError, OSError, UnicodeDecodeError) as exc:
        raise DataError(f"cannot read {path} ({exc}); run the study again to rewrite it") from None


def storage_url(outputs: StudyOutputs, home: Path) -> str | None:
    """Where the study's trials live, as something :func:`load` can open; ``None`` for a
    study that ran in memory or a URL whose password was masked in the report."""
    from workbench.tuning.storage import study_dir

    spec = outputs.storage
    if spec == "journal":
        return f"journal:{study_dir(home, outputs.name) / 'journal.log'}"
    if spec.startswith("journal:"):
        return spec
    if "://" in spec and "***" not in spec:
        return spec
    return None


def load(url: str, name: str):
    """The Optuna study ``name`` from a journal (``journal:PATH``) or a database URL, read only.

    Raises:
        DataError: the storage cannot be opened or holds no such study.
    """
    import optuna

    optuna.logging.set_verbosity(optuna.logging.ERROR)
    storage: str | optuna.storages.BaseStorage
    try:
        if url.startswith("journal:"):
            from optuna.storages.journal import JournalFileBackend

            path = Path(url.split(":", 1)[1])
            if not path.is_file():
                raise DataError(f"the study journal {path} does not exist; run `workbench tune` for study {name}")
            storage = optuna.storages.JournalStorage(JournalFileBackend(str(path)))
        else:
            storage = url
        return optuna.load_study(study_name=name, storage=storage)
    except DataError:
        raise
    except KeyError:
        raise DataError(f"the storage {url} holds no study named {name!r}") from None
    except Exception as exc:  # optuna/sqlalchemy raise many kinds for an unreachable or foreign store
        raise DataError(f"cannot read study {name!r} from {url}: {exc}") from None


def effective_config(export: dict[str, Any]) -> pd.DataFrame:
    """The settings a production system would load (``export.json`` less its provenance), one row
    per setting: ``setting, value`` (floats to 4 significant digits; lanes as kind and parameters)."""
    rows = []
    for key, val in export.items():
        if key == "provenance":
            continue
        if key == "lanes" and isinstance(val, dict):
            for lane, spec in val.items():
                spec = dict(spec) if isinstance(spec, dict) else {"": spec}
                if isinstance(spec.get("embedder"), dict):
                    spec["embedder"] = spec["embedder"].get("model") or spec["embedder"].get("kind")
                rows.append({"setting": f"lane {lane}", "value": ", ".join(f"{k}={v}" for k, v in spec.items())})
        elif isinstance(val, dict):
            rows += [{"setting": f"{key}.{k}", "value": fmt_value(v)} for k, v in val.items()]
        else:
            rows.append({"setting": key, "value": fmt_value(val)})
    return pd.DataFrame(rows, columns=["setting", "value"])


def fmt_value(v: Any) -> str:
    """A parameter value for a table: floats to 4 significant digits, anything else as ``str``."""
    return f"{v:.4g}" if isinstance(v, float) else str(v)


def measures_table(rep: StudyReport) -> pd.DataFrame:
    """The dev/test comparison of the chosen trial and the baseline, one row per (split, measure):
    ``split, measure, chosen, chosen_ci, baseline, baseline_ci, delta, delta_ci, p_value, p_adjusted``
    (``p_adjusted``: Holm–Bonferroni over the split's measures and query types; NaN in old reports)."""
    rows = []
    for split in ("dev", "test"):
        part = rep.evaluation.split(split)
        for m, r in (part.measures if part else {}).items():
            rows.append({"split": split, "measure": m, "chosen": r.chosen,
                         "chosen_ci": f"[{r.chosen_ci[0]:.3f}, {r.chosen_ci[1]:.3f}]",
                         "baseline": r.baseline,
                         "baseline_ci": f"[{r.baseline_ci[0]:.3f}, {r.baseline_ci[1]:.3f}]",
                         "delta": r.mean_diff, "delta_ci": f"[{r.ci_low:+.3f}, {r.ci_high:+.3f}]",
                         "p_value": r.p_value, "p_adjusted": r.p_adjusted})
    return pd.DataFrame(rows)
