"""Bad input to the data layer: broken config and definitions, wrong-shape corpus files,
partial corpora, damaged manifests, unwritable homes and CLI misuse.

Every failure must be a :class:`WorkbenchError` whose one-line message names the file or
key and the fix; the CLI turns it into exit code 2 without a traceback. Corpus files are
never copied into the repository: tests build small fake trees, or trees of symlinks to
the real corpus, under ``tmp_path``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import time
from pathlib import Path

import pytest
from typer.testing import CliRunner

from workbench.cli import app
from workbench.data import catalog
from workbench.data.loaders import bilara
from workbench.data.loaders._io import read_json
from workbench.data.loaders.bilara import PUBLISHED, Expected, check_complete, load_bilara
from workbench.data.loaders.dpd import dpd_files, load_dpd
from workbench.data.loaders.gita import VERSES_PER_CHAPTER, load_gita
from workbench.data.querysets.split import check_ratios
from workbench.errors import ConfigError, DataError, WorkbenchError
from workbench.settings import data_dir, home_dir

GITA_DEFS = """
seed = 5
splits = [0.6, 0.2, 0.2]
max_queries_per_type = 40
[dataset.g]
source = "gita"
held_out_translators = ["Shri Purohit Swami"]
query_types = ["paraphrase", "reference"]
"""

DHP_DEFS = """
seed = 5
max_queries_per_type = 40
[dataset.b]
source = "bilara"
collections = ["dhp"]
query_types = ["reference"]
"""


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in ("WORKBENCH_DATA", "WORKBENCH_HOME", "WORKBENCH_CONFIG", "WORKBENCH_DATASETS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(tmp_path)
    return monkeypatch


def _write(path: Path, obj: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(obj, ensure_ascii=False), encoding="utf-8")
    return path


def _exit2(res, *needles: str) -> str:
    """Assert a CLI result is exit 2 with a one-line error naming every needle, and no traceback."""
    out = res.output
    assert res.exit_code == 2, out
    assert isinstance(res.exception, SystemExit), repr(res.exception)
    assert "Traceback" not in out
    errors = [line for line in out.splitlines() if line.startswith("error: ")]
    assert len(errors) == 1, out
    for n in needles:
        assert n in errors[0], (n, errors[0])
    return errors[0]


def _symlink_tree(src: Path, dst: Path, skip: tuple[str, ...] = ()) -> Path:
    """A copy of ``src`` made of real folders and symlinked files (nothing is copied), minus ``skip`` (relative paths)."""
    for p in sorted(src.rglob("*")):
        rel = p.relative_to(src)
        if any(rel.as_posix() == s or rel.as_posix().startswith(s + "/") for s in skip):
            continue
        if p.is_dir():
            (dst / rel).mkdir(parents=True, exist_ok=True)
        else:
            (dst / rel).parent.mkdir(parents=True, exist_ok=True)
            (dst / rel).symlink_to(p)
    return dst


# =================================================================== P1: config and definitions structure

def test_config_paths_not_a_table_names_file_and_key(clean_env, tmp_path):
    cfg = tmp_path / "workbench.toml"
    cfg.write_text("paths = 1\n")
    with pytest.raises(ConfigError) as exc:
        data_dir(check=False)
    assert str(cfg) in str(exc.value) and "`paths`" in str(exc.value) and "[paths]" in str(exc.value)


def test_config_path_value_not_a_string_names_the_key(clean_env, tmp_path):
    cfg = tmp_path / "workbench.toml"
    cfg.write_text("[paths]\nhome = 5\n")
    with pytest.raises(ConfigError) as exc:
        home_dir()
    assert "[paths] home" in str(exc.value) and str(cfg) in str(exc.value)


def test_config_not_utf8_is_a_config_error(clean_env, tmp_path):
    cfg = tmp_path / "workbench.toml"
    cfg.write_bytes(b'[paths]\ndata = "\xff\xfe"\n')
    with pytest.raises(ConfigError) as exc:
        data_dir(check=False)
    assert str(cfg) in str(exc.value) and "UTF-8" in str(exc.value)


def test_config_unreadable_is_a_config_error(clean_env, tmp_path):
    cfg = tmp_path / "workbench.toml"
    cfg.write_text('[paths]\ndata = "x"\n')
    real_open = Path.open

    def deny(self, *a, **k):
        if self == cfg:
            raise PermissionError(13, "Permission denied", str(self))
        return real_open(self, *a, **k)

    clean_env.setattr(Path, "open", deny)
    with pytest.raises(ConfigError, match="cannot be read") as exc:
        data_dir(check=False)
    assert str(cfg) in str(exc.value)


@pytest.mark.parametrize("raw,needle", [
    (b"[dataset.x]\nsource = '\xff'\n", "UTF-8"),
    (b"splits = 3\n[dataset.x]\nsource = 'gita'\n", "splits must be a list"),
    (b"dataset = 1\n", "dataset must be a table"),
    (b"[dataset]\nx = 1\n", "dataset.x must be a table"),
    (b"split = [1, 0, 0]\n[dataset.x]\nsource = 'gita'\n", "unknown top-level key(s) ['split']"),
    (b"[dataset.x]\nsource = 1\n", "dataset.x.source must be one of"),
    (b"[dataset.'../x']\nsource = 'gita'\n", "not a plain folder name"),
])
def test_definitions_of_the_wrong_structure(tmp_path, raw, needle):
    p = tmp_path / "d.toml"
    p.write_bytes(raw)
    with pytest.raises(ConfigError) as exc:
        catalog.load_definitions(p)
    assert needle in str(exc.value) and str(p) in str(exc.value)


def test_definitions_path_that_is_a_folder(tmp_path):
    with pytest.raises(ConfigError, match="is a folder") as exc:
        catalog.load_definitions(tmp_path)
    assert str(tmp_path) in str(exc.value)


# =================================================================== P2: definition values

@pytest.mark.parametrize("body,needle", [
    ("splits = [nan, 0.5, 0.5]\n[dataset.x]\nsource = 'gita'\n", "splits"),
    ("splits = [inf, 0.0, 0.0]\n[dataset.x]\nsource = 'gita'\n", "finite"),
    ("splits = [true, false, false]\n[dataset.x]\nsource = 'gita'\n", "splits"),
    ("max_queries_per_type = true\n[dataset.x]\nsource = 'gita'\n", "max_queries_per_type"),
    ("[dataset.x]\nsource = 'gita'\nquery_types = 'term'\n",
     'dataset.x.query_types must be a list of strings, not a single string: write query_types = ["term"]'),
    ("[dataset.x]\nsource = 'gita'\nquery_types = []\n", "dataset.x.query_types is empty"),
    ("[dataset.x]\nsource = 'gita'\nquery_types = [1]\n", "dataset.x.query_types"),
    ("[dataset.x]\nsource = 'gita'\nheld_out_translators = 'Shri Purohit Swami'\n", "dataset.x.held_out_translators"),
    ("[dataset.x]\nsource = 'gita'\nheld_out_translators = ['']\n", "dataset.x.held_out_translators"),
    ("[dataset.x]\nsource = 'bilara'\nheld_out_languages = ['de']\n",
     "dataset.x.held_out_languages holds unknown value(s) ['de']"),
    ("[dataset.x]\nsource = 'bilara'\ncollections = ['an']\n",
     "dataset.x.collections holds unknown value(s) ['an']; choose from dn, mn, sn56, dhp"),
    ("[dataset.x]\nsource = 'bilara'\ncollections = ['mn', 'mn']\n", "more than once"),
    ("[dataset.x]\nsource = 'bilara'\ncollections = 'mn'\n", "dataset.x.collections"),
    ("[dataset.x]\nsource = 'cst4'\n", "dataset.x lacks the required key(s) ['books']"),
    ("[dataset.x]\nsource = 'cst4'\nbooks = ['s9999m']\n", "dataset.x.books holds unknown value(s) ['s9999m']"),
    ("[dataset.x]\nsource = 'cst4'\nbooks = []\n", "dataset.x.books is empty"),
    ("[dataset.x]\nsource = 'cst4'\nbooks = ['s0201m']\nquery_types = ['term']\n", "not available for source 'cst4'"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\n",
     "dataset.p lacks the required key(s) ['segments_from']"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = ['b']\n",
     "dataset.p.segments_from"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\nmax_tokens = 10.5\n",
     "dataset.p.max_tokens"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\nmax_tokens = 0\n",
     "dataset.p.max_tokens"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\nmax_tokens = 10\n"
     "overlap = 10\n",
     "dataset.p.overlap"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\noverlap = -1\n",
     "dataset.p.overlap"),
    ("[dataset.b]\nsource = 'bilara'\n[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\noverlap = 512\n",
     "0 <= overlap < max_tokens (512)"),
])
def test_bad_definition_values_fail_at_load_naming_file_and_key(tmp_path, body, needle):
    p = tmp_path / "d.toml"
    p.write_text(body)
    with pytest.raises(ConfigError) as exc:
        catalog.load_definitions(p)
    msg = str(exc.value)
    assert needle in msg and str(p) in msg and "\n" not in msg


def test_check_ratios_rejects_non_finite_and_non_numbers():
    for bad in ((math.nan, 0.5, 0.5), (math.inf, 0, 0), (True, False, False), 3, "abc", (0.5, 0.5)):
        with pytest.raises(ValueError):
            check_ratios(bad)  # type: ignore[arg-type]
    check_ratios((0.6, 0.2, 0.2))
    check_ratios([1, 0, 0])  # type: ignore[arg-type]


def test_the_shipped_definitions_still_load():
    defs = catalog.load_definitions()
    assert list(defs.datasets) == ["gita", "bilara-segments", "bilara-passages", "cst4-mn", "bilara-filtered",
                                   "cst4-mn-filtered", "gita-negatives"]


@pytest.fixture
def gita_tree(data_dir: Path, tmp_path: Path) -> Path:
    """A data dir holding only gita/ (symlinks to the real files)."""
    data = tmp_path / "gita-data"
    _symlink_tree(data_dir / "gita", data / "gita")
    return data


def test_unknown_held_out_translator_is_a_config_error_naming_the_dataset(gita_tree, tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS.replace("Shri Purohit Swami", "Nobody At All"))
    defs = catalog.load_definitions(p)  # names cannot be known without the corpus
    with pytest.raises(ConfigError) as exc:
        catalog.build("g", defs, gita_tree, tmp_path / "home")
    msg = str(exc.value)
    assert "dataset g" in msg and "Nobody At All" in msg and str(p) in msg
    assert not (tmp_path / "home" / "datasets" / "g").exists()


def test_cli_unknown_held_out_translator_exits_2(gita_tree, tmp_path, monkeypatch):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS.replace("Shri Purohit Swami", "Nobody At All"))
    monkeypatch.setenv("WORKBENCH_DATA", str(gita_tree))
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(app, ["data", "build", "--definitions", str(p)])
    _exit2(res, "Nobody At All", "dataset g")


# =================================================================== P3: home writability

def test_datasets_path_that_is_a_file_fails_before_building(gita_tree, tmp_path, monkeypatch):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    home = tmp_path / "home"
    home.mkdir()
    (home / "datasets").write_text("not a folder")

    def never(*_a, **_k):
        raise AssertionError("the corpus was read before the home was checked")

    monkeypatch.setattr("workbench.data.build.hash_inputs", never)
    with pytest.raises(ConfigError) as exc:
        catalog.build("g", catalog.load_definitions(p), gita_tree, home)
    msg = str(exc.value)
    assert str(home / "datasets") in msg and "is a file" in msg and "WORKBENCH_HOME" in msg


def test_unwritable_datasets_folder_fails_before_building(gita_tree, tmp_path, monkeypatch):
    import tempfile

    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    home = tmp_path / "home"

    def deny(*_a, **_k):
        raise PermissionError(13, "Permission denied")

    monkeypatch.setattr("workbench.data.build.hash_inputs", lambda *_a, **_k: (_ for _ in ()).throw(AssertionError("built")))
    monkeypatch.setattr(tempfile, "mkstemp", deny)
    with pytest.raises(ConfigError) as exc:
        catalog.build("g", catalog.load_definitions(p), gita_tree, home)
    msg = str(exc.value)
    assert str(home / "datasets") in msg and "not writable" in msg and "WORKBENCH_HOME" in msg


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into read-only folders")
def test_read_only_home_fails_before_building(gita_tree, tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    home = tmp_path / "home"
    (home / "datasets").mkdir(parents=True)
    (home / "datasets").chmod(0o555)
    try:
        with pytest.raises(ConfigError, match="WORKBENCH_HOME"):
            catalog.build("g", catalog.load_definitions(p), gita_tree, home)
    finally:
        (home / "datasets").chmod(0o755)


def test_cli_datasets_path_that_is_a_file_exits_2(gita_tree, tmp_path, monkeypatch):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    home = tmp_path / "home"
    home.mkdir()
    (home / "datasets").write_text("x")
    monkeypatch.setenv("WORKBENCH_DATA", str(gita_tree))
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    res = CliRunner().invoke(app, ["data", "build", "--definitions", str(p)])
    _exit2(res, str(home / "datasets"), "WORKBENCH_HOME")


def test_stale_temporary_folders_of_the_dataset_are_removed(gita_tree, tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    datasets = tmp_path / "home" / "datasets"
    killed = [datasets / ".g-ab12cd_9", datasets / ".g-old"]
    kept = [datasets / ".gg-ab12cd_9", datasets / ".g-ab12cd_9x", datasets / "g-ab12cd_9", datasets / ".other-old"]
    for d in killed + kept:
        (d / "documents.jsonl").parent.mkdir(parents=True)
        (d / "documents.jsonl").write_text("partial")
    past = time.time() - 3600
    for d in killed + kept:
        os.utime(d, (past, past))
    catalog.build("g", catalog.load_definitions(p), gita_tree, tmp_path / "home")
    assert not any(d.exists() for d in killed)
    assert all(d.exists() for d in kept)
    assert catalog.status("g", catalog.load_definitions(p), gita_tree, tmp_path / "home") == "current"


def test_a_swap_interrupted_between_renames_gives_back_the_previous_build(gita_tree, tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    defs, home = catalog.load_definitions(p), tmp_path / "home"
    catalog.build("g", defs, gita_tree, home)
    out = catalog.dataset_dir("g", home)
    out.rename(out.with_name(".g-old"))  # killed after the first rename of the swap
    manifest = catalog.build("g", defs, gita_tree, home)  # restored, current, not rebuilt
    assert catalog.status("g", defs, gita_tree, home) == "current"
    assert manifest["counts"]["documents"] == 701
    assert not out.with_name(".g-old").exists()


# =================================================================== P4: wrong-shape corpus files

def _verses() -> list[dict]:
    out, vid = [], 0
    for c, n in enumerate(VERSES_PER_CHAPTER, start=1):
        for v in range(1, n + 1):
            vid += 1
            out.append({"id": vid, "chapter_number": c, "verse_number": v, "text": f"पद{vid}।।{c}.{v}।।",
                        "transliteration": f"śhloka {vid}", "word_meanings": f"chakra—wheel {vid}"})
    return out


def _gita_tree(root: Path, verses=None, translations=None, chapters=None) -> Path:
    base = root / "gita"
    _write(base / "data/verse.json", _verses() if verses is None else verses)
    _write(base / "data/chapters.json", [{"chapter_number": 1, "name_translation": "One"}] if chapters is None else chapters)
    _write(base / "archive/translation_old.json", [] if translations is None else translations)
    return base


def test_fake_gita_tree_still_loads(tmp_path):
    _gita_tree(tmp_path, translations=[{"verse_id": 2, "author_id": 1, "authorName": "A", "lang": "english",
                                        "description": "1.2 Text"}])
    assert len(load_gita(tmp_path).documents) == 701


@pytest.mark.parametrize("kind,needles", [
    ("chapters_object", ["chapters.json", "not a JSON array of chapter records", "object"]),
    ("chapters_no_number", ["chapters.json", "chapter record 0", "'chapter_number'"]),
    ("translation_empty_record", ["translation_old.json", "translation record 0", "'verse_id'"]),
    ("translation_number_text", ["translation_old.json", "'description'", "number"]),
    ("translation_not_object", ["translation_old.json", "record 0", "array"]),
    ("verse_no_text", ["verse.json", "verse record 10", "'text'"]),
    ("verse_text_null", ["verse.json", "'text'", "null"]),
    ("verse_bad_transliteration", ["verse.json", "'transliteration'"]),
    ("verse_id_string", ["verse.json", "'id'", "string"]),
    ("verse_duplicate", ["verse.json", "out of place"]),
    ("verse_repeated_id", ["verse.json", "repeats verse ids"]),
])
def test_wrong_shape_gita_files_raise_data_error(tmp_path, kind, needles):
    verses, translations, chapters = _verses(), [], None
    if kind == "chapters_object":
        chapters = {"a": 1}
    elif kind == "chapters_no_number":
        chapters = [{"name": "x"}]
    elif kind == "translation_empty_record":
        translations = [{}]
    elif kind == "translation_number_text":
        translations = [{"verse_id": 1, "author_id": 1, "authorName": "A", "lang": "english", "description": 5}]
    elif kind == "translation_not_object":
        translations = [[1, 2]]
    elif kind == "verse_no_text":
        del verses[10]["text"]
    elif kind == "verse_text_null":
        verses[3]["text"] = None
    elif kind == "verse_bad_transliteration":
        verses[3]["transliteration"] = ["x"]
    elif kind == "verse_id_string":
        verses[0]["id"] = "1"
    elif kind == "verse_duplicate":
        verses[1]["verse_number"] = 1  # BG 1.1 twice, BG 1.2 missing
    elif kind == "verse_repeated_id":
        verses[1]["id"] = 1
    _gita_tree(tmp_path, verses=verses, translations=translations, chapters=chapters)
    with pytest.raises(DataError) as exc:
        load_gita(tmp_path)
    msg = str(exc.value)
    assert str(tmp_path / "gita") in msg
    for n in needles:
        assert n in msg, (n, msg)


def _dpd_tree(root: Path, **bodies: str) -> dict[str, Path]:
    files = dpd_files(root)
    default = {
        "index": 'export const INDEX={"dhammo":"a"}',
        "pali": 'export const DEF_PALI={"a":"a masc|masc|dhar+ma|dhamm|dhamma 1.01"}',
        "en": 'export const DEF_LANG={"a":"nature||"}',
        "ru": 'export const DEF_LANG={"a":"природа||"}',
    }
    for role, p in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(bodies.get(role, default[role]), encoding="utf-8")
    return files


@pytest.mark.parametrize("role,body,needles", [
    ("index", "export const INDEX=[]", ["index.mjs", "not a JSON object", "array"]),
    ("index", 'export const INDEX={"dhammo":1}', ["index.mjs", "'dhammo'", "number"]),
    ("pali", 'export const DEF_PALI={"a":null}', ["definition-pali.mjs", "'a'", "null"]),
    ("en", 'export const DEF_LANG="x"', ["definition-en.mjs", "string"]),
    ("ru", 'export const DEF_LANG={"a":["x"]}', ["definition-ru.mjs", "'a'"]),
])
def test_wrong_shape_dpd_files_raise_data_error(tmp_path, role, body, needles):
    files = _dpd_tree(tmp_path, **{role: body})
    with pytest.raises(DataError) as exc:
        load_dpd(tmp_path)
    msg = str(exc.value)
    assert str(files[role]) in msg
    for n in needles:
        assert n in msg, (n, msg)


def test_fake_dpd_tree_still_loads(tmp_path):
    _dpd_tree(tmp_path)
    assert load_dpd(tmp_path).lemmas("dhammo") == ("dhamma",)


def test_read_json_on_a_folder_or_unreadable_file_is_a_data_error(tmp_path, monkeypatch):
    with pytest.raises(DataError, match="is a folder") as exc:
        read_json(tmp_path)
    assert str(tmp_path) in str(exc.value)
    f = _write(tmp_path / "x.json", {})

    def deny(self):
        raise PermissionError(13, "Permission denied", str(self))

    monkeypatch.setattr(Path, "read_bytes", deny)
    with pytest.raises(DataError, match="permission denied") as exc:
        read_json(f)
    assert str(f) in str(exc.value)


def _fake_bilara(root: Path, uids=("mn1", "mn2", "mn3"), coll="mn", en=True, ref=True) -> Path:
    """A small bilara tree in the real layout: each root file with its English and reference file."""
    b = root / "suttacentral-bilara"
    folder = bilara.COLLECTIONS[coll][0]
    for uid in uids:
        _write(b / f"root/pli/ms/sutta/{folder}/{uid}_root-pli-ms.json", {f"{uid}:0.1": f"{uid} ", f"{uid}:1.1": "evaṁ "})
        if en:
            _write(b / f"translation/en/sujato/sutta/{folder}/{uid}_translation-en-sujato.json", {f"{uid}:1.1": "So "})
        if ref:
            _write(b / f"reference/pli/ms/sutta/{folder}/{uid}_reference.json", {f"{uid}:1.1": "pts-vp-pli1.1"})
    return b


def test_bilara_russian_file_that_is_a_list_names_the_full_path(tmp_path):
    b = _fake_bilara(tmp_path, uids=("dn1",), coll="dn")
    ru = _write(b / "translation/ru/team/sutta/dn/dn1_translation-ru-team.json", ["dn1:1.1", "Так"])
    with pytest.raises(DataError) as exc:
        load_bilara(tmp_path, ["dn"])
    assert str(ru) in str(exc.value) and "not a JSON object" in str(exc.value)


def test_bilara_root_file_that_is_a_folder_is_a_data_error(tmp_path):
    b = _fake_bilara(tmp_path)
    bad = b / "root/pli/ms/sutta/mn/mn4_root-pli-ms.json"
    bad.mkdir()
    with pytest.raises(DataError, match="is a folder") as exc:
        load_bilara(tmp_path, ["mn"])
    assert str(bad) in str(exc.value)


@pytest.mark.parametrize("which", ["root", "en", "reference", "ru"])
def test_bilara_non_string_segment_names_file_and_key(tmp_path, which):
    b = _fake_bilara(tmp_path, uids=("dn1",), coll="dn")
    paths = {
        "root": b / "root/pli/ms/sutta/dn/dn1_root-pli-ms.json",
        "en": b / "translation/en/sujato/sutta/dn/dn1_translation-en-sujato.json",
        "reference": b / "reference/pli/ms/sutta/dn/dn1_reference.json",
        "ru": b / "translation/ru/team/sutta/dn/dn1_translation-ru-team.json",
    }
    _write(paths[which], {"dn1:1.1": 5})
    with pytest.raises(DataError) as exc:
        load_bilara(tmp_path, ["dn"])
    msg = str(exc.value)
    assert str(paths[which]) in msg and "'dn1:1.1'" in msg and "not a string" in msg


# =================================================================== P5: damaged manifests

@pytest.fixture
def built_gita_home(gita_tree, tmp_path) -> tuple[Path, Path, Path]:
    """(data, home, definitions): a home with dataset ``g`` built from the gita tree."""
    p = tmp_path / "d.toml"
    p.write_text(GITA_DEFS)
    home = tmp_path / "home"
    catalog.build("g", catalog.load_definitions(p), gita_tree, home)
    return gita_tree, home, p


@pytest.mark.parametrize("damage,state", [
    (b"\xff\xfe\x00garbage", "stale: manifest.json is unreadable"),
    (b'{"name": "g", "coun', "stale: manifest.json is unreadable"),
    (b"[]", "stale: manifest.json is unreadable"),
    (None, "stale: manifest.json lacks valid counts"),  # a manifest without counts
])
def test_damaged_manifest_is_stale_listed_without_counts_and_rebuilt(built_gita_home, monkeypatch, damage, state):
    data, home, p = built_gita_home
    defs = catalog.load_definitions(p)
    mpath = catalog.dataset_dir("g", home) / "manifest.json"
    if damage is None:
        m = json.loads(mpath.read_text(encoding="utf-8"))
        del m["counts"]
        mpath.write_text(json.dumps(m), encoding="utf-8")
    else:
        mpath.write_bytes(damage)
    assert catalog.status("g", defs, data, home) == state
    monkeypatch.setenv("WORKBENCH_DATA", str(data))
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    runner = CliRunner()
    res = runner.invoke(app, ["data", "list", "--json", "--definitions", str(p)])
    assert res.exit_code == 0, res.output
    (entry,) = json.loads(res.output)["datasets"]
    assert entry["status"] == state and "counts" not in entry
    res = runner.invoke(app, ["data", "list", "--definitions", str(p)])
    assert res.exit_code == 0 and state in res.output and "documents" not in res.output, res.output
    res = runner.invoke(app, ["data", "build", "--definitions", str(p)])
    assert res.exit_code == 0, res.output
    assert "built" in res.output
    assert catalog.status("g", defs, data, home) == "current"


# =================================================================== P6: partial bilara corpora

def test_published_facts():
    assert {c: len(u) for c, u in PUBLISHED.roots.items()} == {"dn": 34, "mn": 152, "sn56": 109, "dhp": 26}
    assert {c: len(u) for c, u in PUBLISHED.russian.items()} == {"dn": 34}
    for uids in PUBLISHED.roots.values():
        assert len(set(uids)) == len(uids)


def test_real_corpus_is_complete_and_loads_as_before(data_dir):
    check_complete(data_dir, list(bilara.COLLECTIONS))
    checked = load_bilara(data_dir, expected=PUBLISHED)
    plain = load_bilara(data_dir)
    assert len(checked.documents) == 46_971
    assert checked.documents == plain.documents and checked.orphans == plain.orphans
    assert checked.files == plain.files


@pytest.fixture
def bilara_links(data_dir, tmp_path) -> Path:
    """A data dir whose suttacentral-bilara (html left out) is symlinks to the real files."""
    data = tmp_path / "links"
    _symlink_tree(data_dir / "suttacentral-bilara", data / "suttacentral-bilara", skip=("html",))
    return data


def test_missing_root_file_is_named(bilara_links):
    gone = bilara_links / "suttacentral-bilara/root/pli/ms/sutta/mn/mn20_root-pli-ms.json"
    gone.unlink()
    with pytest.raises(DataError) as exc:
        load_bilara(bilara_links, ["mn"], expected=PUBLISHED)
    msg = str(exc.value)
    assert str(gone) in msg and "mn has 151 of its 152 root files" in msg


@pytest.mark.parametrize("rel", [
    "translation/en/sujato/sutta/mn/mn10_translation-en-sujato.json",
    "reference/pli/ms/sutta/mn/mn10_reference.json",
    "translation/en/sujato/sutta/kn/dhp/dhp21-32_translation-en-sujato.json",
])
def test_missing_companion_file_is_named(bilara_links, rel):
    gone = bilara_links / "suttacentral-bilara" / rel
    gone.unlink()
    coll = "dhp" if "dhp" in rel else "mn"
    with pytest.raises(DataError) as exc:
        load_bilara(bilara_links, [coll], expected=PUBLISHED)
    assert str(gone) in str(exc.value)


def test_missing_russian_folder_fails_only_when_dn_is_loaded(bilara_links):
    ru = bilara_links / "suttacentral-bilara/translation/ru"
    shutil.rmtree(ru)
    with pytest.raises(DataError) as exc:
        load_bilara(bilara_links, ["dn"], expected=PUBLISHED)
    assert str(ru / "team/sutta/dn") in str(exc.value)
    assert len(load_bilara(bilara_links, ["sn56"], expected=PUBLISHED).documents) > 0


def test_missing_russian_file_is_named(bilara_links):
    gone = bilara_links / "suttacentral-bilara/translation/ru/team/sutta/dn/dn9_translation-ru-team.json"
    gone.unlink()
    with pytest.raises(DataError) as exc:
        load_bilara(bilara_links, ["dn"], expected=PUBLISHED)
    assert str(gone) in str(exc.value)


def test_non_string_root_value_in_the_real_layout_is_named(bilara_links):
    bad = bilara_links / "suttacentral-bilara/root/pli/ms/sutta/mn/mn20_root-pli-ms.json"
    bad.unlink()
    _write(bad, {"mn20:1.1": 5})
    with pytest.raises(DataError) as exc:
        load_bilara(bilara_links, ["mn"], expected=PUBLISHED)
    assert str(bad) in str(exc.value) and "'mn20:1.1'" in str(exc.value)


def test_ru_sv_stays_optional(bilara_links, data_dir):
    assert not (bilara_links / "suttacentral-bilara-ru-sv").exists()
    c = load_bilara(bilara_links, ["sn56"], expected=PUBLISHED)
    full = load_bilara(data_dir, ["sn56"], expected=PUBLISHED)
    assert [d.doc_id for d in c.documents] == [d.doc_id for d in full.documents]


def test_fake_tree_with_patched_expectations(tmp_path):
    expected = Expected(roots={"mn": ("mn1", "mn2", "mn3")})
    b = _fake_bilara(tmp_path)
    assert len(load_bilara(tmp_path, ["mn"], expected=expected).documents) == 6
    (b / "translation/en/sujato/sutta/mn/mn2_translation-en-sujato.json").unlink()
    (b / "root/pli/ms/sutta/mn/mn3_root-pli-ms.json").unlink()
    with pytest.raises(DataError) as exc:
        load_bilara(tmp_path, ["mn"], expected=expected)
    msg = str(exc.value)
    assert "mn has 2 of its 3 root files" in msg
    assert "mn3_root-pli-ms.json" in msg and "mn2_translation-en-sujato.json" in msg
    assert "\n" not in msg


def test_failed_rebuild_from_a_partial_corpus_keeps_the_good_build(data_dir, tmp_path, monkeypatch):
    data = tmp_path / "links"
    _symlink_tree(data_dir / "suttacentral-bilara", data / "suttacentral-bilara")
    p = tmp_path / "d.toml"
    p.write_text(DHP_DEFS)
    defs, home = catalog.load_definitions(p), tmp_path / "home"
    good = catalog.build("b", defs, data, home)
    assert good["counts"]["documents"] > 0
    out = catalog.dataset_dir("b", home)
    before = {f.name: f.read_bytes() for f in out.iterdir()}
    gone = data / "suttacentral-bilara/root/pli/ms/sutta/kn/dhp/dhp21-32_root-pli-ms.json"
    target = gone.readlink()
    gone.unlink()
    for force in (True, False):
        with pytest.raises(DataError) as exc:
            catalog.build("b", defs, data, home, force=force)
        assert str(gone) in str(exc.value) and "dhp has 25 of its 26 root files" in str(exc.value)
    monkeypatch.setenv("WORKBENCH_DATA", str(data))
    monkeypatch.setenv("WORKBENCH_HOME", str(home))
    res = CliRunner().invoke(app, ["data", "build", "--force", "--definitions", str(p)])
    _exit2(res, str(gone))
    # The good build is untouched, and current again once the corpus is whole.
    assert {f.name: f.read_bytes() for f in out.iterdir()} == before
    assert not [x for x in out.parent.iterdir() if x.name.startswith(".b-")]
    gone.symlink_to(target)
    assert catalog.status("b", defs, data, home) == "current"
    assert len(catalog.load("b", defs, data, home).documents) == good["counts"]["documents"]


# =================================================================== P7: only the sources a build reads

def test_required_sources_per_dataset():
    defs = catalog.load_definitions()
    got = {n: catalog.required_sources(defs.definition(n), defs) for n in defs.datasets}
    assert got == {
        "gita": ("gita",),
        "bilara-segments": ("suttacentral-bilara", "ms-dpd"),
        "bilara-passages": ("suttacentral-bilara", "ms-dpd"),
        "cst4-mn": ("cst4-tipitaka-xml",),
        "bilara-filtered": ("suttacentral-bilara", "ms-dpd", "gita"),  # gita_questions
        "cst4-mn-filtered": ("cst4-tipitaka-xml", "gita"),
        "gita-negatives": ("gita", "ms-dpd"),  # its absent lemmas come from the DPD
    }


def test_required_sources_without_terms(tmp_path):
    p = tmp_path / "d.toml"
    p.write_text(DHP_DEFS + "[dataset.p]\nsource = 'bilara-passages'\nsegments_from = 'b'\n"
                 "[dataset.t]\nsource = 'bilara'\n")
    defs = catalog.load_definitions(p)
    assert catalog.required_sources(defs.definition("b"), defs) == ("suttacentral-bilara",)
    assert catalog.required_sources(defs.definition("p"), defs) == ("suttacentral-bilara",)
    # No query_types: every type is built, the term type included.
    assert catalog.required_sources(defs.definition("t"), defs) == ("suttacentral-bilara", "ms-dpd")


def test_cli_build_only_gita_needs_only_the_gita_corpus(gita_tree, tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATA", str(gita_tree))
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    res = CliRunner().invoke(app, ["data", "build", "--only", "gita"])
    assert res.exit_code == 0, res.output
    assert "gita" in res.output and "701" in res.output
    res = CliRunner().invoke(app, ["data", "build", "--only", "bilara-segments"])
    _exit2(res, "suttacentral-bilara/", "ms-dpd/")


# =================================================================== P8: data dir that is a file

def test_data_dir_that_is_a_file(clean_env, tmp_path):
    f = tmp_path / "data.txt"
    f.write_text("x")
    clean_env.setenv("WORKBENCH_DATA", str(f))
    with pytest.raises(DataError) as exc:
        data_dir()
    msg = str(exc.value)
    assert str(f) in msg and "is a file, not a folder" in msg and "does not exist" not in msg


def test_data_dir_from_config_names_the_config(clean_env, tmp_path):
    (tmp_path / "workbench.toml").write_text('[paths]\ndata = "nowhere"\n')
    with pytest.raises(DataError) as exc:
        data_dir()
    assert "[paths] data in" in str(exc.value) and "workbench.toml" in str(exc.value)


# =================================================================== P9: ref parse

@pytest.mark.parametrize("coll", ["Q", ""])
def test_cli_ref_parse_unknown_collection_exits_2(coll):
    res = CliRunner().invoke(app, ["ref", "parse", "P1.56", "--collection", coll])
    _exit2(res, f"unknown --collection {coll!r}; use one of D, M, S, Dhp, Ps")


def test_cli_ref_parse_known_collection_and_unresolved_still_work():
    res = CliRunner().invoke(app, ["ref", "parse", "P1.56", "--collection", "MN", "--json"])
    assert res.exit_code == 0 and json.loads(res.output)[0]["canonical"] == "PTS M 1.56"
    res = CliRunner().invoke(app, ["ref", "parse", "BG 19.1"])
    assert res.exit_code == 1 and "18 chapters" in res.output


def test_cli_ref_parse_does_not_echo_a_huge_input():
    huge = "M " + "x" * 10_000
    for args in (["ref", "parse", huge], ["ref", "parse", huge, "--json"]):
        res = CliRunner().invoke(app, args)
        assert res.exit_code == 1
        assert len(res.output) < 600 and "…" in res.output and "Traceback" not in res.output


# =================================================================== minor

def test_no_data_dir_message_has_no_literal_backslash_n(clean_env):
    with pytest.raises(ConfigError) as exc:
        data_dir()
    msg = str(exc.value)
    assert "\\n" not in msg and "\n" not in msg and '[paths] data = "..."' in msg


def test_cli_definitions_option_is_named(tmp_path, monkeypatch, data_dir):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("WORKBENCH_DATASETS", raising=False)
    for cmd in ("build", "list"):
        res = CliRunner().invoke(app, ["data", cmd, "--definitions", str(tmp_path / "none.toml")])
        line = _exit2(res, str(tmp_path / "none.toml"), "--definitions")
        assert "WORKBENCH_DATASETS" not in line


def test_workbench_datasets_is_named_when_it_is_the_source(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_DATASETS", str(tmp_path / "none.toml"))
    with pytest.raises(ConfigError, match="WORKBENCH_DATASETS"):
        catalog.load_definitions()


def test_fail_prints_one_line(capsys):
    import typer

    from workbench.cli import _fail

    with pytest.raises(typer.Exit) as exc:
        _fail(WorkbenchError("first\nsecond"))
    assert exc.value.exit_code == 2
    err = capsys.readouterr().err
    assert err.strip() == "error: first second"
