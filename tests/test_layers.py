"""The import layers: no cycles, and the core never imports a plug-in or a page by name.

Read with grimp (the import graph library behind import-linter), which sees every import
statement, those inside functions included, so a lazy import cannot hide a cycle.

The layers: ``workbench`` (the core) → ``retrievers`` (plug-ins, found through entry points)
→ ``dashboards`` (Streamlit pages). A module may import from its own layer and the layers
before it; the core's tests of plug-ins go through :mod:`workbench.registry`.
"""

from __future__ import annotations

import grimp
import pytest

PACKAGES = ("workbench", "retrievers", "dashboards")


@pytest.fixture(scope="module")
def graph():
    return grimp.build_graph(*PACKAGES, include_external_packages=False)


def _cycles(graph) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan 1972), each sorted."""
    edges = {m: sorted(graph.find_modules_directly_imported_by(m)) for m in graph.modules}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for m in sorted(graph.modules):
        if m not in index:
            visit(m)
    return out


def test_there_is_no_import_cycle(graph):
    assert _cycles(graph) == []


@pytest.mark.parametrize("importer, forbidden", [("workbench", "retrievers"), ("workbench", "dashboards"),
                                                 ("retrievers", "dashboards")])
def test_no_layer_imports_a_later_one(graph, importer, forbidden):
    upward = sorted((m, i) for m in graph.modules if m.split(".")[0] == importer
                    for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] == forbidden)
    assert upward == []


def test_the_cycle_finder_finds_a_cycle():
    """The check itself: a two-module cycle and a three-module one are found, a chain is not."""
    class G:
        modules = {"a", "b", "c", "d", "e"}
        _e = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}}

        def find_modules_directly_imported_by(self, m):
            return self._e.get(m, set())

    assert _cycles(G()) == [["a", "b"], ["c", "d", "e"]]
    G._e = {"a": {"b"}, "b": {"c"}}
    assert _cycles(G()) == []
