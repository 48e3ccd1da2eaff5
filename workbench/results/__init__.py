"""The public read API: what the main job left in a workbench home, for notebooks and scripts.

One object, :class:`Results`, reads a home (``WORKBENCH_HOME`` or ``~/.workbench``) the way the
dashboard does — the same readers (:mod:`workbench.results.store`, :mod:`workbench.results.studies`,
:mod:`workbench.results.gates`, :mod:`workbench.judging`), so a notebook and a dashboard page
show the same numbers. Nothing here writes, and nothing queries a retrieval service:

* evaluation runs from MLflow (:meth:`Results.runs`), a config's per-query table
  (:meth:`Results.per_query`), its fused ranking (:meth:`Results.run`) and every lane's candidates
  (:meth:`Results.lanes`);
* a built dataset's queries and the qrels of any layer — ``built``, ``human``, ``merged``
  (:meth:`Results.queries`, :meth:`Results.qrels`);
* Optuna studies (:meth:`Results.studies`, :meth:`Results.study_report`, :meth:`Results.trials`,
  :meth:`Results.optuna_study`), gate reports (:meth:`Results.gate_reports`, :meth:`Results.gate_checks`),
  judgments, pool coverage and inter-rater agreement (:meth:`Results.judgments`,
  :meth:`Results.pool_coverage`, :meth:`Results.agreement`);
* conversions: :func:`run_frame` (pandas, ir_measures' columns ``query_id, doc_id, score, rank``),
  :func:`workbench.eval.evaluate.ranx_run` / :func:`workbench.eval.evaluate.ranx_qrels` (ranx);
* :func:`compare`: a ranx comparison report of several runs on the same queries with a paired test
  and every p-value adjusted for multiple comparisons (Holm–Bonferroni by default).

Example (the main job has run)::

    >>> from workbench.results import Results, compare
    >>> res = Results()
    >>> res.runs(experiment="seeds")[["config", "metric.recall_at_10"]].head()   # doctest: +SKIP
    >>> pq = res.per_query("aicharya-rrf60-ref", experiment="seeds")             # doctest: +SKIP
    >>> pq.groupby("query_type")["R@10"].mean()                                  # doctest: +SKIP
    >>> runs = {c: res.run(c, experiment="seeds") for c in ("aicharya-rrf60-ref", "e5-translit-lemma-ref")}
    >>> cmp = compare(runs, res.qrels("gita"), ["R@10", "nDCG@10"],
    ...               query_ids=pq.query_id[pq.split == "test"])                  # doctest: +SKIP
    >>> cmp.pvalues                                                              # doctest: +SKIP
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from workbench.errors import ConfigError, DataError
from workbench.run import Run


def _optional_str(**values: Any) -> None:
    """Each value is None or a str (a filter of :meth:`Results.runs`); else ConfigError naming it."""
    for name, v in values.items():
        if v is not None and not isinstance(v, str):
            raise ConfigError(f"{name} must be a name (str) or None, got {type(v).__name__} {v!r}")


def run_frame(run: Run) -> pd.DataFrame:
    """A run as a table: ``query_id, doc_id, score, rank`` (rank from 1, best first; scores as the run
    holds them, higher is better), in the run's order."""
    rows = [(q, h.doc_id, h.score, i) for q in run for i, h in enumerate(run[q], 1)]
    return pd.DataFrame(rows, columns=["query_id", "doc_id", "score", "rank"])


def qrels_frame(qrels: Iterable[Any]) -> pd.DataFrame:
    """Qrels (:class:`workbench.types.Qrel` objects) as ``query_id, doc_id, relevance``."""
    return pd.DataFrame([(r.query_id, r.doc_id, int(r.relevance)) for r in qrels],
                        columns=["query_id", "doc_id", "relevance"])


