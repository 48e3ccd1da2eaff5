"""queries.tsv reads back whole with pandas and the csv module (issue #28), old unquoted files still read."""

from __future__ import annotations

import csv
from pathlib import Path

import pandas as pd
import pytest

from workbench.io.formats import read_queries, write_queries
from workbench.types import Query

TEXTS = [
    'Sanjaya replied: "The Prince Duryodhana, when he saw the army',  # a quote mid-text, never closed
    '"Karma" yoga',                                                   # a leading quote
    'the end of a speech."',                                          # a trailing quote
    '"dharma"',                                                       # wrapped in quotes
    '""',                                                             # only quotes
    "plain text, with a comma",
    "it's 'single' quotes",
    "tab\there and a\nnewline",                                       # folded to spaces by the writer
]


def _queries():
    return [Query(f"q{i:02d}", t, "paraphrase", "en", "test", f"g{i}") for i, t in enumerate(TEXTS)]


def _expected():
    return [" ".join(t.replace("\t", " ").splitlines()) for t in TEXTS]


def test_pandas_csv_and_read_queries_read_every_query_back(tmp_path):
    p = tmp_path / "queries.tsv"
    write_queries(p, _queries())
    df = pd.read_csv(p, sep="\t")
    assert list(df.columns) == ["query_id", "text", "query_type", "language", "split", "group"]
    assert len(df) == len(TEXTS) and df["text"].tolist() == _expected()  # before: 5 rows, texts merged
    with p.open(newline="", encoding="utf-8") as f:
        rows = list(csv.reader(f, delimiter="\t"))
    assert [r[1] for r in rows[1:]] == _expected() and all(len(r) == 6 for r in rows)
    assert [q.text for q in read_queries(p)] == _expected()
    first = p.read_bytes()
    write_queries(p, list(reversed(_queries())))
    assert p.read_bytes() == first  # deterministic
    assert b"\r" not in first and first.startswith(b"query_id\ttext\tquery_type\tlanguage\tsplit\tgroup\n")


def test_old_unquoted_files_still_read_as_they_were_written(tmp_path):
    p = tmp_path / "old.tsv"
    old = ["query_id\ttext\tquery_type\tlanguage\tsplit\tgroup"]
    raw = ['Sanjaya replied: "The Prince', '"Karma" yoga', '"dharma"', 'end."', "plain"]
    old += [f"q{i}\t{t}\tparaphrase\ten\ttest\tg" for i, t in enumerate(raw)]
    p.write_text("\n".join(old) + "\n", encoding="utf-8")
    assert [q.text for q in read_queries(p)] == raw


GITA = Path.home() / ".workbench" / "datasets" / "gita" / "queries.tsv"


@pytest.mark.skipif(not GITA.is_file(), reason="the gita dataset is not built (workbench data build gita)")
def test_the_built_gita_queries_read_whole_after_a_rewrite(tmp_path):
    queries = read_queries(GITA)
    assert len(queries) == 1800
    p = tmp_path / "queries.tsv"
    write_queries(p, queries)
    df = pd.read_csv(p, sep="\t", keep_default_na=False)
    assert len(df) == 1800 and df["query_id"].tolist() == [q.query_id for q in queries]
    assert df["text"].tolist() == [q.text for q in queries]
    with p.open(newline="", encoding="utf-8") as f:
        assert sum(1 for _ in csv.reader(f, delimiter="\t")) == 1801
    assert read_queries(p) == queries
