"""Indexing a million documents (issue #42): the HNSW build's ``maintenance_work_mem`` sized to the graph and bounded by
the machine; the OpenSearch heap warning before a long bulk load."""

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


def test_the_opensearch_heap_advice_before_a_long_bulk_load():
    """A node whose heap is under what the corpus needed in docs/measured gets a line with the heap to give."""
    from workbench.engines.os_index import heap_advice

    # 1,000,000 x 800 B = 763 MB needed; a 512 MB heap: said, 763 / 0.75 = 1017 MB -> 1g
    line = heap_advice(512 * 2**20, 1_000_000, "http://127.0.0.1:9200")
    assert line is not None and "a 512 MB heap" in line and "WORKBENCH_OS_HEAP=1g" in line
    assert "needed about 763 MB" in line
    assert heap_advice(2 * 2**30, 1_000_000, "u") is None  # 763 MB of 2 GB: fine (measured: it built)
    assert heap_advice(512 * 2**20, 100_000, "u") is None  # 76 MB of 512 MB: fine (measured at 100k)
    assert "WORKBENCH_OS_HEAP=10g" in heap_advice(2 * 2**30, 10_000_000, "u")  # 7.45 GiB / 0.75 = 9.93 -> 10
