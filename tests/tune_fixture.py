"""A synthetic study with a known optimum, for the tuning tests (no database, no model).

Two lanes over 40 train queries: ``good`` ranks the one relevant document first, ``bad``
ranks an unjudged document (``aqNN``) first and never retrieves the relevant one. RRF with
equal weights (the baseline) ties the two first documents and the doc_id rule puts
``aqNN`` ahead of ``relN``: R@1 = 0. R@1 is 1.0 exactly when ``weights.good >
weights.bad``, so the optimum is known: 1.0.
"""

from __future__ import annotations

from pathlib import Path

from workbench.data.catalog import Dataset
from workbench.run import Hit, Run
from workbench.tuning.space import load_study
from workbench.types import Qrel, Query

EXPERIMENT = """
name = "synthetic"
datasets = ["gita"]
measures = ["R@1", "R@10"]
depth = 20
[lanes.good]
kind = "reference"
[lanes.bad]
kind = "reference"
[configs.equal]
lanes = ["good", "bad"]
fusion = "rrf"
k = 60
"""

STUDY = """
name = "synthetic-study"
experiment = "experiment.toml"
dataset = "gita"
lanes = ["good", "bad"]
baseline = "equal"
trials = 30
seed = 7
[objective]
measure = "R@1"
[space]
k = { low = 1, high = 100 }
[space.weights]
good = { low = 0.0, high = 1.0 }
bad = { low = 0.0, high = 1.0 }
"""


def write(folder: Path, study_text: str = STUDY) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "experiment.toml").write_text(EXPERIMENT)
    (folder / "study.toml").write_text(study_text)
    return folder / "study.toml"


def dataset() -> Dataset:
    queries, qrels = [], []
    for i in range(60):
        split = "train" if i < 40 else ("dev" if i < 50 else "test")
        queries.append(Query(f"q{i:02d}", f"query {i}", "term" if i % 2 else "reference", "en", split))
        qrels.append(Qrel(f"q{i:02d}", f"rel{i}", 1))
    return Dataset("gita", [], queries, qrels, {"inputs": {}, "outputs": {}})


def runs(ds: Dataset) -> dict[str, Run]:
    good = {q.query_id: [Hit(f"rel{q.query_id[1:].lstrip('0') or '0'}", 10.0)] + [Hit(f"x{j}", 9.0 - j) for j in range(5)]
            for q in ds.queries}
    bad = {q.query_id: [Hit(f"a{q.query_id}", 10.0)] + [Hit(f"y{j}", 9.0 - j) for j in range(8)] for q in ds.queries}
    return {"good": Run(good, "good"), "bad": Run(bad, "bad")}


def candidates(study, home: Path):
    """A :class:`workbench.tuning.candidates.Candidates` holding the synthetic runs (no engine behind it)."""
    from workbench.tuning.candidates import Candidates

    c = Candidates.__new__(Candidates)
    c.study, c.home, c.log = study, home, (lambda _m: None)
    c.ds = dataset()
    c.queries = {q.query_id: q for q in c.ds.queries}
    c._runs, c._lat, c._matrices = {}, {}, {}
    for lane, run in runs(c.ds).items():
        c._runs[(lane, ())] = run
        c._lat[(lane, ())] = {q.query_id: 1.0 + (lane == "bad") for q in c.ds.queries}
    c.engine = None
    return c


def run(folder: str, trials: int, storage: str) -> None:
    """Entry point for a subprocess (the resume test kills it)."""
    from workbench.tuning.study import run_study

    st = load_study(Path(folder) / "study.toml", known_datasets={"gita"})
    run_study(st, home=Path(folder) / "home", storage=storage, trials=trials,
              candidates=candidates(st, Path(folder) / "home"))
