"""`workbench judge`: raters, pools, agreement, adjudication, qrels export and import, backups."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Optional

import typer

from workbench.cli._shared import _fail, _log, app, choices, echo_json, json_option
from workbench.errors import WorkbenchError
from workbench.types import DEFAULT_SEED

judge_app = typer.Typer(help="Human relevance judgments: raters, pools, agreement, adjudication, qrels export and "
                        "import (the store lives in the workbench's PostgreSQL).", no_args_is_help=True)
app.add_typer(judge_app, name="judge")
rater_app = typer.Typer(help="Raters and their tokens.", no_args_is_help=True)
judge_app.add_typer(rater_app, name="rater")


def _judge_store():
    """The judgment store of the workbench's server (the home's embedded PostgreSQL unless WORKBENCH_PG_DSN)."""
    from workbench.judging.store import JudgmentStore
    from workbench.settings import home_dir

    return JudgmentStore.open(home_dir())


@rater_app.command("add")
def judge_rater_add(
    name: str = typer.Argument(..., help="The rater's name (letters, digits, _ . @ -)."),
    adjudicator: bool = typer.Option(False, "--adjudicator", help="May also resolve disagreements (sees both grades)."),
) -> None:
    """Create a rater and print their token once (only its sha256 is stored); they sign in to the Judge page with it."""
    try:
        rater, token = _judge_store().add_rater(name, "adjudicator" if adjudicator else "rater")
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(token)
    _log(f"{rater.role} {rater.name!r} created; the token above is shown only this once (only its hash is stored). "
         "Give it to them: they open the dashboard's Judge page and paste it")


@rater_app.command("token")
def judge_rater_token(name: str = typer.Argument(..., help="The rater's name (active or revoked).")) -> None:
    """Give a rater a new token and print it once (the old one stops signing in); a revoked rater becomes
    active again with all their grades under the same name."""
    try:
        store = _judge_store()
        was_active = any(r.name == name for r in store.raters())
        rater, token = store.new_token(name)
    except WorkbenchError as exc:
        _fail(exc)
    typer.echo(token)
    _log(f"{rater.role} {rater.name!r} has a new token (above, shown only this once); their old token no longer "
         "signs in")
    if not was_active:
        _log(f"{rater.name} was revoked; this new token makes {rater.name} active again (all their grades stay "
             f"under that name); `workbench judge rater revoke {rater.name}` undoes it")


@rater_app.command("list")
def judge_rater_list(as_json: bool = json_option("each active rater's name and role", "a JSON list")) -> None:
    """List the active raters and their roles (tokens are not stored, so never shown)."""
    try:
        raters = _judge_store().raters()
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json([{"name": r.name, "role": r.role} for r in raters])
        return
    if not raters:
        _log("no raters yet: `workbench judge rater add NAME` (add --adjudicator for one who resolves disagreements)")
    for r in raters:
        typer.echo(f"{r.name}\t{r.role}")


@rater_app.command("revoke")
def judge_rater_revoke(name: str = typer.Argument(..., help="The rater's name.")) -> None:
    """Revoke a rater's token (their judgments stay in the history)."""
    try:
        _judge_store().revoke_rater(name)
    except WorkbenchError as exc:
        _fail(exc)
    _log(f"the token of {name!r} no longer signs in; their judgments are kept")


