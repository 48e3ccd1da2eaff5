"""Shared fixtures, and the markers of the test tiers.

Tests that need the real corpora take the ``data_dir`` fixture. Without
``WORKBENCH_DATA`` they are skipped, unless ``WORKBENCH_REQUIRE_DATA=1`` (as in
``.ci/run``), where a missing corpus is an error rather than a silent skip.

Markers (declared in pyproject.toml): a test using ``pg_dsn``, ``os_cluster`` or ``data_dir``,
directly or through another fixture, is marked ``pg``, ``opensearch`` or ``data`` here; a test
that starts a service itself, or drives Chromium, carries ``@pytest.mark.pg``,
``@pytest.mark.opensearch`` or ``@pytest.mark.browser`` in its file. Every test with none of
these four is marked ``unit``, every other one ``integration``: ``pytest -m unit`` needs
neither a service nor a corpus.

Parallel workers (pytest-xdist, ``make test`` runs ``-n auto --dist loadscope``): each worker has its own
workbench home (``<WORKBENCH_HOME>-gw0``, …), so its own embedded PostgreSQL, caches and built datasets; the
tests of one module run on one worker (its module fixtures are built once), and the modules that take
``os_cluster`` on one worker, and those that take ``board`` on one (:data:`SHARED_SCOPES`).
"""

from __future__ import annotations

import ast
import functools
import os
import sys
from pathlib import Path

import pytest

#: The fixtures that start or reach a service or read the corpora, and the marker of the tests using them.
FIXTURE_MARKERS = {"pg_dsn": "pg", "os_cluster": "opensearch", "data_dir": "data"}
#: The markers that take a test out of the unit tier.
INTEGRATION_MARKERS = ("pg", "opensearch", "browser", "data")


#: Modules that share one xdist worker, by a fixture they take: ``os_cluster`` (a session's ``os_cluster``
#: deletes the ``wb-*`` indexes it saw made, and two builders of one index delete each other's incomplete build)
#: and ``board`` (a session fixture of two minutes, built once per worker that takes it). The value names the
#: scope; a module that takes none is a scope of its own.
SHARED_SCOPES = {"os_cluster": "opensearch", "board": "board"}