def _qrel_rows(qrels: Any) -> list:
    """Qrels given to :func:`compare` as :class:`workbench.types.Qrel` rows.

    Accepts Qrel objects, ``(query_id, doc_id, relevance)`` tuples, or a frame with those columns.

    Raises:
        ConfigError: another shape, or a relevance that is not an integer grade (names the row).
    """
    from workbench.types import Qrel

    need = ["query_id", "doc_id", "relevance"]
    if isinstance(qrels, pd.DataFrame):
        missing = [c for c in need if c not in qrels.columns]
        if missing:
            raise ConfigError(f"the qrels frame lacks column(s) {missing}; it needs {need} (Results.qrels(dataset))")
        rows = list(qrels[need].itertuples(index=False, name=None))
    elif isinstance(qrels, (str, bytes)) or not isinstance(qrels, Iterable):
        raise ConfigError(f"qrels must be Qrel objects, (query_id, doc_id, relevance) tuples or a frame with "
                          f"those columns (Results.qrels(dataset)), got {type(qrels).__name__}")
    else:
        rows = list(qrels)
    out = []
    for i, r in enumerate(rows):
        if isinstance(r, Qrel):
            r = (r.query_id, r.doc_id, r.relevance)
        if not isinstance(r, (tuple, list)) or len(r) != 3:
            raise ConfigError(f"qrels row {i}: {r!r} is not a Qrel or a (query_id, doc_id, relevance) tuple")
        q, d, rel = r
        try:
            grade = int(rel)
        except (TypeError, ValueError, OverflowError):
            grade = None
        if grade is None or isinstance(rel, bool) or grade != rel:
            raise ConfigError(f"qrels row {i} ({q}, {d}): relevance {rel!r} is not an integer grade; "
                              "drop or fix the row")
        out.append(Qrel(str(q), str(d), grade))
    return out


#: The significance level of :func:`compare`'s report: a pair is marked when its adjusted p-value is at most this.
MAX_P = 0.05


@dataclass
class Comparison:
    """What :func:`compare` returns.

    Attributes:
        report: the ranx ``Report`` (prints as ranx's table; ``to_latex()``, ``to_dataframe()``); its superscripts
            mark the pairs whose *adjusted* p-value is at most :data:`MAX_P`, and its p-values are those of
            ``pvalues``' ``p_value`` column.
        means: one row per run: the mean of each measure over the compared queries.
        pvalues: one row per pair of runs and measure: ``run_a, run_b, measure, mean_a, mean_b,
            p_value`` (ranx's paired test, two-sided; a randomization p-value is at least
            1 / (permutations + 1)) and ``p_adjusted`` (over every row: one family).
        test: ranx's name of the paired test (``fisher``: Fisher's randomization test, ``student``:
            the paired t-test; Smucker et al. 2007 compare them).
        adjustment: the correction's name (:data:`workbench.eval.stats.P_ADJUST_NAME`).
        queries: how many queries were compared.
    """

    report: Any
    means: pd.DataFrame
    pvalues: pd.DataFrame
    test: str
    adjustment: str
    queries: int


