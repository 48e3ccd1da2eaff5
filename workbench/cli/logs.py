"""`workbench logs`: real users' traffic, as UBI logs (issue #43)."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option, secho
from workbench.errors import WorkbenchError

logs_app = typer.Typer(help="Users' traffic as UBI logs: import what `serve --ubi-log` or OpenSearch's UBI wrote.",
                       no_args_is_help=True)
app.add_typer(logs_app, name="logs")


@logs_app.command("import")
def logs_import(
    name: str = typer.Argument(..., help="The log set to write (replaced whole): <home>/logs/NAME."),
    paths: list[Path] = typer.Argument(..., help="UBI JSON-lines files or folders of them (gzipped or rotated too)."),
    as_json: bool = json_option("the import report"),
) -> None:
    """Read UBI queries and events (the workbench's own logs, or an export of OpenSearch's ubi_queries and
    ubi_events indexes) into a log set, and say what was read and what was skipped and why.

    Example: workbench logs import prod-week49 /var/log/workbench-ubi/ --json
    """
    from workbench.names import name_error
    from workbench.settings import home_dir
    from workbench.traffic.importer import log_dir, read_logs, write_log_set

    try:
        problem = name_error("log set name", name)
        if problem:
            raise WorkbenchError(problem)
        home = home_dir()
        queries, events, report = read_logs(paths, name, log=_log)
        if not queries and not events:
            raise WorkbenchError(f"nothing to import from {', '.join(map(str, paths))}: no line is a UBI query or "
                                 f"event ({report.as_dict()['skipped_total']} skipped: "
                                 f"{', '.join(report.skipped) or 'the files are empty'})")
        folder = write_log_set(log_dir(home, name), queries, events, report)
    except (WorkbenchError, OSError) as exc:
        _fail(exc)
    body = report.as_dict()
    if as_json:
        echo_json({**body, "folder": str(folder)})
        return
    secho(f"log set {name}: {report.queries:,} queries and {report.events:,} events from {len(report.files)} file(s), "
          f"{report.lines:,} lines ({report.first} to {report.last}); {report.clients:,} clients, "
          f"{report.sessions:,} sessions", bold=True)
    if report.actions:
        typer.echo("  actions: " + ", ".join(f"{a} {n:,}" for a, n in sorted(report.actions.items())))
    if report.events_without_query:
        typer.echo(f"  {report.events_without_query:,} events name a query the import does not hold (kept)")
    for reason, entry in body["skipped"].items():
        typer.echo(f"  skipped {entry['count']:,}: {reason} (e.g. {', '.join(entry['examples'])})")
    typer.echo(f"  written to {folder}")


@logs_app.command("compare")
def logs_compare(
    name: str = typer.Argument(..., help="A log set (workbench logs import NAME ...)."),
    alpha: float = typer.Option(0.05, "--alpha", min=0.0001, max=0.5, help="The sign test's level."),
    as_json: bool = json_option("each interleaved pair's result", "a JSON list"),
) -> None:
    """Which of two interleaved configs readers preferred (serve --interleave A,B): each search's clicks and
    follow-up fetches credited to the config that put the hit there, the wins tested with the two-sided sign test,
    and after how many searches with a preference it first said so.

    Example: workbench logs compare week49 --json
    """
    from workbench.settings import home_dir
    from workbench.traffic.importer import load_log_set
    from workbench.traffic.interleave import compare_log

    try:
        queries, events = load_log_set(home_dir(), name)
    except WorkbenchError as exc:
        _fail(exc)
    results = compare_log(queries, events, alpha)
    if as_json:
        echo_json([r.as_dict() for r in results])
        return
    if not results:
        typer.echo(f"log set {name} holds no interleaved search (serve --interleave A,B --ubi-log DIR writes them)")
        return
    for r in results:
        c = r.comparison
        secho(f"{r.a} vs {r.b} ({r.method}): {r.impressions:,} searches, {r.with_clicks:,} with a click; wins "
              f"{r.a} {c.wins_a:,}, {r.b} {c.wins_b:,}, ties {c.ties:,}; sign test p = {c.p_value:.4g}", bold=True)
        if c.verdict == "no difference shown":
            typer.echo(f"  no difference shown at alpha = {c.alpha:g}")
        else:
            won = r.a if c.verdict == "A" else r.b
            when = (f"first after {c.first_significant:,} searches with a preference ({r.sessions_needed:,} of "
                    f"{r.sessions:,} sessions)") if c.first_significant else ""
            typer.echo(f"  {won} wins at alpha = {c.alpha:g}; {when}"
                       f"{'' if c.stayed else ' (it did not stay significant throughout)'}")


@logs_app.command("sample")
def logs_sample(
    name: str = typer.Argument(..., help="A log set (workbench logs import NAME ...)."),
    out: Path = typer.Option(..., "--out", "-o", help="The queries file to write (TSV; give it to a dataset as "
                             "traffic_queries in datasets.toml)."),
    size: int = typer.Option(200, "--size", min=1, help="Distinct queries to draw."),
    method: str = typer.Option("stratified", "--method", help="random, pps (by frequency) or stratified (by "
                               "predicted query type x script)."),
    seed: int = typer.Option(7, "--seed", help="The draw's seed (also the split hashing's)."),
    as_json: bool = json_option("what was drawn"),
) -> None:
    """Draw a query set from what readers typed: searches normalised and deduplicated, each with its frequency and
    predicted type, drawn at random, by frequency or by stratum, split by group hashing, written as a queries
    file for a dataset's traffic_queries (then pooled and judged like any other set).

    Example: workbench logs sample week49 --size 300 --method stratified -o datasets/traffic/week49.tsv
    """
    import csv

    from workbench.settings import home_dir
    from workbench.traffic.importer import load_log_set
    from workbench.traffic.sample import METHODS, distinct, draw, rows

    try:
        if method not in METHODS:
            raise WorkbenchError(f"--method {method!r} is not one of {', '.join(METHODS)}")
        queries, _events = load_log_set(home_dir(), name)
        population = distinct(queries["user_query"], queries["client_id"])
        if not population:
            raise WorkbenchError(f"log set {name} holds no query with text to draw from")
        drawn = draw(population, size, method, seed)
        table = rows(drawn, seed)
        out.parent.mkdir(parents=True, exist_ok=True)
        from workbench._infra.durable import atomic_path

        with atomic_path(out) as tmp, tmp.open("w", encoding="utf-8", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(table[0]), delimiter="\t", lineterminator="\n")
            w.writeheader()
            w.writerows(table)
    except (WorkbenchError, OSError, ValueError) as exc:
        _fail(exc)
    strata: dict[str, list[int]] = {}
    for q in population:
        strata.setdefault(q.stratum, [0, 0])[0] += 1
    for q in drawn:
        strata[q.stratum][1] += 1
    body = {"log_set": name, "searches": int(len(queries)), "distinct": len(population), "drawn": len(drawn),
            "method": method, "seed": seed, "file": str(out),
            "strata": {s: {"distinct": a, "drawn": b} for s, (a, b) in sorted(strata.items())}}
    if as_json:
        echo_json(body)
        return
    secho(f"{len(drawn):,} of {len(population):,} distinct queries ({len(queries):,} searches) drawn by {method} "
          f"(seed {seed}) into {out}", bold=True)
    for s, (a, b) in sorted(strata.items()):
        typer.echo(f"  {s:<28} {b:>6,} of {a:,}")
    typer.echo(f"  use it: traffic_queries = \"{out}\" in a dataset's section of datasets.toml, then "
               "workbench data build and workbench judge pool")


@logs_app.command("judge")
def logs_judge(
    name: str = typer.Argument(..., help="A log set (workbench logs import NAME ...)."),
    dataset: str = typer.Option(..., "--dataset", "-d", help="The dataset whose queries and documents are graded."),
    model: str = typer.Option("pbm", "--model", help="pbm (position-based, EM), cascade or coec (clicks over "
                              "expected clicks)."),
    min_impressions: int = typer.Option(10, "--min-impressions", min=1, help="Least times a (query, document) pair "
                                        "was shown before it is graded."),
    thresholds: Optional[str] = typer.Option(None, "--thresholds", help="LO,HI: grade 1 from LO, 2 from HI (default "
                                             "pbm and cascade 0.2,0.5; coec 0.8,1.5)."),
    agreement: bool = typer.Option(True, "--agreement/--no-agreement", help="Compare with the scholars' grades "
                                   "(the judgment store) per query type x script."),
    as_json: bool = json_option("the layer written and its agreement"),
) -> None:
    """Derive implicit judgments for a dataset from readers' clicks and follow-up fetches, write them as its
    `implicit` qrels layer (eval --qrels implicit), and report their agreement with the scholars per stratum.

    Example: workbench logs judge week49 -d gita --model pbm --min-impressions 10
    """
    from workbench.data import catalog
    from workbench.judging import implicit as layer_file
    from workbench.settings import home_dir
    from workbench.traffic.clicks import grades
    from workbench.traffic.implicit import MODELS, THRESHOLDS, agreement_by_stratum, derive, impressions, to_dataset
    from workbench.traffic.importer import load_log_set

    try:
        if model not in MODELS:
            raise WorkbenchError(f"--model {model!r} is not one of {', '.join(MODELS)}")
        cut = THRESHOLDS[model]
        if thresholds is not None:
            try:
                lo, hi = (float(x) for x in thresholds.split(","))
            except ValueError:
                raise WorkbenchError(f"--thresholds {thresholds!r}: give two numbers, LO,HI (e.g. 0.2,0.5)") from None
            if not lo < hi:
                raise WorkbenchError(f"--thresholds {thresholds!r}: LO must be below HI")
            cut = (lo, hi)
        home = home_dir()
        queries, events = load_log_set(home, name)
        ds = catalog.ensure(dataset, catalog.load_definitions(), home=home, log=_log)
        imps = impressions(queries, events)
        scores = derive(imps, model, min_impressions)
        graded, rows, left = to_dataset(scores, grades(scores, cut), ds)
        provenance = {"log_set": name, "model": model, "min_impressions": min_impressions, "thresholds": list(cut),
                      "searches": len(imps), "pairs_scored": len(scores), **left}
        path = layer_file.write(home, dataset, graded, rows, provenance)
        report: dict = {"dataset": dataset, "file": str(path), "pairs": len(graded),
                        "queries": len({q for q, _d in graded}), **provenance}
        if agreement:
            from workbench.judging.layers import load_layer
            from workbench.text.scripts import script_of

            human = {(r.query_id, r.doc_id): r.relevance for r in load_layer("human", ds, home=home).qrels}
            strata = {q.query_id: f"{q.query_type}/{script_of(q.text)}" for q in ds.queries}
            report["agreement"] = agreement_by_stratum(graded, human, strata)
    except (WorkbenchError, OSError, ValueError) as exc:
        _fail(exc)
    if as_json:
        echo_json(report)
        return
    secho(f"implicit qrels of {dataset}: {report['pairs']:,} pairs on {report['queries']:,} queries from "
          f"{report['searches']:,} searches of log set {name} ({model}, at least {min_impressions} impressions, "
          f"grades from {cut[0]:g} and {cut[1]:g}) -> {path}", bold=True)
    if left["keys_without_query"] or left["pairs_without_document"]:
        typer.echo(f"  left out: {left['keys_without_query']:,} queries the dataset lacks (draw them with logs "
                   f"sample and add them as traffic_queries), {left['pairs_without_document']:,} pairs whose "
                   "document it lacks")
    for stratum, a in (report.get("agreement") or {}).items():
        k, al = a["kappa"], a["alpha"]
        fmt = lambda e: "n/a" if e["value"] is None else (  # noqa: E731
            f"{e['value']:.2f}" + (f" [{e['low']:.2f}, {e['high']:.2f}]" if e["low"] is not None else ""))
        typer.echo(f"  agreement with the scholars, {stratum}: {a['pairs']:,} pairs, kappa {fmt(k)}, alpha {fmt(al)}")
