"""`workbench search`: ask a config one or more queries."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any, Optional

import typer

from workbench.cli._shared import _fail, _log, app, echo_json, json_option, secho
from workbench.errors import WorkbenchError

#: How a file in another encoding is converted, by the script its readers write (the hint of :func:`_decode_lines`).
ICONV_HINT = ("convert it from its encoding, e.g. iconv -f CP1251 -t UTF-8 FILE > FILE.utf8 for Russian text, "
              "-f LATIN1 for Western European; Devanagari has no common 8-bit encoding: save it as UTF-8")


def _decode_lines(raw: bytes, name: str) -> str:
    """``raw`` decoded as UTF-8 (a byte-order mark dropped), line by line: a line that is not UTF-8 is left
    out and named on stderr with its number, so one bad line never costs the other queries their answers.

    Raises:
        WorkbenchError: no line is UTF-8 (the whole file is in another encoding; names the fix).
    """
    try:
        return raw.decode("utf-8-sig")
    except UnicodeDecodeError:
        pass
    if raw.startswith(b"\xef\xbb\xbf"):
        raw = raw[3:]
    good, bad = [], []
    for number, line in enumerate(re.split(rb"\r\n|\n|\r", raw), 1):
        try:
            good.append(line.decode("utf-8"))
        except UnicodeDecodeError as exc:
            bad.append(f"line {number} (byte {line[exc.start]:#04x} at column {exc.start + 1})")
    if not any(g.strip() for g in good):
        raise WorkbenchError(f"{name} is not UTF-8: {', '.join(bad[:3])}{' …' if len(bad) > 3 else ''} cannot be "
                             f"read; {ICONV_HINT}")
    _log(f"{name}: {len(bad)} line(s) are not UTF-8 and are left out: {', '.join(bad[:5])}"
         f"{' …' if len(bad) > 5 else ''}; fix them, or if the file is in another encoding, {ICONV_HINT}")
    return "\n".join(good)


def _read_queries(queries: list[str], file: Optional[Path]) -> list[str]:
    """Query texts from the arguments and the file (``utf-8-sig``: a byte-order mark is not part of the first
    query), each cleaned by :func:`workbench.text.query.clean`; lines empty after cleaning are left out."""
    from workbench.text.query import clean

    texts = list(queries)
    if file is not None:
        name = "standard input" if str(file) == "-" else f"query file {file}"
        try:
            raw = sys.stdin.buffer.read() if str(file) == "-" else file.read_bytes()
            if raw[:4] in (b"\xff\xfe\x00\x00", b"\x00\x00\xfe\xff"):  # before UTF-16: its mark starts the same
                raise WorkbenchError(f"{name} is UTF-32; convert it: iconv -f UTF-32 -t UTF-8 FILE > FILE.utf8")
            if raw[:2] in (b"\xff\xfe", b"\xfe\xff"):
                raise WorkbenchError(f"{name} is UTF-16; convert it: iconv -f UTF-16 -t UTF-8 FILE > FILE.utf8")
            src = _decode_lines(raw, name)
        except FileNotFoundError:
            raise WorkbenchError(f"query file {file} does not exist; give a UTF-8 text file, one query per line") from None
        except IsADirectoryError:
            raise WorkbenchError(f"query file {file} is a folder; give a UTF-8 text file, one query per line") from None
        except OSError as exc:
            raise WorkbenchError(f"cannot read {name}: {exc.strerror or exc}") from None
        if b"\x00" in raw and raw.count(b"\x00") * 4 > len(raw):  # UTF-16 without a byte-order mark
            raise WorkbenchError(f"{name} looks like UTF-16 without a byte-order mark (every other byte is NUL); "
                                 "convert it: iconv -f UTF-16LE -t UTF-8 FILE > FILE.utf8")
        texts += re.split(r"\r\n|\n|\r", src)  # one query per line; U+2028, U+0085… inside a query do not split it
    return [t for t in map(clean, texts) if t]


@app.command("search")
def search_cmd(
    queries: list[str] = typer.Argument(None, help="Query texts (or use --file)."),
    config: str = typer.Option(..., "--config", "-c", help="A config name of the experiment."),
    experiment: Path = typer.Option(Path("experiments/seeds.toml"), "--experiment", "-e", help="Experiment TOML."),
    dataset: Optional[str] = typer.Option(None, "--dataset", "-d", help="Dataset (default: the experiment's first)."),
    k: int = typer.Option(10, "-k", min=1, help="Hits to show."),
    file: Optional[Path] = typer.Option(None, "--file", "-f", help="Read queries from a file, one per line ('-' = stdin)."),
    as_json: bool = json_option("each query's hits", "a JSON list"),
) -> None:
    """Run one config live and show each hit with its address, a snippet and its rank and score in every lane."""
    from workbench.data import catalog
    from workbench.experiment.config import load_experiment
    from workbench.experiment.runner import Engine, config_run
    from workbench.settings import home_dir
    from workbench.text.doctext import beside, snippet
    from workbench.types import Query

    try:
        exp = load_experiment(experiment)
        if config not in exp.configs:
            raise WorkbenchError(f"unknown config {config!r}; {experiment} defines: {', '.join(exp.configs)}")
        cfg = exp.configs[config]
        name = dataset or exp.datasets[0]
        texts = _read_queries(queries or [], file)
        if not texts:
            if file is not None:
                raise WorkbenchError(f"no query in {'standard input' if str(file) == '-' else file}: it is empty or "
                                     "holds only blank lines or invisible characters; one query per line")
            raise WorkbenchError("no query given: pass query texts, or --file FILE ('-' reads stdin)")
        home = home_dir()
        defs = catalog.load_definitions()
        ds = catalog.ensure(name, defs, home=home, log=_log)
        engine = Engine(exp, home, progress=False, log=_log)
        engine.check_rerankers([name], [cfg.rerank.reranker] if cfg.rerank is not None else [])
        if k > cfg.top_k:
            _log(f"-k {k}: config {cfg.name} keeps its top {cfg.top_k} (top_k in {experiment.name}); showing at most "
                 f"{cfg.top_k} hits per query")
        qs = [Query(f"q{i + 1}", t, "paraphrase", "und", "test") for i, t in enumerate(texts)]
        depth = max(exp.depth, k)
        lane_runs = {}
        failures: dict[str, list[dict]] = {}  # query_id → a live lane's failures: shown, never silent "no hits"
        notes: dict[str, list[dict]] = {}  # query_id → why a lane answered nothing on purpose (too short for trigrams)
        needed = list(dict.fromkeys((*cfg.lanes, *exp.reranker_lanes(cfg))))
        for lane_name in needed:
            lane = engine.lane(ds, exp.lanes[lane_name])
            lane_runs[lane_name] = lane.search(qs, depth)
            for qid, (cls, msg) in (getattr(lane, "last_failures", None) or {}).items():
                failures.setdefault(qid, []).append({"lane": lane_name, "class": cls, "message": msg})
            for qid, note in (getattr(lane, "last_notes", None) or {}).items():
                notes.setdefault(qid, []).append({"lane": lane_name, "note": note})
        fused = config_run(cfg, lane_runs, ds, engine, qs)
    except WorkbenchError as exc:
        _fail(exc)
    from workbench.eval.spans import transcript

    docs = {d.doc_id: d for d in ds.documents}
    around = transcript(ds.documents, cfg.window_ms)  # the window stage: the passages shown around each hit
    records = []
    for q in qs:
        hits = []
        for rank, h in enumerate(fused.get_hits(q.query_id)[:k], start=1):
            per_lane = {}
            for lane_name, run in lane_runs.items():
                for r, lh in enumerate(run.get_hits(q.query_id), start=1):
                    if lh.doc_id == h.doc_id:
                        per_lane[lane_name] = {"rank": r, "score": lh.score}
                        break
            d = docs.get(h.doc_id)
            hits.append({"rank": rank, "doc_id": h.doc_id, "address": d.address if d else "",
                         "beside": beside(d) if d else "", "score": h.score,
                         "snippet": snippet(d) if d else "", "lanes": per_lane,
                         # a rerank stage's own score (the run's score is then a rank score: workbench.reranking.stage)
                         **({"rerank_score": h.tiebreak} if cfg.rerank is not None else {}),
                         **({"window": around.window_records(h.doc_id, cfg.window_ms)} if around is not None else {})})
        rec: dict[str, Any] = {"query": q.text, "dataset": name, "config": cfg.name, "hits": hits}
        if q.query_id in failures:
            rec["failures"] = failures[q.query_id]
        if q.query_id in notes:
            rec["lane_notes"] = notes[q.query_id]
        note = _reference_note(q, [lane_runs[n] for n in needed if exp.lanes[n].kind == "reference"])
        if note:
            rec["reference_note"] = note
        records.append(rec)
    # a live lane that failed for every query answered nothing: not "no hits" but an error (exit 2, as eval)
    dead = sorted({f["lane"] for rec in records for f in rec.get("failures", [])
                   if all(any(g["lane"] == f["lane"] for g in r.get("failures", [])) for r in records)})
    if as_json:
        echo_json(records)
    else:
        _print_search(records)
    if dead:
        first = next(f for rec in records for f in rec.get("failures", []) if f["lane"] == dead[0])
        _fail(WorkbenchError(f"lanes.{dead[0]}: every query failed ({first['class']}); first: {first['message']}; "
                             "check that the endpoint is up and the lane's url, headers and key variable"))


def _print_search(records: list[dict]) -> None:
    """``workbench search``'s text output: per query its hits, a live lane's failures, the reference note and the
    lanes' notes (a query too short for trigrams)."""
    for rec in records:
        shown = rec["query"] if len(rec["query"]) <= 80 else rec["query"][:79] + "…"
        secho(f"\n{shown!r}  ({rec['config']} on {rec['dataset']})", bold=True)
        for f in rec.get("failures", []):
            secho(f"  lane {f['lane']} failed ({f['class']}): {f['message']}", fg="red")
        if not rec["hits"]:
            typer.echo("  no hits" + (" (a lane failed: see above)" if rec.get("failures") else ""))
        if rec.get("reference_note"):
            secho(f"  reference lane: {rec['reference_note']}", fg="yellow")
        for n in rec.get("lane_notes", []):
            secho(f"  lane {n['lane']}: {n['note']}", fg="yellow")
        for h in rec["hits"]:
            lanes = "  ".join(f"{n}#{v['rank']}:{v['score']:.4g}" for n, v in h["lanes"].items()) or "-"
            rr = f"  rerank {h['rerank_score']:.4g}" if "rerank_score" in h else ""
            where = f"{h['address']} ({h['beside']})" if h["beside"] else h["address"]
            typer.echo(f"{h['rank']:3d}. {where:<22s} {h['score']:.5f}{rr}  [{lanes}]")
            typer.echo(f"     {h['snippet']}")
            if h.get("window"):
                w = h["window"]
                t0, t1 = w[0]["start_ms"] / 1000, max(p["end_ms"] for p in w) / 1000
                ids = ", ".join(str(p["doc_id"]) for p in w[:8]) + (" …" if len(w) > 8 else "")
                typer.echo(f"     window: {len(w)} passage(s), {t0:.1f}–{t1:.1f} s: {ids}")


def _reference_note(q, ref_runs: list) -> str | None:
    """Why the config's reference lane answered nothing for a query that names a known book or collection
    (``BG 19.99`` → "BG has 18 chapters, not 19"); None for ordinary text or when the lane answered."""
    from workbench.text import refs

    if not ref_runs or any(r.get_hits(q.query_id) for r in ref_runs):
        return None
    res = refs.parse(q.text)
    if res or "unknown book code" in res.reason or "empty reference" in res.reason or "too long" in res.reason:
        return None
    return res.reason
