"""The gate's reports.

:class:`GateReport` is the JSON file ``<home>/gates/gate-*.json`` (``save`` and ``load`` side by
side, read by the dashboard); :func:`markdown` and :func:`junit` are the pull-request summary and
the CI's test report.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import xml.etree.ElementTree as ET
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, cast

from workbench._infra.jsonout import dumps
from workbench.errors import DataError
from workbench.gate.decide import GateResult


def markdown(res: GateResult) -> str:
    """A summary fit for a pull-request comment."""
    from workbench.eval.stats import P_ADJUST, P_ADJUST_NAME
    verdict = "❌ regression" if res.exit_code else "✅ pass"
    sha = f", sha256 `{res.qrels_sha256[:12]}`" if res.qrels_sha256 else ""
    lines = [f"### Retrieval gate: {verdict}", "",
             f"**{res.candidate}** vs **{res.baseline}** on `{res.dataset}` (margin δ = {res.margin:g}; "
             f"qrels **{res.qrels}**{sha})", "",
             f"| measure | stratum | n | candidate | baseline | Δ | 95% CI of Δ | p | p ({P_ADJUST_NAME[P_ADJUST]}) "
             "| result |",
             "|---|---|---:|---:|---:|---:|---|---:|---:|---|"]
    for c in res.checks:
        ci = "" if math.isnan(c.ci_low) else f"[{c.ci_low:+.4f}, {c.ci_high:+.4f}]"
        p = "" if math.isnan(c.p_value) else f"{c.p_value:.4f}"
        pa = "" if math.isnan(c.p_adjusted) else f"{c.p_adjusted:.4f}"
        lines.append(f"| {c.measure} | {c.stratum} | {c.n} | {c.candidate:.4f} | {c.baseline:.4f} | {c.diff:+.4f} | "
                     f"{ci} | {p} | {pa} | {c.status} |")
    if any(not math.isnan(c.p_adjusted) for c in res.checks):
        lines += ["", "p: paired sign-flip randomisation test, two-sided; adjusted over the "
                  f"{sum(not math.isnan(c.p_value) for c in res.checks)} "
                  f"paired checks above by {P_ADJUST_NAME[P_ADJUST]} (Holm 1979). Decisions follow the CIs."]
    j = res.judged
    if j:
        lines += ["", f"Judged@{j['k']} of the candidate: {j['mean']:.3f} (floor {j['floor']:g}): **{j['status']}**"]
        if j["status"] != "pass" and j["to_judge"]:
            lines.append("Judge next: " + ", ".join(f"`{t['query_id']}` → `{t['doc_id']}`" for t in j["to_judge"][:10]))
    a = res.answers
    if a:
        neg = (f"{a['empty_on_negatives']:.3f} of {a['negatives']} unanswerable queries (floor {a['floor']:g})"
               if a["negatives"] else f"no unanswerable query in the gated splits (floor {a['floor']:g} not checked)")
        lines += ["", f"Empty answers of the candidate: {neg}, {a['false_empty']:.3f} of {a['answerable']} answerable "
                      f"ones (ceiling {a['ceiling']:g}): **{a['status']}**"]
    if res.losses:
        lines += ["", "Queries that lost most:", ""]
        for loss in res.losses[:10]:
            why = "; ".join(f"`{d['doc_id']}` (found by {', '.join(d['baseline_lanes']) or 'the baseline'}"
                            + (f"; missing lanes: {', '.join(d['lanes_missing_in_candidate'])}"
                               if d["lanes_missing_in_candidate"] else "") + ")" for d in loss["dropped"][:3])
            lines.append(f"- `{loss['query_id']}`: {loss['baseline']:.3f} → {loss['candidate']:.3f}"
                         + (f" — dropped {why}" if why else ""))
    for w in res.warnings:
        lines.append(f"\n> note: {w}")
    return "\n".join(lines) + "\n"


def _junit_suite(res: GateResult) -> ET.Element:
    """One ``<testsuite>``: a test case per check (failure, or skipped when inconclusive or too-few) and
    one for judged coverage."""
    suite = ET.Element("testsuite", name=f"gate {res.candidate}")
    classname = f"gate.{res.dataset}.{res.candidate}"
    failures = 0
    for c in res.checks:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"{c.measure} [{c.stratum}]")
        if c.status == "fail":
            failures += 1
            ET.SubElement(case, "failure", message=f"{c.measure} fell by {-c.diff:.4f} beyond the margin "
                                                   f"{res.margin:g}").text = dumps(c.to_json(), default=str)
        elif c.status in ("inconclusive", "too-few"):
            ET.SubElement(case, "skipped", message=c.status)
    j = res.judged
    if j:
        case = ET.SubElement(suite, "testcase", classname=classname, name=f"Judged@{j['k']}")
        if j["status"] == "fail":
            failures += 1
            ET.SubElement(case, "failure", message="judged coverage below the floor")
    a = res.answers
    if a:
        case = ET.SubElement(suite, "testcase", classname=classname, name="empty answers")
        if a["status"] == "fail":
            failures += 1
            neg = (f"empty on negatives {a['empty_on_negatives']:.3f} (floor {a['floor']:g})" if a["negatives"]
                   else "no unanswerable query (floor not checked)")
            ET.SubElement(case, "failure", message=f"{neg}, false empty {a['false_empty']:.3f} (ceiling "
                                                   f"{a['ceiling']:g})")
    suite.set("tests", str(len(suite)))
    suite.set("failures", str(failures))
    return suite


def junit(results: Sequence[GateResult]) -> str:
    """JUnit XML of the gate's results: one ``<testsuite>`` per result (a ``<testsuites>`` root around
    them when there are several, with the total tests and failures), one test case per check and one
    for judged coverage. Built with :mod:`xml.etree.ElementTree`, so names are escaped."""
    suites = [_junit_suite(r) for r in results]
    if len(suites) == 1:
        root = suites[0]
    else:
        # _junit_suite sets both attributes on every suite
        root = ET.Element("testsuites", tests=str(sum(int(cast(str, s.get("tests"))) for s in suites)),
                          failures=str(sum(int(cast(str, s.get("failures"))) for s in suites)))
        root.extend(suites)
    ET.indent(root, space="")
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


@dataclass
class GateReport:
    """One run of ``workbench gate``: what ``<home>/gates/gate-<UTC time>-<pid>.json`` holds and the
    dashboard's gate page shows (the newest file is its "latest gate").

    Attributes:
        created: when the gate ran (UTC; the file keeps it to the second, ISO 8601); None for a file
            without it.
        command: the command line that ran it (argv).
        exit_code: 0 pass, 1 regression: the largest of the results' (:meth:`of`), as recorded.
        results: one :class:`~workbench.gate.decide.GateResult` per gated pair or expected-values config.

    The JSON object has the keys ``created``, ``command``, ``exit_code`` and ``results``
    (:meth:`~workbench.gate.decide.GateResult.to_json` of each); files written before this class existed
    have the same layout and load as they are.
    """

    created: _dt.datetime | None
    command: list[str]
    exit_code: int
    results: list[GateResult]

    @classmethod
    def of(cls, results: Sequence[GateResult], command: Sequence[str]) -> GateReport:
        """A report of ``results`` made now."""
        return cls(_dt.datetime.now(_dt.UTC), list(command), max((r.exit_code for r in results), default=0),
                   list(results))

    @property
    def verdict(self) -> str:
        """``pass`` or ``regression`` (exit code 0 or 1)."""
        return "regression" if self.exit_code else "pass"

    def to_json(self) -> dict[str, Any]:
        """The JSON object written to the report file."""
        return {"created": self.created.isoformat(timespec="seconds") if self.created else None,
                "command": list(self.command), "exit_code": self.exit_code,
                "results": [r.to_json() for r in self.results]}

    @classmethod
    def from_json(cls, body: Any, source: str | Path) -> GateReport:
        """The inverse of :meth:`to_json`; ``source`` (the file) is named in errors.

        Raises:
            DataError: not a gate report (not an object, no non-empty ``results`` list), or an incomplete
                one (a missing or malformed key: the message names the file and the key).
        """
        if not isinstance(body, dict) or not isinstance(body.get("results"), list) or not body["results"]:
            raise DataError(f"{source} is not a gate report (no 'results' list); `workbench gate` writes them")
        try:
            created = body.get("created")
            command = body.get("command") or []
            if not isinstance(command, list):
                raise TypeError(f"command must be a list, not {type(command).__name__}")
            return cls(_dt.datetime.fromisoformat(created) if created else None, [str(x) for x in command],
                       int(body.get("exit_code", 0)), [GateResult.from_json(r) for r in body["results"]])
        except (TypeError, KeyError, ValueError) as exc:
            raise DataError(f"{source} is not a complete gate report ({type(exc).__name__}: {exc}); `workbench gate` "
                            "writes them") from None

    def save(self, home: Path) -> Path:
        """Write the report to ``<home>/gates/gate-<created, UTC to the microsecond>-<pid>.json``; returns the path.

        Written atomically (:func:`workbench._infra.durable.atomic_write_json`: a temporary file, ``fsync``,
        rename), so a reader never sees half a report and a failed write leaves nothing behind.

        Raises:
            StorageError: the folder cannot be created or written (a full disk, a read-only home); the
                message names the path and the fix.
        """
        import os

        from workbench._infra import durable

        created = self.created or _dt.datetime.now(_dt.UTC)
        folder = home / "gates"
        path = folder / f"gate-{created:%Y%m%dT%H%M%S%fZ}-{os.getpid()}.json"
        body = self.to_json()
        durable.mkdirs(folder)
        durable.remove_temporaries(folder)
        return durable.atomic_write_json(path, body, ensure_ascii=True)

    @classmethod
    def load(cls, path: Path) -> GateReport:
        """Read a report file (:meth:`save`'s, or one written before this class existed).

        Raises:
            DataError: unreadable, not JSON, or not a (complete) gate report; the message names the file.
        """
        try:
            body = json.loads(Path(path).read_text(encoding="utf-8"))
        except (OSError, ValueError) as exc:
            raise DataError(f"cannot read the gate report {path}: {exc}") from None
        return cls.from_json(body, path)
