"""`workbench gate`: the regression gate."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Optional, cast

import typer

from workbench.cli._shared import _fail, _log, app, choices, echo_json, json_option, qrels_option
from workbench.errors import WorkbenchError
from workbench.gate.policy import GatePolicy as _GatePolicy  # for `gate --help`: the defaults
from workbench.types import DEFAULT_SEED as _GATE_SEED


def _policy_help(key: str) -> str:
    """The --help of a gate policy option: the field's description and its default, both from
    :class:`workbench.gate.policy.GatePolicy` (where the defaults are declared, once)."""
    info = _GatePolicy.model_fields[key]
    description = cast(str, info.description)  # every GatePolicy field declares one
    return f"{description[0].upper()}{description[1:]} (default: the gate file's, else {info.default})."


@app.command("gate")
def gate_cmd(
    gate_file: Optional[Path] = typer.Argument(None, help="A gate file of expected values (experiments/gate-*.toml)."),
    candidate: Optional[str] = typer.Option(None, "--candidate", help="EXPERIMENT.toml:CONFIG, an exported .json or a TREC run."),
    baseline: Optional[str] = typer.Option(None, "--baseline", help="EXPERIMENT.toml:CONFIG, an exported .json or a TREC run."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="The dataset whose queries and qrels judge both."),
    measure: Optional[list[str]] = typer.Option(None, "--measure", "-m", help="Measures to gate (first: the one losses "
                                                "are listed by; default R@10)."),
    margin: Optional[float] = typer.Option(None, "--margin", min=0.0, max=1.0, help=_policy_help("margin")),
    min_queries: Optional[int] = typer.Option(None, "--min-queries", min=1, help=_policy_help("min_queries")),
    split: list[str] = typer.Option([], "--split", **choices("train", "dev", "test"),
                                    help="Splits to gate on (default: the gate file's, else all)."),
    judged_floor: Optional[float] = typer.Option(None, "--judged-floor", min=0.0, max=1.0,
                                                 help=_policy_help("judged_floor")),
    judged_action: Optional[str] = typer.Option(None, "--judged-action", **choices("warn", "fail"),
                                                help=_policy_help("judged_action")),
    empty_floor: Optional[float] = typer.Option(None, "--empty-floor", min=0.0, max=1.0,
                                                help=_policy_help("empty_floor")),
    false_empty_ceiling: Optional[float] = typer.Option(None, "--false-empty-ceiling", min=0.0, max=1.0,
                                                        help=_policy_help("false_empty_ceiling")),
    markdown_out: Optional[Path] = typer.Option(None, "--markdown", help="Also write the Markdown summary here."),
    junit_out: Optional[Path] = typer.Option(None, "--junit", help="Write JUnit XML here."),
    seed: int = typer.Option(_GATE_SEED, "--seed", min=0, max=2**32 - 1, help="Bootstrap seed."),
    qrels: Optional[str] = qrels_option("the gate file's, else the experiment's"),
    as_json: bool = json_option("the gate report (the object saved in <home>/gates/: created, command, exit_code, "
                                 "results) instead of Markdown"),
) -> None:
    """Gate a candidate against a baseline or expected values: exit 0 pass, 1 regression, 2 usage or data error.

    The policy options (--margin, --min-queries, --judged-floor, --judged-action, --empty-floor,
    --false-empty-ceiling) override a gate file's
    values, which override the defaults of workbench.gate.policy.GatePolicy; the rules are in workbench.gate.decide.
    """
    from workbench._infra import durable
    from workbench.gate.policy import GATE_MEASURES
    from workbench.gate.report import GateReport, junit, markdown
    from workbench.gate.runner import run_gate_file, run_pair
    from workbench.settings import home_dir

    options = {"margin": margin, "min_queries": min_queries, "judged_floor": judged_floor,
               "judged_action": judged_action, "empty_floor": empty_floor, "false_empty_ceiling": false_empty_ceiling}
    try:
        home = home_dir()
        for opt, out in (("--markdown", markdown_out), ("--junit", junit_out)):
            if out is not None and (out.is_dir() or (out.exists() and not os.access(out, os.W_OK))):
                raise WorkbenchError(f"{opt} {out} is a folder or not writable; give a file path")
        if markdown_out and junit_out and markdown_out.resolve() == junit_out.resolve():
            raise WorkbenchError("--markdown and --junit name the same file; give two paths")
        if gate_file is not None:
            if candidate or baseline or dataset or measure:
                raise WorkbenchError("a gate file names its configs, datasets and measures; do not add --candidate, "
                                     "--baseline, --dataset or --measure")
            results = run_gate_file(gate_file, home=home, options=options, splits=split, qrels=qrels, log=_log)
        else:
            if not (candidate and baseline and dataset):
                raise WorkbenchError("give a gate file, or --candidate, --baseline and --dataset")
            results = [run_pair(candidate, baseline, dataset, home=home, measures=measure or GATE_MEASURES,
                                options=options, splits=split, qrels=qrels, seed=seed, log=_log)]
    except WorkbenchError as exc:
        _fail(exc)
    text = "\n".join(markdown(r) for r in results)
    try:
        command = ["workbench", "gate"] + ([str(gate_file)] if gate_file is not None else [])
        for opt, val in (("--candidate", candidate), ("--baseline", baseline), ("--dataset", dataset),
                         ("--margin", margin), ("--min-queries", min_queries), ("--judged-floor", judged_floor),
                         ("--judged-action", judged_action), ("--empty-floor", empty_floor),
                         ("--false-empty-ceiling", false_empty_ceiling), ("--qrels", qrels)):
            command += [opt, str(val)] if val is not None else []
        if gate_file is None:  # the measures as gated: canonical names (MRR@10 -> RR@10), in order
            command += [x for m in dict.fromkeys(c.measure for r in results for c in r.checks) for x in ("-m", m)]
        command += [x for sp in split for x in ("--split", sp)]
        report = GateReport.of(results, command)
        if as_json:
            echo_json(report.to_json())
        else:
            typer.echo(text)
        saved = report.save(home)
        typer.echo(f"[workbench] gate report saved: {saved} (the dashboard's gate page shows the latest)", err=True)
    except WorkbenchError as exc:  # a full disk, a read-only home: the report is part of the command's work
        _fail(WorkbenchError(f"the gate report was not saved: {exc}; the gate's result is above"))
    try:
        if markdown_out:
            durable.atomic_write_text(markdown_out, text)
        if junit_out:
            durable.atomic_write_text(junit_out, junit(results))
    except WorkbenchError as exc:
        _fail(WorkbenchError(f"the report was not written: {exc}; the gate's result is above"))
    raise typer.Exit(max((r.exit_code for r in results), default=0))
