"""The HNSW build's ``maintenance_work_mem``: sized to the graph, bounded by the machine (issue #42's 1M row)."""

from __future__ import annotations

import pytest

from workbench.engines.pg_index import hnsw_graph_bytes, maintenance_work_mem_mb

GIB = 2**30


def test_the_graph_estimate_adds_the_vector_the_neighbour_lists_and_the_element():
    # m = 16, dim = 32, vector: 8 + 4·32 = 136; layer 0: 16 + 16·32 = 528; upper: (16 + 16·16)/15 = 18.13;
    # element 160 → 842.13 bytes a vector
    assert hnsw_graph_bytes(1_000_000, 32, 16, False) == 842_133_333
    # halfvec, dim 384, m 8: 8 + 768 = 776; 16 + 256 = 272; (16 + 128)/7 = 20.57; 160 → 1228.57
    assert hnsw_graph_bytes(1000, 384, 8, True) == 1_228_571
    assert hnsw_graph_bytes(0, 32, 16, False) == 0


def test_small_corpora_keep_the_floor_and_a_million_vectors_get_their_graph():
    assert maintenance_work_mem_mb(46_971, 384, 16, False, memory_bytes=24 * GIB) == 512
    # 842,133,333 × 1.25 / 2^20 = 1003.9 → 1004 MB (the 1M row built on disk at 512 MB)
    assert maintenance_work_mem_mb(1_000_000, 32, 16, False, memory_bytes=24 * GIB) == 1004


@pytest.mark.parametrize("memory_gib, expected", [(2, 512), (3, 768), (64, 1004)])
def test_the_setting_never_passes_a_quarter_of_the_memory_nor_goes_under_the_floor(memory_gib, expected):
    assert maintenance_work_mem_mb(1_000_000, 32, 16, False, memory_bytes=memory_gib * GIB) == expected