def compare(runs: Mapping[str, Run], qrels: Iterable[Any] | pd.DataFrame, measures: Sequence[str], *,
            query_ids: Iterable[str] | None = None, test: str = "fisher", permutations: int = 10_000,
            adjust: str | None = None, seed: int = 42) -> Comparison:
    """Compare several runs on the same queries with ranx, adjusting the p-values for reading them together.

    Every run is scored in its own order (ties as the workbench broke them) on the queries of
    ``query_ids`` (default: every query with a relevant document); a query a run has no hits for
    counts 0, as in :func:`workbench.eval.evaluate.evaluate`.

    Args:
        runs: name → :class:`workbench.run.Run` (two or more).
        qrels: :class:`workbench.types.Qrel` objects, ``(query_id, doc_id, relevance)`` tuples or a frame with
            those columns.
        measures: workbench names with a ranx equivalent: ``R@k``, ``P@k``, ``RR@k``, ``nDCG@k`` (one string
            is one measure).
        query_ids: the queries to compare (e.g. one split's).
        test: the paired test: ``fisher`` (the randomization test, default:
            :func:`workbench.eval.stats.sign_flip_p` on ranx's per-query values, exact when at most
            log2(``permutations``) queries differ), or ranx's ``student`` or ``tukey``.
        permutations: the randomization test's random sign patterns (when not enumerated).
        adjust: the multiple-comparison correction (default :data:`workbench.eval.stats.P_ADJUST`,
            Holm–Bonferroni); ``none`` shows the raw p-values only.
        seed: the randomization test's seed.

    Returns:
        a :class:`Comparison`.

    Raises:
        ConfigError: ``runs`` not a dict of two or more :class:`workbench.run.Run`, no measure or one without
            a ranx equivalent, an unknown test or correction, ``permutations`` < 1, qrels of another shape or
            with a grade that is not an integer, or no query with a relevant document among ``query_ids``
            (one string is one query id).
    """
    import itertools
    import warnings

    import numpy as np
    from ranx import compare as ranx_compare

    from workbench.eval.evaluate import ranx_metric, ranx_qrels, ranx_run
    from workbench.eval.stats import P_ADJUST, P_ADJUST_NAME, adjust_pvalues, sign_flip_p
    if not isinstance(runs, Mapping):
        raise ConfigError(f"compare's runs must be a dict name → Run (e.g. {{c: res.run(c) for c in configs}}), "
                          f"got a {type(runs).__name__}")
    if len(runs) < 2:
        raise ConfigError(f"compare needs two runs or more, got {len(runs)}: {list(runs)}")
    wrong = {str(k): type(v).__name__ for k, v in runs.items() if not isinstance(v, Run)}
    if wrong:
        raise ConfigError(f"compare's runs must be workbench.run.Run objects (Results.run(config)); got {wrong}")
    if test not in ("fisher", "student", "tukey"):
        raise ConfigError(f"unknown paired test {test!r}: use fisher, student or tukey")
    if isinstance(permutations, bool) or not isinstance(permutations, int) or permutations < 1:
        raise ConfigError(f"permutations must be an integer >= 1 (random sign patterns of the randomization "
                          f"test; default 10000), got {permutations!r}")
    adjust = adjust or P_ADJUST
    if not isinstance(adjust, str):
        raise ConfigError(f"adjust must name a correction ({', '.join(P_ADJUST_NAME)}), got {adjust!r}")
    try:
        adjust_pvalues([0.5], adjust)
    except ValueError as exc:
        raise ConfigError(str(exc)) from None
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ConfigError(f"seed must be an integer, got {seed!r}")
    if isinstance(measures, str):
        measures = [measures]
    measures = list(measures) if isinstance(measures, Iterable) else None
    if measures is None or not all(isinstance(m, str) for m in measures):
        raise ConfigError(f"measures must be measure names like ['R@10', 'nDCG@10'], got {measures!r}")
    if not measures:
        raise ConfigError("compare needs at least one measure, e.g. ['R@10', 'nDCG@10']")
    names = {m: ranx_metric(m) for m in measures}
    qrels = _qrel_rows(qrels)
    relevant = {r.query_id for r in qrels if r.relevance >= 1}
    if query_ids is not None:
        query_ids = [query_ids] if isinstance(query_ids, str) else query_ids  # one id, not its characters
        if not isinstance(query_ids, Iterable):
            raise ConfigError(f"query_ids must be query ids (a list, a Series, or one id as a str), got {query_ids!r}")
    qids = sorted(relevant if query_ids is None else relevant & {str(q) for q in query_ids})
    if not qids:
        raise ConfigError("compare found no query with a relevant document among the queries given; "
                          "pass the qrels of the runs' dataset and query ids of a split that has judgments")
    rq = ranx_qrels(qrels, qids)
    rruns = []
    for name, run in runs.items():
        rr = ranx_run(run, qids, keep_empty=True)  # a query without hits scores 0
        rr.name = name
        rruns.append(rr)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # numba's cast warnings on query counts
        # Fisher's test is the workbench's own (below): ranx's run of it would be discarded, so it gets one pattern
        report = ranx_compare(rq, rruns, list(names.values()), stat_test=test,
                              n_permutations=1 if test == "fisher" else permutations,
                              max_p=MAX_P, random_seed=seed, make_comparable=True)
    back = {v: k for k, v in names.items()}
    means = pd.DataFrame([{"run": n, **{back[m]: float(v) for m, v in report.results[n].items()}}
                          for n in runs])
    # Fisher's randomization test is the workbench's sign_flip_p on ranx's per-query values: exact when the
    # differing queries are few (2^nz patterns), ties compared with a tolerance, never 0 (Phipson and Smyth
    # 2010). ranx's own compares permuted means with `>=` in floating point, so a permutation that ties the
    # observed difference can count as less extreme: six queries all gaining gave p = 0 there, 1/32 exactly.
    per_query = {rr.name: rr.scores for rr in rruns}
    rows = []
    for a, b in itertools.combinations(runs, 2):
        for m, rm in names.items():
            if test == "fisher":
                d = np.array([per_query[a][rm][q] - per_query[b][rm][q] for q in qids], dtype=float)
                p = sign_flip_p(d, seed, permutations)
            else:
                p = float(report.comparisons[a, b][rm]["p_value"])
            rows.append({"run_a": a, "run_b": b, "measure": m, "mean_a": float(report.results[a][rm]),
                         "mean_b": float(report.results[b][rm]), "p_value": p})
    pvalues = pd.DataFrame(rows)
    pvalues["p_adjusted"] = adjust_pvalues(pvalues["p_value"].to_numpy(), adjust)
    # ranx's table marks a pair significant by its own raw p-value: mark it by the adjusted one instead
    for r in pvalues.itertuples():
        cell = report.comparisons[r.run_a, r.run_b][names[r.measure]]
        cell["p_value"], cell["significant"] = r.p_value, bool(r.p_adjusted <= MAX_P)
    return Comparison(report, means, pvalues, test, P_ADJUST_NAME.get(adjust, adjust), len(qids))