@judge_app.command("pool")
def judge_pool(
    experiment: Path = typer.Option(..., "--experiment", "-e", help="Experiment TOML whose configs are pooled."),
    config: list[str] = typer.Option([], "--config", "-c", help="A config to pool over (repeatable; default: all)."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset to pool (one of the experiment's)."),
    depth: int = typer.Option(10, "--depth", help="Pool each config's and lane's top DEPTH (TREC depth-k pooling)."),
    split: list[str] = typer.Option([], "--split", **choices("train", "dev", "test"),
                                    help="Pool queries of this split (repeatable; default: the "
                                    "experiment's splits)."),
    max_pairs: Optional[int] = typer.Option(None, "--max-pairs", help="Keep the N pairs of highest priority "
                                            "(audit included); default: every pair."),
    raters_per_pair: int = typer.Option(2, "--raters-per-pair", help="Different raters who judge each pair (1-10)."),
    audit: Optional[int] = typer.Option(None, "--audit", help="Built labels sampled for the scholars to audit "
                                        "(default: 5% of the pool; 0: none)."),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", help="Breaks priority ties and draws the audit sample."),
    as_json: bool = json_option("the pool's summary"),
) -> None:
    """Pool unjudged (query, document) pairs from the candidate cache for scholars to judge, most useful first.

    Depth-k pooling over the configs' fused top DEPTH and their lanes' top DEPTH, minus pairs already judged,
    pooled or labelled by the built qrels (but for an audit sample of those); ordered by priority tiers. Prints
    the pool's size and each config's Judged@10 now and once the pool is judged.
    """
    from workbench.data.catalog import data_for
    from workbench.experiment import pooling as pool_plan
    from workbench.experiment.config import load_experiment
    from workbench.judging import pooling
    from workbench.settings import home_dir

    try:
        exp = load_experiment(experiment)
        request: dict[str, Any] = dict(configs=config or None, depth=depth, splits=split or None, max_pairs=max_pairs,
                       raters_per_pair=raters_per_pair, audit=audit, seed=seed)
        pool_plan.check_request(exp, dataset, **request)  # every option, before anything is read or written
        data_for(list(exp.datasets))  # the corpora its datasets read (none for source = "files")
        home = home_dir()
        store = _judge_store()
        try:
            plan = pool_plan.plan_pool(exp, dataset, **request, home=home, store=store, log=_log)
            pool_id, stored = pooling.store_pool(plan, store) if plan.pairs else (None, 0)
        finally:
            store.close()
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"pool_id": pool_id, "dataset": plan.dataset, "pairs": stored,
                   "pool_pairs": plan.pool_pairs, "audit_pairs": plan.audit_pairs,
                   "slots": stored * plan.raters_per_pair, "raters_per_pair": plan.raters_per_pair,
                   "queries": plan.queries, "candidates": plan.candidates, "excluded": plan.excluded,
                   "capped": plan.capped, "tiers": plan.tiers, "open_elsewhere": plan.open_elsewhere,
                   "stale": plan.stale, "skipped": plan.params["skipped"],
                   "judged_at_10_now": plan.params["judged_at_10_now"],
                   "judged_at_10_after": plan.params["judged_at_10_after"],
                   "elapsed_s": round(plan.elapsed_s, 3)})
    else:
        typer.echo(pooling.summary(plan))
    if pool_id is None:
        _log(f"nothing to pool: every pair in the top {depth} of these configs on {dataset} is judged, pooled or "
             "labelled (raise --depth, or add --audit N to audit built labels)")
        return
    if stored < len(plan.pairs):
        _log(f"{len(plan.pairs) - stored} of the planned pairs were pooled meanwhile by another command; "
             f"pool {pool_id} holds {stored}")
    _log(f"pool {pool_id} stored: {stored} pairs, {stored * plan.raters_per_pair} judging slots, in "
         f"{plan.elapsed_s:.1f} s of planning; raters judge them on the dashboard's Judge page "
         "(`workbench judge rater add NAME` makes a token)")


# ---------------------------------------------------------------- judge: agreement, adjudication settings, export, import
# (workbench.judging.agreement and workbench.judging.trecio)

def _judge_dataset(name: str, *, build: bool = True):
    """The built dataset ``name`` (built first when missing or stale), or only its checked name (``build=False``)."""
    from workbench.data import catalog
    from workbench.settings import home_dir

    defs = catalog.load_definitions()
    defs.definition(name)  # ConfigError naming the defined datasets
    if not build:
        return name
    return catalog.ensure(name, defs, home=home_dir(), log=_log)


@judge_app.command("agreement")
def judge_agreement(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset whose judgments to compare."),
    as_json: bool = json_option("the agreement report"),
    seed: int = typer.Option(DEFAULT_SEED, "--seed", min=0, max=2**32 - 1, help="Bootstrap seed."),
    resamples: int = typer.Option(2000, "--resamples", min=0, max=100_000, help="Bootstrap resamples (0: no CIs)."),
) -> None:
    """Inter-rater agreement: Krippendorff's alpha (ordinal) overall, per query type and per rater, Cohen's kappa
    (linear) per rater pair, with 95% bootstrap CIs over (query, document) pairs, the pooled confusion table, and
    the pool's quality (the share of graded pooled pairs graded 0)."""
    from workbench.judging import agreement as ag
    from workbench.judging.layers import final_grades
    from workbench.judging.pooling import pool_quality

    try:
        ds = _judge_dataset(dataset)
        with _judge_store() as store, store.snapshot():
            rows, adjudications = store.current(dataset), store.adjudications(dataset)
            at = store.adjudicate_at(dataset)
            reasons = store.pair_reasons(dataset)
        hashes = ag.doc_hashes_of(ds, (r["doc_id"] for r in (*rows, *adjudications)))
        report = ag.agreement(rows, query_types={q.query_id: q.query_type for q in ds.queries}, doc_hashes=hashes,
                              seed=seed, resamples=resamples)
        report["adjudicate_at"] = at
        report["awaiting_adjudication"] = len(ag.disagreements(rows, adjudications, at, doc_hashes=hashes))
        quality = pool_quality(reasons, final_grades(rows, adjudications, hashes))
        report["pool_quality"] = {"graded": quality.graded, "zeros": quality.zeros, "share_zero": quality.share_zero}
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"dataset": dataset, **report})
        return
    if not rows:
        _log(f"no judgments on {dataset} yet: pool pairs (`workbench judge pool`) and judge them on the dashboard's "
             "Judge page, or `workbench judge import`")
    typer.echo(ag.render(report, dataset))
    typer.echo(f"\n{quality.line()} (the share of the pool that was noise: `workbench judge pool` keeps it low)")
    typer.echo(f"\n{report['awaiting_adjudication']:,d} pair(s) await adjudication (0 vs 1 or 2 always; grades "
               f"{report['adjudicate_at']} or more apart; left short by 'cannot judge' with no other rater; "
               f"`workbench judge settings -d {dataset} --adjudicate-at 1|2`)")


