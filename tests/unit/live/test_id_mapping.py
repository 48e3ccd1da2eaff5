"""How a live lane names documents: what is refused before any query is sent (a metadata field no document has,
an id rewrite whose replacement names a group the pattern lacks), and an ``id`` path that fits no hit is a
malformed answer, not a page of unmapped ids (both found by an attack on the crosswalks of issue #42)."""

from __future__ import annotations

import pytest

from retrievers._live import IdMapper, check_common, load_crosswalk
from retrievers.http import HttpParams
from workbench.errors import ConfigError, DataError
from workbench.live.mapping import HitReader
from workbench.types import Document, Text

DOCS = [Document("mn10:1.1", "MN 10:1.1", "mn10", "segment", (Text("root", "pi", "Latn", "Evaṃ me sutaṃ"),),
                 metadata={"uid": "u-1"}),
        Document("mn10:1.2", "MN 10:1.2", "mn10", "segment", (Text("root", "pi", "Latn", "ekaṃ samayaṃ"),),
                 metadata={"uid": "u-2"})]


def _params(**kw) -> HttpParams:
    return HttpParams(url="http://127.0.0.1:1/s?q={query}", hits="hits", snapshot="t", **kw)


def test_a_metadata_field_no_document_has_is_refused_at_open_naming_the_fields():
    with pytest.raises(ConfigError) as err:
        IdMapper("metadata:nope", DOCS)
    assert str(err.value) == ("id_map = 'metadata:nope': no document has the metadata field 'nope' (fields: uid); "
                              "name one of them, or keep the system's ids as a metadata field of the dataset")
    assert IdMapper("metadata:uid", DOCS)("u-2") == "mn10:1.2"


def test_a_rewrite_naming_a_missing_group_is_refused_at_load_and_a_good_one_maps():
    assert check_common(_params(id_rewrite=["^dn", r"\9"])) == (
        "id_rewrite = ['^dn', '\\\\9']: invalid group reference 9 at position 1; fix the regular expression or the "
        "replacement (a group of the pattern is \\1 .. \\N)")
    mapper = IdMapper("doc_id", DOCS, rewrite=[r"^(\d+)-(\d+)\.(\d+)$", r"mn\1:\2.\3"])
    assert [mapper("10-1.2"), mapper("10-9.9"), mapper("mn10:1.1")] == ["mn10:1.2", None, "mn10:1.1"]


def test_an_id_path_that_fits_no_hit_is_a_malformed_answer_and_one_missing_id_is_unmapped():
    reader = HitReader("hits", "adress", None, IdMapper("address", DOCS), "lanes.x")
    with pytest.raises(ValueError) as err:
        reader.read({"hits": [{"address": "MN 10:1.1"}, {"address": "MN 10:1.2"}]}, 10)
    assert str(err.value) == "id = 'adress' selects nothing in any hit (hit 1 has ['address'])"
    ok = HitReader("hits", "address", None, IdMapper("address", DOCS), "lanes.x")
    got = ok.read({"hits": [{"address": "MN 10:1.2"}, {"other": 1}, {"address": "MN 10:1.1"}]}, 10)
    assert [h.doc_id for h in got.hits] == ["mn10:1.2", "mn10:1.1"] and got.unmapped == ["None"]


def test_a_crosswalk_maps_many_to_one_and_refuses_one_id_for_two_documents(tmp_path):
    path = tmp_path / "walk.jsonl"
    path.write_text('{"rid": "a", "doc_id": "mn10:1.1"}\n{"rid": "b", "doc_id": "mn10:1.1"}\n'
                    '{"rid": "c", "doc_id": "sn1:1"}\n')
    table, outside = load_crosswalk(path, {d.doc_id for d in DOCS})
    assert table == {"a": "mn10:1.1", "b": "mn10:1.1"} and outside == 1
    path.write_text('{"rid": "a", "doc_id": "mn10:1.1"}\n{"rid": "a", "doc_id": "mn10:1.2"}\n')
    with pytest.raises(DataError) as err:
        load_crosswalk(path, {d.doc_id for d in DOCS})
    assert str(err.value) == (f"{path}:2: rid 'a' maps to 'mn10:1.2' here and to 'mn10:1.1' at {path}:1; a system "
                              "id names one document: keep one row")