class Results:
    """Read a workbench home (see the module docstring).

    Args:
        home: the workbench home; default ``WORKBENCH_HOME`` or ``~/.workbench``
            (:func:`workbench.settings.home_dir`).

    Attributes:
        home: the home's path.
        uri: its MLflow tracking URI (``MLFLOW_TRACKING_URI`` or ``sqlite:///<home>/mlflow.db``).

    Raises:
        ConfigError: ``home`` is not a path; (from the methods) an argument of the wrong type, or a dataset
            name that is not a plain name.
        DataError: ``home`` does not exist or is a file; (from the methods) a file or store that cannot be
            read, or a run or dataset the home does not hold (the message names it and the command that
            makes it).
    """

    def __init__(self, home: str | Path | None = None):
        from workbench.experiment.tracking import tracking_uri
        from workbench.settings import home_dir

        if home is not None and not isinstance(home, (str, Path)):
            raise ConfigError(f"Results(home) takes the workbench home's path (str or Path), got "
                              f"{type(home).__name__} {home!r}")
        self.home = Path(home).expanduser() if home is not None else home_dir()
        if not self.home.exists():
            raise DataError(f"no workbench home at {self.home}: run the main job (`make main`) there first, or pass "
                            "the home the runs were made in (Results(home=...) or WORKBENCH_HOME)")
        if not self.home.is_dir():
            raise DataError(f"{self.home} is a file, not a workbench home folder; pass the folder the main job "
                            "wrote (Results(home=...) or WORKBENCH_HOME)")
        self.uri = tracking_uri(self.home)

    def __repr__(self) -> str:
        return f"Results(home={str(self.home)!r})"

    def _has_store(self) -> bool:
        """Whether the tracking store exists (a remote MLFLOW_TRACKING_URI is taken to)."""
        if self.uri.startswith("sqlite:///"):
            return Path(self.uri.split(":///", 1)[1]).is_file()
        return True

    def _dataset(self, dataset: Any) -> str:
        """``dataset`` checked to be a dataset name (never a path)."""
        from workbench.data import catalog

        if not catalog.valid_name(dataset):
            raise ConfigError(f"dataset must be a built dataset's name like 'gita' (a folder of "
                              f"{self.home / 'datasets'}), got {dataset!r}")
        if not (self.home / "datasets" / dataset).is_dir():
            defined = catalog.load_definitions()
            if dataset not in defined.datasets:
                raise ConfigError(f"unknown dataset {dataset!r}; the datasets are {', '.join(defined.datasets)} "
                                  f"({defined.path})")
        return dataset

    # ------------------------------------------------------------------ evaluation runs

    def runs(self, *, experiment: str | None = None, dataset: str | None = None, latest: bool = True) -> pd.DataFrame:
        """The complete config runs ``workbench eval`` logged, newest first.

        Args:
            experiment, dataset: keep only those (the experiment's ``name``, e.g. ``seeds``).
            latest: only the newest run of each (experiment, dataset, config).

        Returns:
            :data:`workbench.results.store.RUN_COLUMNS` and one ``metric.<name>`` column per logged
            measure (``metric.recall_at_10`` …); empty when nothing matches.
        """
        from workbench.results import store

        _optional_str(experiment=experiment, dataset=dataset)
        df = store.config_runs(self.uri)
        if experiment is not None:
            df = df[df["experiment"] == experiment]
        if dataset is not None:
            df = df[df["dataset"] == dataset]
        if latest:
            df = store.latest_per_config(df)
        return df.reset_index(drop=True)

    def run_row(self, config: str | pd.Series, *, experiment: str | None = None,
                dataset: str | None = None) -> pd.Series:
        """The newest complete run of ``config`` (a row of :meth:`runs`; a row is returned as given).

        Raises:
            DataError: no such run, or the name matches runs of several experiments or datasets
                (the message lists them: pass ``experiment`` / ``dataset``).
        """
        if isinstance(config, pd.Series):
            return config
        if not isinstance(config, str):
            raise ConfigError(f"config must be a config's name (str) or a row of Results.runs(), got "
                              f"{type(config).__name__} {config!r}")
        df = self.runs(experiment=experiment, dataset=dataset)
        hit = df[df["config"] == config]
        if hit.empty and df.empty and not self._has_store():
            raise DataError(f"{self.home} holds no evaluation runs yet (no {self.uri}); run `workbench eval "
                            "experiments/seeds.toml` (or `make main`) with this home first")
        if hit.empty:
            known = ", ".join(sorted(set(df["experiment"] + "/" + df["config"]))[:20]) or "none"
            raise DataError(f"no complete evaluation run of config {config!r}"
                            + (f" in experiment {experiment!r}" if experiment else "")
                            + (f" on dataset {dataset!r}" if dataset else "")
                            + f" in {self.uri}; known: {known}. Run `workbench eval` on its experiment first")
        if len(hit) > 1:
            where = ", ".join(f"{r.experiment} on {r.dataset}" for r in hit.itertuples())
            raise DataError(f"config {config!r} has runs in several places ({where}); pass experiment= and dataset=")
        return hit.iloc[0]

    def per_query(self, config: str | pd.Series, **where: str) -> pd.DataFrame:
        """A config run's per-query table: ``query_id, query_type, split, language, script, …`` and one
        column per measure (``R@10`` …), as ``workbench eval`` wrote it (``where``: see :meth:`run_row`)."""
        from workbench.results import store

        row = self.run_row(config, **where)
        return store.per_query(row["artifact_uri"], row["run_id"])

    def run(self, config: str | pd.Series, **where: str) -> Run:
        """A config run's fused ranking (``run.trec``) as a :class:`workbench.run.Run` named after the config."""
        from workbench.results import store

        row = self.run_row(config, **where)
        run = store.read_fused_run(row["artifact_uri"], row["run_id"])
        return Run({q: run[q] for q in run}, str(row["config"]))

    def lanes(self, config: str | pd.Series, **where: str) -> pd.DataFrame | None:
        """Every lane's candidates in the eval that config run belongs to: ``lane, query_id, doc_id, rank,
        score`` (rank from 1; each lane's own score); None when that eval did not log them."""
        from workbench.results import store

        row = self.run_row(config, **where)
        parent = store.parent_artifact_uri(row["artifact_uri"], row["run_id"], row["parent_run_id"])
        return store.lane_hits(parent, str(row["dataset"]))

    # ------------------------------------------------------------------ datasets and qrels

    def queries(self, dataset: str) -> pd.DataFrame:
        """The built dataset's queries: ``query_id, text, query_type, split, language, group, …``."""
        from workbench.results import store

        q = store.dataset_files(str(self.home), self._dataset(dataset)).queries
        return q.reset_index() if "query_id" not in q.columns else q.reset_index(drop=True)

    def qrels(self, dataset: str, layer: str = "built") -> pd.DataFrame:
        """The qrels of one layer as ``query_id, doc_id, relevance``.

        ``built`` is the dataset's own file; ``human`` and ``merged`` read the judgment store (the
        home's embedded PostgreSQL, started when needed) and need ``WORKBENCH_DATA`` to load the dataset.

        Raises:
            ConfigError: an unknown layer. DataError: the dataset is not built.
            PgError: the store's server cannot be reached.
        """
        from workbench.judging.layers import check_layer, load_layer

        self._dataset(dataset)
        check_layer(layer, "the qrels layer")
        if layer == "built":
            from workbench.results import store

            files = store.dataset_files(str(self.home), dataset)
            return pd.DataFrame([(q, d, int(r)) for q, docs in files.qrels.items() for d, r in docs.items()],
                                columns=["query_id", "doc_id", "relevance"])
        from workbench.data import catalog

        ds = catalog.load(dataset, home=self.home)
        return qrels_frame(load_layer(layer, ds, home=self.home).qrels)

    # ------------------------------------------------------------------ studies and gates

    def studies(self) -> pd.DataFrame:
        """Every study's output folder: ``name, label, folder, storage``, newest report first."""
        from workbench.results import studies

        return pd.DataFrame([{"name": s.name, "label": s.label, "folder": str(s.folder), "storage": s.storage}
                             for s in studies.find(self.home)], columns=["name", "label", "folder", "storage"])

    def _study(self, name: str):
        from workbench.results import studies

        if not isinstance(name, str):
            raise ConfigError(f"a study is named by a str (Results.studies()['name']), got {type(name).__name__} {name!r}")

        found = [s for s in studies.find(self.home) if s.name == name or s.label == name]
        if not found:
            known = ", ".join(s.label for s in studies.find(self.home)) or "none"
            raise DataError(f"no study {name!r} under {self.home / 'studies'}; known: {known}. "
                            "Run `workbench tune experiments/<study>.toml` first")
        return found[0]

    def study_report(self, name: str):
        """The study's ``report.json`` (:class:`workbench.tuning.report.StudyReport`): the chosen trial,
        its dev/test comparison with CIs and raw and Holm-adjusted p-values, sensitivity."""
        from workbench.results import studies

        return studies.report(self._study(name))

    def study_measures(self, name: str) -> pd.DataFrame:
        """The study's dev/test table: ``split, measure, chosen, chosen_ci, baseline, baseline_ci, delta,
        delta_ci, p_value, p_adjusted``."""
        from workbench.results import studies

        return studies.measures_table(self.study_report(name))

    def trials(self, name: str) -> pd.DataFrame:
        """The study's trials (``trials.csv``: number, value, state, params …)."""
        from workbench.results import studies

        return studies.trials(self._study(name))

    def optuna_study(self, name: str):
        """The study as an ``optuna.Study`` read from its storage (for optuna's plots: history,
        importances, Pareto front). Raises DataError when the study kept no storage (``memory``)."""
        from workbench.results import studies

        out = self._study(name)
        url = studies.storage_url(out, self.home)
        if not url:
            raise DataError(f"study {name} kept its trials in memory only; its trials.csv is in {out.folder}")
        return studies.load(url, out.name)

    def gate_reports(self) -> list:
        """Every gate report under ``<home>/gates`` (:class:`workbench.gate.report.GateReport`), newest first."""
        from workbench.gate.report import GateReport
        from workbench.results import gates

        return [GateReport.load(p) for p in gates.find(self.home)]

    @staticmethod
    def gate_checks(report) -> pd.DataFrame:
        """A gate report's checks as a table, with raw and Holm-adjusted p-values
        (:func:`workbench.results.gates.checks_frame`)."""
        from workbench.gate.report import GateReport
        from workbench.results import gates

        if not isinstance(report, GateReport):
            raise ConfigError(f"gate_checks takes a gate report (one of Results.gate_reports()), got "
                              f"{type(report).__name__}")
        return gates.checks_frame(report)

    # ------------------------------------------------------------------ judgments

    def judgments(self, dataset: str) -> pd.DataFrame:
        """Every rater's current judgment of ``dataset`` from the judgment store: ``query_id, doc_id,
        rater, grade, …`` (one row per rater and pair; empty without a store or judgments)."""
        from workbench.judging.store import JudgmentStore, store_exists

        cols = ["query_id", "doc_id", "rater", "rater_id", "grade", "cannot_judge", "note", "doc_sha256",
                "created_at", "source"]
        self._dataset(dataset)
        if not store_exists(self.home):
            return pd.DataFrame(columns=cols)
        with JudgmentStore.open(self.home) as store:
            return pd.DataFrame(store.current(dataset), columns=cols)

    def pool_coverage(self, dataset: str) -> pd.DataFrame:
        """Per query of ``dataset``: ``query_id, pooled`` (pairs in some judging pool) and ``judged`` (of
        those, pairs a human graded or adjudicated); empty without a store or pools."""
        from workbench.judging.store import JudgmentStore, store_exists

        cols = ["query_id", "pooled", "judged"]
        self._dataset(dataset)
        if not store_exists(self.home):
            return pd.DataFrame(columns=cols)
        with JudgmentStore.open(self.home) as store:
            pooled, judged = store.pooled_pairs(dataset), store.judged_pairs(dataset)
        if not pooled:
            return pd.DataFrame(columns=cols)
        df = pd.DataFrame(sorted(pooled), columns=["query_id", "doc_id"])
        df["judged"] = [(q, d) in judged for q, d in zip(df["query_id"], df["doc_id"])]
        return (df.groupby("query_id").agg(pooled=("doc_id", "size"), judged=("judged", "sum"))
                .reset_index()[cols])

    def agreement(self, dataset: str) -> dict:
        """Inter-rater agreement on ``dataset``: Krippendorff's alpha and Cohen's kappa with bootstrap
        CIs, overall, by query type and by rater (:func:`workbench.judging.agreement.store_agreement`).

        Raises:
            DataError: the home has no judgment store yet.
        """
        from workbench.data import catalog
        from workbench.judging.agreement import store_agreement
        from workbench.judging.store import RATER_ADD_COMMAND, JudgmentStore, store_exists

        self._dataset(dataset)
        if not store_exists(self.home):
            raise DataError(f"{self.home} has no judgment store yet; add a rater with `{RATER_ADD_COMMAND}`")
        ds = catalog.load(dataset, home=self.home)
        with JudgmentStore.open(self.home) as store:
            return store_agreement(store, dataset, ds=ds)