@judge_app.command("settings")
def judge_settings(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset."),
    adjudicate_at: Optional[int] = typer.Option(None, "--adjudicate-at",
                                                help="Send pairs whose grades differ by this much (1, the default: every "
                                                     "disagreement; 2: 1 vs 2 settles as 1) to adjudication; 0 vs 1 "
                                                     "or 2 always goes."),
    as_json: bool = json_option("the dataset and its adjudicate-at setting"),
) -> None:
    """Show or change a dataset's judging settings (when a disagreement goes to the adjudicators)."""
    try:
        _judge_dataset(dataset, build=False)
        with _judge_store() as store:
            if adjudicate_at is not None:
                store.set_adjudicate_at(dataset, adjudicate_at)
            now = store.adjudicate_at(dataset)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"dataset": dataset, "adjudicate_at": now})
        return
    typer.echo(f"{dataset}: pairs whose grades differ by {now} or more go to adjudication"
               + (" (and 0 vs 1, always; 1 vs 2 resolves to 1 without an adjudicator; `--adjudicate-at 1` sends "
                  "1 vs 2 too)" if now == 2 else " (every disagreement: 0 vs 1, 0 vs 2, 1 vs 2)"))


@judge_app.command("export")
def judge_export(
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset whose judgments to export."),
    out: Path = typer.Option(..., "--output", "-o", help="The qrels file to write (a provenance JSON goes beside it)."),
    layer: str = typer.Option("human", "--layer", **choices("human", "merged"),
                              help="human (human grades only) or merged (human over the built labels)."),
    fmt: str = typer.Option("trec", "--format", **choices("trec", "csv"),
                            help="trec (the layer's qrels) or csv (each rater's current grades, "
                                                       "the import format; not a backup: `workbench judge backup FILE`)."),
    as_json: bool = json_option("the provenance written beside the file (with file and provenance_file)"),
) -> None:
    """Write the human judgments as TREC qrels (or CSV), with FILE.provenance.json: raters, counts, agreement,
    stale judgments left out, the qrels' sha256, the store's schema version and the dataset's manifest hash.

    Not a backup: it holds current grades only (no adjudications, notes, "cannot judge", undo history or
    settings). `workbench judge backup FILE` writes the whole store."""
    from workbench.judging import trecio

    try:
        if out.is_dir():
            raise WorkbenchError(f"--output {out} is a folder; give a file path, e.g. {out / 'qrels.txt'}")
        if not out.absolute().parent.is_dir():
            raise WorkbenchError(f"--output {out}: the folder {out.absolute().parent} does not exist; create it "
                                 "(mkdir -p) or give a path in a folder that does")
        trecio.check_export(layer, fmt)
        ds = _judge_dataset(dataset)
        with _judge_store() as store:
            prov = trecio.export(store, ds, out, layer=layer, fmt=fmt)
    except WorkbenchError as exc:
        _fail(exc)
    what = f"{prov['lines']:,d} qrels ({prov['layer']})" if fmt == "trec" else f"{prov['lines']:,d} judgments"
    stale = prov["stale"]["judgments"] + prov["stale"]["adjudications"]
    if not prov["lines"]:
        _log(f"no human judgments of {dataset} to export yet: {out} is empty (`workbench judge pool` starts a round; "
             "`workbench judge agreement` shows what is judged)")
    if as_json:
        echo_json({**prov, "file": str(out.absolute()), "provenance_file": str(trecio.provenance_path(out).absolute())})
        return
    typer.echo(f"wrote {what} to {out}" + (f" (sha256 {prov['qrels_sha256'][:12]})" if prov["qrels_sha256"] else ""))
    typer.echo(f"provenance: {trecio.provenance_path(out)}")
    if stale:
        _log(f"{stale} stale judgment(s) left out: the document changed after they were made; re-judge them")
    if prov["awaiting_adjudication"]:
        _log(f"{prov['awaiting_adjudication']} pair(s) await adjudication; until then they carry the mean grade "
             "rounded down")


