"""What an export writes is safe to load and lands where it should (defects a fresh attack found in
``workbench export``): names with line breaks cannot end a SQL comment; distinct config and embedder names never
share a function, a file or an input; a device, a folder or someone's file is never replaced; secrets in live
lanes' headers are not copied; an absurd ``top_k`` is refused at load; and PostgreSQL itself refuses to let one
config's export replace another's function.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from workbench.errors import ConfigError
from workbench.export import job, names
from workbench.export.postgres import Param, PostgresExport, function_name


def _export(name: str, function: str | None = None) -> PostgresExport:
    return PostgresExport(name, function or function_name(name), [Param("p_query", "text", "the query")],
                          {"hnsw.ef_search": "40"}, "SELECT 'd'::text AS doc_id, 1.0::float8 AS score "
                          "WHERE %(p_query)s IS NOT NULL", [], 1, ["a note"])


def test_a_line_break_in_a_name_cannot_end_the_header_comment():
    evil = "x\nDROP TABLE IF EXISTS wb_pwned; CREATE TABLE wb_pwned(a int);--"
    files = _export("a b").files({"source": f"{evil}.toml:a b", "dataset": "gita\r\nDROP TABLE t;"})
    for name, text in files.items():
        head = text.split("\n\n")[0] if name.endswith(".sql") and not name.endswith("statement.sql") else \
            text.split("-- Run in one transaction")[0]
        assert all(line.startswith("--") for line in head.splitlines()), (name, head)
    assert "-- source: x DROP TABLE IF EXISTS wb_pwned" in files["a_b_c8687a08.sql"]


def test_distinct_names_never_meet():
    assert function_name("aicharya-rrf60-ref") == "wb_search_aicharya_rrf60_ref"  # the common case reads as it is
    fns = {function_name(n) for n in ("a b", "a_b", "Üß", "éà", "A_B", "x" * 80, "x" * 81)}
    assert len(fns) == 7 and all(len(f.encode()) <= 63 for f in fns)
    assert names.distinct("p_vec_", ["x-y", "x_y", "e5"]) == {
        "x-y": "p_vec_x_y_cc96fed8", "x_y": "p_vec_x_y_f9068e81", "e5": "p_vec_e5"}
    stems = [names.file_stem(n) for n in ("../escaped", "sub/dir", ".hidden", "ok-name.v2")]
    assert stems[3] == "ok-name.v2" and all("/" not in s and not s.startswith(".") for s in stems)
    assert len(set(stems)) == 4
    assert names.pipeline_id("os-hybrid-7-3") == "wb-os-hybrid-7-3"
    assert names.pipeline_id("a b") != names.pipeline_id("a-b")


def _source(config_json: dict) -> job.ExportSource:
    return job.ExportSource(None, None, "gita", config_json, "test")


CONFIG = {"fusion": "rrf", "lanes": {"prod": {"kind": "http", "headers": {
    "Authorization": "Bearer ${PROD_KEY}", "X-Literal": "LITERALSECRET789"}, "env": {"RAW": "ENVLITERAL000"}}},
    "provenance": {"experiment": "e.toml", "config": "c"}}


def test_json_export_refuses_devices_folders_and_foreign_files_and_masks_secrets(tmp_path):
    if os.path.exists("/dev/null"):
        with pytest.raises(ConfigError, match="/dev/null is not a regular file"):
            job.write(_source(CONFIG), "json", Path("/dev/null"), home=tmp_path)
        assert not os.path.isfile("/dev/null")
    foreign = tmp_path / "notes.json"
    foreign.write_text("hello")
    with pytest.raises(ConfigError, match="exists and is not an earlier workbench export of this config; pass --force"):
        job.write(_source(CONFIG), "json", foreign, home=tmp_path)
    assert foreign.read_text() == "hello"
    job.write(_source(CONFIG), "json", foreign, home=tmp_path, force=True)
    written = json.loads(foreign.read_text())
    headers = written["lanes"]["prod"]["headers"]
    assert headers == {"Authorization": "Bearer ${PROD_KEY}", "X-Literal": "***"}
    assert written["lanes"]["prod"]["env"] == {"RAW": "***"}
    job.write(_source(CONFIG), "json", foreign, home=tmp_path)  # an earlier export of it: replaced without --force
    other = {**CONFIG, "provenance": {"experiment": "e.toml", "config": "d"}}
    with pytest.raises(ConfigError, match="is not an earlier workbench export of this config"):
        job.write(_source(other), "json", foreign, home=tmp_path)  # config d never replaces config c's export
    assert json.loads(foreign.read_text())["provenance"]["config"] == "c"
    study = {**CONFIG, "provenance": {"study": "s1", "experiment": "e.toml", "config": "c"}}
    with pytest.raises(ConfigError, match="pass --force"):
        job.write(_source(study), "json", foreign, home=tmp_path)  # a study's export is not the config's
    assert job.export_identity(study) == ("study", "s1") and job.export_identity({}) == ()
    with pytest.raises(ConfigError, match="is not a folder; --format postgres writes several files"):
        job.write(_source(CONFIG), "postgres", foreign, home=tmp_path)


def test_an_export_is_owned_by_the_experiment_file_it_came_from_not_by_its_path_as_typed(tmp_path):
    """A newcomer found another clone's ``experiments/seeds.toml`` replacing this clone's export at the same -o,
    and the same file typed as an absolute path refused: the resolved file decides."""
    def cfg(typed: str, resolved: str) -> dict:
        return {**CONFIG, "provenance": {"experiment": typed, "experiment_file": resolved, "config": "c"}}

    out = tmp_path / "shipped.json"
    job.write(_source(cfg("experiments/seeds.toml", "/clone-a/experiments/seeds.toml")), "json", out, home=tmp_path)
    with pytest.raises(ConfigError, match="is not an earlier workbench export of this config"):
        job.write(_source(cfg("experiments/seeds.toml", "/clone-b/experiments/seeds.toml")), "json", out,
                  home=tmp_path)
    job.write(_source(cfg("/clone-a/experiments/seeds.toml", "/clone-a/experiments/seeds.toml")), "json", out,
              home=tmp_path)  # the same file typed another way: replaced without --force
    assert json.loads(out.read_text())["provenance"]["experiment"] == "/clone-a/experiments/seeds.toml"
    link = tmp_path / "link.json"
    link.symlink_to(tmp_path / "nowhere" / "x.json")
    with pytest.raises(ConfigError, match="is a link to .*nowhere/x.json, which does not exist"):
        job.write(_source(CONFIG), "json", link, home=tmp_path, force=True)
    assert link.is_symlink()  # the link is left as it was


def test_a_blocked_target_in_a_folder_export_stops_before_anything_is_written(tmp_path):
    out = tmp_path / "shipped"
    out.mkdir()
    (out / "c.export.json").mkdir()  # a folder where the export's meta file goes
    (out / "c.sql").write_text("-- the function shipped last week\n")
    with pytest.raises(ConfigError, match="c.export.json is a folder"):
        job.check_targets([out / "c.sql", out / "c.statement.sql", out / "c.export.json"],
                          job._is_export(out / "c.export.json", _source(CONFIG)), False)
    assert (out / "c.sql").read_text() == "-- the function shipped last week\n"


def test_top_k_beyond_what_an_engine_returns_is_refused_at_load(tmp_path):
    from workbench.experiment.config import load_experiment

    path = tmp_path / "e.toml"
    path.write_text('name = "e"\ndatasets = ["gita"]\n[lanes.fts]\nkind = "fulltext"\n'
                    '[configs.big]\nlanes = ["fts"]\ntop_k = 1000000000000000000000\n')
    with pytest.raises(ConfigError, match=r"configs.big.top_k.*must be an integer from 1 to 10,000"):
        load_experiment(path)


@pytest.mark.pg
def test_postgres_refuses_to_replace_another_configs_function(pg_dsn):
    """``a-b`` and ``a_b`` read as the same identifier: the second install stops with the first config named."""
    import psycopg

    from workbench.engines import pg_client as pg

    first, second = _export("a-b"), _export("a_b")
    assert first.function == second.function == "wb_search_a_b"
    with pg.connect(pg_dsn) as conn:
        conn.execute('CREATE SCHEMA IF NOT EXISTS "wb_guard_test"')
        conn.execute('SET search_path = "wb_guard_test", public')
        try:
            conn.execute(first.function_sql())
            conn.execute(first.function_sql())  # the same config again: replaced, as a re-export should
            assert conn.execute("SELECT * FROM wb_search_a_b('q')").fetchall() == [("d", 1.0)]
            with pytest.raises(psycopg.Error, match="wb_search_a_b already holds the workbench export of config a-b"):
                conn.execute(second.function_sql())
        finally:
            conn.rollback()
            conn.execute('DROP SCHEMA IF EXISTS "wb_guard_test" CASCADE')
