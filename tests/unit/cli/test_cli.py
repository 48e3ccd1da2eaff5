"""The command's own options: --version, NO_COLOR, the choices shown in --help, the qrels option's one wording."""

from __future__ import annotations

import json
from importlib.metadata import version
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli import app


def test_version_prints_the_installed_distributions_version():
    res = CliRunner().invoke(app, ["--version"])
    assert res.exit_code == 0 and res.stdout == f"workbench {version('scripture-workbench')}\n"


def test_no_color_drops_the_colour_of_an_error_line():
    coloured = CliRunner().invoke(app, ["gate", "--candidate", "x"], color=True, env={"NO_COLOR": ""})
    plain = CliRunner().invoke(app, ["gate", "--candidate", "x"], color=True, env={"NO_COLOR": "1"})
    assert coloured.exit_code == plain.exit_code == 2, (coloured.output, plain.output)
    assert "\x1b[31merror: give a gate file, or --candidate, --baseline and --dataset" in coloured.output
    assert "\x1b[" not in plain.output
    assert "error: give a gate file, or --candidate, --baseline and --dataset" in plain.output


def test_help_shows_the_choices_and_one_wording_of_qrels():
    def help_of(*cmd):
        return " ".join(CliRunner().invoke(app, [*cmd, "--help"], env={"COLUMNS": "200"}).stdout.split())

    for cmd in (["eval"], ["tune"], ["gate"], ["reranker", "train"]):
        text = help_of(*cmd)
        assert "[built|human|merged|implicit]" in text and "Qrels layer: built (corpus-derived labels)" in text, cmd
    assert "[json|postgres|opensearch]" in help_of("export")
    assert "[warn|fail]" in help_of("gate")
    assert "--install-completion" in help_of()


def test_json_output_is_one_format_utf8_and_indented_by_one():
    res = CliRunner().invoke(app, ["ref", "parse", "BG २.४७", "Бг 2.47", "BG 19.1", "--json"])
    assert res.exit_code == 1  # one reference did not resolve
    expected = [{"input": "BG २.४७", "canonical": "BG 2.47", "reason": ""},
                {"input": "Бг 2.47", "canonical": "BG 2.47", "reason": ""}]
    body = json.loads(res.stdout)
    assert body[:2] == expected and body[2]["canonical"] is None and "19" in body[2]["reason"]
    assert res.stdout.startswith('[\n {\n  "input": "BG २.४७",\n  "canonical": "BG 2.47",\n')


def test_every_json_output_goes_through_the_one_printer():
    import workbench.cli as cli_pkg

    folder = Path(cli_pkg.__file__).parent
    callers = sorted(p.name for p in folder.glob("*.py") if "json.dumps(" in p.read_text(encoding="utf-8"))
    assert callers == [], "print --json output with workbench.cli._shared.echo_json"
    # which writes strict JSON (issue #41: no NaN)
    assert "from workbench._infra.jsonout import dumps" in (folder / "_shared.py").read_text(encoding="utf-8")


def test_help_flows_each_paragraph_at_the_terminals_width():
    # the docstring breaks "(type," / "default" at the source's width; the help wraps at the terminal's
    res = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert "with their parameters (type, default, range, meaning)" in res.stdout
    gate = CliRunner().invoke(app, ["gate", "--help"], env={"COLUMNS": "300"}).stdout
    assert ("The policy options (--margin, --min-queries, --judged-floor, --judged-action, --empty-floor, "
            "--false-empty-ceiling) override a gate file's values") in gate


@pytest.mark.parametrize("words, offered", [
    ("workbench gate --split ", ["train", "dev", "test"]),
    ("workbench eval x.toml --qrels h", ["human"]),
    ("workbench judge export --layer ", ["human", "merged"]),
    ("workbench export -f ", ["json", "postgres", "opensearch"]),
    ("workbench services down ", ["opensearch", "postgres"]),
    ("workbench services up r", ["reranker"]),
])
def test_shell_completion_offers_the_choices(words, offered):
    import os
    import subprocess
    import sys

    cword = len(words.split()) if words.endswith(" ") else len(words.split()) - 1
    env = {**os.environ, "_WORKBENCH_COMPLETE": "complete_bash", "COMP_WORDS": words, "COMP_CWORD": str(cword)}
    done = subprocess.run([sys.executable, "-c", "import sys; sys.argv[0] = 'workbench'; from workbench.cli import main; main()"],
                          env=env, capture_output=True, text=True, timeout=120)
    assert done.stdout.split() == offered, done.stderr


def test_a_choice_argument_reads_as_one_usage_word():
    usage = CliRunner().invoke(app, ["services", "down", "--help"], env={"COLUMNS": "200"}).stdout
    assert "services down [OPTIONS] {opensearch|postgres}" in usage, [line for line in usage.splitlines() if "Usage" in line]
