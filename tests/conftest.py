"""Shared fixtures.

Tests that need the real corpora take the ``data_dir`` fixture. Without
``WORKBENCH_DATA`` they are skipped, unless ``WORKBENCH_REQUIRE_DATA=1`` (as in
``.ci/run``), where a missing corpus is an error rather than a silent skip.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def data_dir() -> Path:
    from workbench.settings import data_dir as resolve

    if not os.environ.get("WORKBENCH_DATA"):
        if os.environ.get("WORKBENCH_REQUIRE_DATA") == "1":
            pytest.fail("WORKBENCH_DATA is not set but WORKBENCH_REQUIRE_DATA=1: point it at shared/data")
        pytest.skip("set WORKBENCH_DATA to the corpora folder (shared/data) to run the data tests")
    return resolve()


@pytest.fixture(scope="session")
def built_home(data_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A workbench home with every dataset of datasets/datasets.toml built once for the session."""
    from workbench import catalog

    home = tmp_path_factory.mktemp("home")
    defs = catalog.load_definitions()
    for name in defs.datasets:
        catalog.build(name, defs, data_dir, home)
    return home


@pytest.fixture(scope="session")
def pg_dsn():
    """The admin DSN of a real PostgreSQL (pgvector, pg_trgm, unaccent) for the session.

    The embedded server of a fresh temporary home, stopped and its data deleted at the
    end of the session; ``WORKBENCH_PG_DSN``, when set, names an external server to use
    instead.
    """
    import shutil
    import tempfile

    from workbench.pg import remove_embedded, server_dsn

    if os.environ.get("WORKBENCH_PG_DSN", "").strip():
        yield server_dsn()
        return
    home = Path(tempfile.mkdtemp(prefix="wb-test-pg-"))
    try:
        yield server_dsn(home)
    finally:
        remove_embedded(home)  # as root the data live outside the home: removing the home alone would leave them
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="session")
def os_cluster():
    """``(client, url)`` of a real OpenSearch with k-NN and ICU analysis for the session.

    ``WORKBENCH_OS_URL`` when set (``.ci/run`` starts the local node and sets it);
    otherwise the workbench's local node of the current home, started if needed and
    stopped at the end only when this session started it. Indexes the tests create
    (``wb-*``) are deleted at the end.
    """
    from workbench import osearch
    from workbench.services import opensearch as node
    from workbench.settings import home_dir

    started = False
    if os.environ.get(osearch.URL_ENV, "").strip():
        url = osearch.cluster_url()
    else:
        home = home_dir()
        started = node.status(home)["state"] != "running"
        url = node.up(home, log=lambda _m: None).url
    es = osearch.client(url)
    osearch.check_cluster(es, url)
    before = set(es.indices.get(index="wb-*", ignore_unavailable=True, allow_no_indices=True))
    try:
        yield es, url
    finally:
        after = set(es.indices.get(index="wb-*", ignore_unavailable=True, allow_no_indices=True))
        for name in sorted(after - before):
            es.indices.delete(index=name, ignore_unavailable=True)
        if started:
            node.down(home_dir())


@pytest.fixture
def judge_store(pg_dsn):
    """A judgment store with an empty ``wb_judge`` schema on the session's server (closed after the test)."""
    import psycopg

    from workbench.judging.store import JudgmentStore

    with psycopg.connect(pg_dsn, autocommit=True) as conn:
        conn.execute("DROP SCHEMA IF EXISTS wb_judge CASCADE")
    st = JudgmentStore(pg_dsn)
    yield st
    st.close()