@functools.cache
def module_scope(module: str) -> str:
    """The xdist scope of the test module at ``module`` (a path relative to the root): the scope of the first
    :data:`SHARED_SCOPES` fixture that a function of it takes as an argument (``opensearch`` too for a module
    marked ``opensearch``), else ``module`` itself. Read from the source, as the controller never collects."""
    path = Path(__file__).parent.parent / module
    try:
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
    except (OSError, SyntaxError, ValueError):
        return module
    args = {a.arg for node in ast.walk(tree) if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            for a in (*node.args.posonlyargs, *node.args.args, *node.args.kwonlyargs)}
    if "mark.opensearch" in source:
        args.add("os_cluster")
    return next((scope for fixture, scope in SHARED_SCOPES.items() if fixture in args), module)


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook (`make test`; plain pytest runs without it)
def pytest_xdist_make_scheduler(config: pytest.Config, log):
    """``--dist loadscope`` with :func:`module_scope` for scopes: a module's tests run on one worker (its module
    fixtures are built once), and the modules of one shared scope on one worker. (``--dist loadgroup`` cannot
    do it on pytest 9: xdist 3.8 renames a grouped test through ``item._nodeid``, which pytest 9 no longer reads.)"""
    if config.getvalue("dist") != "loadscope":
        return None
    from xdist.scheduler import LoadScopeScheduling

    class ModuleScopeScheduling(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return module_scope(nodeid.split("::", 1)[0])

    return ModuleScopeScheduling(config, log)


def pytest_configure(config: pytest.Config) -> None:
    """Under pytest-xdist, give this worker a workbench home of its own (``<home>-<worker>``) and a numba cache
    of its own there (numba's cache files are not safe for two processes compiling at once: numba issue
    #10128; a worker once read another's kernel and computed a wrong recall). The OpenSearch node that
    ``WORKBENCH_OS_URL`` names stays the first home's: ``WORKBENCH_OS_HOME`` lets the clients read its
    credentials, in this process and in the commands the tests run."""
    worker = os.environ.get("PYTEST_XDIST_WORKER")
    if not worker:
        return
    base = os.environ.get("WORKBENCH_HOME", "").strip() or str(Path.home() / ".workbench")
    home = Path(f"{base.rstrip('/')}-{worker}")
    os.environ["WORKBENCH_HOME"] = str(home)
    os.environ["NUMBA_CACHE_DIR"] = str(home / "numba-cache")
    if "numba" in sys.modules:  # read at numba's import: make it read again
        from numba.core import config as numba_config

        numba_config.reload_config()
    if os.environ.get("WORKBENCH_OS_URL", "").strip() and not os.environ.get("WORKBENCH_OS_HOME", "").strip():
        os.environ["WORKBENCH_OS_HOME"] = base


@pytest.hookimpl(tryfirst=True)  # before ``-m`` selects on the markers
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark each test by the fixtures it uses (their closure), then ``unit`` or ``integration``; on an xdist
    worker, check that :func:`module_scope` put it where its fixtures need it."""
    for item in items:
        used = set(getattr(item, "fixturenames", ()))
        for fixture, marker in FIXTURE_MARKERS.items():
            if fixture in used and item.get_closest_marker(marker) is None:
                item.add_marker(marker)
        tier = "integration" if any(item.get_closest_marker(m) for m in INTEGRATION_MARKERS) else "unit"
        item.add_marker(tier)
    if os.environ.get("PYTEST_XDIST_WORKER"):  # the controller's scopes, read from the source, must hold
        for item in items:
            module = item.nodeid.split("::", 1)[0]
            for fixture, scope in SHARED_SCOPES.items():
                uses = fixture in getattr(item, "fixturenames", ()) or (scope == "opensearch" and
                                                                         item.get_closest_marker("opensearch"))
                if uses and module_scope(module) != scope:
                    raise pytest.UsageError(f"{item.nodeid} uses {fixture} through another fixture: take {fixture} "
                                            f"by name in {module} so that tests/conftest.py keeps it in the "
                                            f"{scope!r} scope of pytest-xdist")


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
    from workbench.data import catalog

    home = tmp_path_factory.mktemp("home")
    defs = catalog.load_definitions()
    for name in defs.datasets:
        catalog.build(name, defs, data_dir, home)
    return home


@pytest.fixture(scope="session")
def home_with(built_home: Path, tmp_path_factory: pytest.TempPathFactory):
    """``home_with(name, *datasets)``: a new home (a temporary folder named from ``name``) holding copies of
    those datasets of the session's :func:`built_home` (a copy takes milliseconds; building the gita again,
    20-40 s). The copies are current: a build's manifest names its inputs, not its home."""
    import shutil

    from workbench.data import catalog

    def make(name: str, *datasets: str) -> Path:
        home = tmp_path_factory.mktemp(name)
        for ds in datasets:
            shutil.copytree(catalog.dataset_dir(ds, built_home), catalog.dataset_dir(ds, home))
        return home

    return make


@pytest.fixture(scope="session")
def gita(built_home: Path, data_dir: Path):
    """The gita dataset (701 verses and its query set) from the session's :func:`built_home`."""
    from workbench.data import catalog

    return catalog.load("gita", catalog.load_definitions(), data_dir, built_home)


@pytest.fixture(scope="session")
def board(built_home, data_dir, pg_dsn, tmp_path_factory) -> Path:
    """A home with the main job's kinds of results: the gita evaluated (board.toml: rrf, noref, ref) and
    tracked in MLflow, the study board-study, a failing gate report (tests/fixtures/board.py)."""
    from fixtures.board import make_board

    return make_board(built_home, pg_dsn, tmp_path_factory)


@pytest.fixture(scope="session")
def pg_dsn():
    """The admin DSN of a real PostgreSQL (pgvector, pg_trgm, unaccent) for the session.

    The embedded server of a fresh temporary home, stopped and its data deleted at the
    end of the session; ``WORKBENCH_PG_DSN``, when set, names an external server to use
    instead.
    """
    import shutil
    import tempfile

    from workbench.engines.pg_client import remove_embedded, server_dsn

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
    from workbench.engines import os_client as osearch
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


@pytest.fixture(scope="session")
def ce_folder(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An untrained one-label cross-encoder from the shipped MiniLM checkpoint (seed 0, max_length 128):
    :func:`workbench.testing.make_cross_encoder`."""
    pytest.importorskip("sentence_transformers")
    from workbench.testing import make_cross_encoder

    return make_cross_encoder(tmp_path_factory.mktemp("ce") / "tiny-ce")


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