@judge_app.command("backup")
def judge_backup(
    file: Path = typer.Argument(..., help="The backup to write: JSON Lines, gzip-compressed when FILE ends in .gz "
                                          "(e.g. judge-2026-12-04.jsonl.gz). An existing FILE is refused unless --force."),
    force: bool = typer.Option(False, "--force", help="Replace FILE when it exists (its old backup is lost)."),
    as_json: bool = json_option("the file and the counts it holds"),
) -> None:
    """Back up the whole judgment store: raters (without their tokens), pools, pairs, slots, queues, every
    judgment with its grade, "cannot judge", note, time and undo history, every adjudication, and the settings.
    `workbench judge restore FILE` puts it into an empty store. An existing FILE is kept unless --force; a
    store that holds no judgment is backed up all the same, with a warning."""
    from workbench.judging import backup as bk

    try:
        if file.is_dir():
            raise WorkbenchError(f"{file} is a folder; give a file path, e.g. {file / 'judge.jsonl.gz'}")
        if not file.absolute().parent.is_dir():
            raise WorkbenchError(f"{file}: the folder {file.absolute().parent} does not exist; create it (mkdir -p) "
                                 "or give a path in a folder that does")
        if file.exists() and not force:
            raise WorkbenchError(f"{file} exists and would be overwritten; give a new file name, or pass --force "
                                 "to replace it")
        with _judge_store() as store:
            counts = bk.backup(store, file)
    except WorkbenchError as exc:
        _fail(exc)
    except OSError as exc:
        _fail(WorkbenchError(f"cannot write the backup {file}: {exc.strerror or exc}; choose a writable path"))
    if as_json:
        echo_json({"file": str(file), "counts": counts})
    else:
        typer.echo(f"wrote {file}: " + ", ".join(f"{n:,d} {t}" for t, n in counts.items()))
    if not counts.get("judgments"):
        _log("warning: the store backed up holds no judgment (0 judgments); if you expected grades, check "
             "WORKBENCH_PG_DSN / WORKBENCH_HOME point at the store the raters use, and keep your older backups")
    _log("tokens are not in the backup: after a restore, `workbench judge rater token NAME` gives each rater a new one")


@judge_app.command("restore")
def judge_restore(file: Path = typer.Argument(..., help="A file `workbench judge backup` wrote."),
                  as_json: bool = json_option("the file and the counts restored")) -> None:
    """Restore a backup into an empty judgment store (the file is checked whole first; one transaction)."""
    from workbench.judging import backup as bk

    try:
        checked = bk.read_backup(file)  # the whole file checked before the store is opened (or created)
        with _judge_store() as store:
            counts = bk.restore(store, file, log=_log, checked=checked)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"file": str(file), "counts": counts})
    else:
        typer.echo(f"restored {file}: " + ", ".join(f"{n:,d} {t}" for t, n in counts.items()))


@judge_app.command("import")
def judge_import(
    file: Path = typer.Argument(..., help="TREC qrels (needs --rater) or CSV with the header "
                                          "query_id,doc_id,relevance,rater."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset the judgments are for."),
    rater: Optional[str] = typer.Option(None, "--rater", help="Who judged a TREC qrels file."),
    as_json: bool = json_option("what was imported (rows, format, raters, replaced, new_raters)"),
) -> None:
    """Import judgments from another tool; every line is checked first (ids in the built dataset, grades 0-2),
    and a file with any bad line writes nothing."""
    from workbench.judging import trecio

    try:
        ds = _judge_dataset(dataset)
        with _judge_store() as store:
            got = trecio.import_file(store, ds, file, rater=rater)
    except WorkbenchError as exc:
        _fail(exc)
    if as_json:
        echo_json({"dataset": dataset, **got})
        return
    who = ", ".join(f"{n} {c:,d}" for n, c in got["raters"].items())
    typer.echo(f"imported {got['rows']:,d} judgments ({got['format']}) into {dataset}: {who}")
    if got["replaced"]:
        _log(f"{got['replaced']} of them replace an earlier grade by the same rater (the history keeps both)")
    if got["new_raters"]:
        _log(f"new rater(s) {', '.join(got['new_raters'])} recorded without a token (imported raters do not sign in)")
