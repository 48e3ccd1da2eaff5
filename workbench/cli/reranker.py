"""`workbench reranker`: fine-tune a cross-encoder from the judgments."""

from __future__ import annotations

from pathlib import Path
from typing import Optional

import typer

from workbench.cli._shared import _fail, _log, app, choices, echo_json, json_option, qrels_option, secho
from workbench.errors import WorkbenchError

reranker_app = typer.Typer(help="Cross-encoder rerankers: fine-tune one from the judgments.", no_args_is_help=True)
app.add_typer(reranker_app, name="reranker")


@reranker_app.command("train")
def reranker_train(
    dataset: str = typer.Option(..., "-d", "--dataset", help="The dataset whose train split and qrels train the model."),
    experiment: Optional[Path] = typer.Option(None, "-e", "--experiment", help="Experiment TOML whose lanes give the hard "
                                              "negatives (from the candidate cache); default experiments/kb.toml."),
    lanes: Optional[str] = typer.Option(None, "--lanes", help="Comma-separated lanes for the negatives (default: every "
                                        "lane the experiment's configs use, but the reference lane)."),
    qrels: Optional[str] = qrels_option("the experiment file's"),
    base: Optional[str] = typer.Option(None, "--base", help="Model to start from: a local folder (a sentence-"
                                       "transformers bi-encoder or a cross-encoder) or all-MiniLM-L6-v2 (default)."),
    steps: Optional[int] = typer.Option(None, "--steps", help="Optimisation steps.", show_default=False),
    batch_size: Optional[int] = typer.Option(None, "--batch-size", help="Pairs per step.", show_default=False),
    max_length: Optional[int] = typer.Option(None, "--max-length", help="Word pieces per (query, document) pair.",
                                   show_default=False),
    lr: Optional[float] = typer.Option(None, "--lr", help="Peak learning rate (AdamW).", show_default=False),
    negatives: Optional[int] = typer.Option(None, "--negatives", help="Hard negatives per query.", show_default=False),
    seed: Optional[int] = typer.Option(None, "--seed", help="Seed of the sampler, the head and dropout.", show_default=False),
    split: str = typer.Option("train", "--split", help="Must be train: dev and test are held out for evaluation."),
    out: Optional[Path] = typer.Option(None, "-o", "--out", help="Model folder (default <home>/models/<dataset>-ce)."),
    force: bool = typer.Option(False, "--force", help="Replace a non-empty output folder."),
    skip_existing: bool = typer.Option(False, "--skip-existing", help="When the output folder already holds a "
                                       "cross-encoder, keep it and exit 0 (what `make main` does on a second run)."),
    track: bool = typer.Option(True, "--mlflow/--no-mlflow", help="Log the run and the model to MLflow."),
    threads: Optional[int] = typer.Option(None, "--threads", help="Torch threads (default: one per free core, or "
                                          "WORKBENCH_THREADS).", show_default=False),
    freeze_layers: Optional[int] = typer.Option(None, "--freeze-layers", help="Bottom layers kept frozen with the word "
                                                "embeddings (0: train every weight).", show_default=False),
    query_types: Optional[str] = typer.Option(None, "--query-types", help="Comma-separated query types to learn from "
                                              "(default paraphrase,term: a reference's relevance is not in the text); "
                                              "all: every type.", show_default=False),
    text_order: Optional[str] = typer.Option(None, "--text-order", **choices("latin-first", "index"),
                                             help="Document text order in the pairs: latin-first "
                                             "(default: English translations first) or index.", show_default=False),
    as_json: bool = json_option("the model folder, whether it was kept, the pair counts, the final loss and the "
                                "MLflow run"),
) -> None:
    """Fine-tune a cross-encoder on the train split's judgments, reproducibly, on CPU.

    Positives: the qrels' relevant pairs; hard negatives: the lanes' top candidates not judged relevant
    (judged non-relevant first, then unjudged). Writes the model with a model card, then prints how to use it.
    Defaults: the recipe of workbench.reranking.training (--steps 300 --batch-size 16 --max-length 64 --lr 1e-4
    --freeze-layers 4 --text-order latin-first --query-types paraphrase,term --negatives 4 --seed 0): about
    3 minutes on the 2-core machine (gita, cached candidates).
    """
    from workbench.experiment.tracking import tracking_uri
    from workbench.experiment.training import train_reranker
    from workbench.reranking import training as rt
    from workbench.settings import home_dir

    def warn(msg: str) -> None:
        secho(f"warning: {msg}", fg=typer.colors.YELLOW, err=True)

    try:
        res = train_reranker(dataset, experiment=experiment, lanes=lanes, qrels=qrels, base=base, steps=steps,
                             batch_size=batch_size, max_length=max_length, lr=lr, negatives=negatives, seed=seed,
                             split=split, out=out, force=force, skip_existing=skip_existing, track=track,
                             threads=threads, freeze_layers=freeze_layers, query_types=query_types,
                             text_order=text_order, log=_log, warn=warn)
    except WorkbenchError as exc:
        _fail(exc)
    except KeyboardInterrupt:
        secho("interrupted: no model was written", fg=typer.colors.YELLOW, err=True)
        raise typer.Exit(130) from None
    if as_json and res.kept:
        echo_json({"folder": str(res.folder), "kept": True})
        return
    if res.kept:
        typer.echo(f"{res.folder} already holds a cross-encoder: kept (--force retrains it)")
        return
    if res.run_id:
        secho(f"tracked in MLflow: {tracking_uri(home_dir())} (experiment {rt.MLFLOW_EXPERIMENT}, run {res.run_id})",
              err=True)
    elif res.warning:
        warn(res.warning)
    stats = res.stats
    final = res.card["loss"]["summary"].get("final_smoothed", float("nan"))
    if as_json:
        from dataclasses import asdict

        echo_json({"folder": str(res.folder), "kept": False, "pairs": asdict(stats), "final_loss_smoothed": final,
                   "elapsed_s": round(res.elapsed_s, 1), "mlflow_run": res.run_id, "warning": res.warning or None})
        return
    typer.echo(f"trained {res.folder}: {stats.pairs} pairs ({stats.positives} positive, {stats.negatives} negative, "
               f"{stats.unjudged_negatives} of them unjudged), final loss {final:.4f} (smoothed), "
               f"{res.elapsed_s:.0f} s; use it:{rt.usage_line(res.folder, res.max_length)}")
