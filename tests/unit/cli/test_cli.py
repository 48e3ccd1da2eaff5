"""The command's own options: --version, NO_COLOR, the choices shown in --help, the qrels option's one wording."""

from __future__ import annotations

from importlib.metadata import version

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
        assert "[built|human|merged]" in text and "Qrels layer: built (corpus-derived labels)" in text, cmd
    assert "[json|postgres|opensearch]" in help_of("export")
    assert "[warn|fail]" in help_of("gate")
    assert "--install-completion" in help_of()
