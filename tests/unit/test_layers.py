"""The import layers, read from the architecture page: no cycle, nothing imports a layer above its
own, siblings of one layer do not import each other, and no package uses another's ``_private`` names.

The order is written once, in ``docs/architecture.md`` (the fenced ``layers`` block: one layer per
line from the bottom, siblings separated by ``|``); this test reads it from there, so the page and
the code cannot drift apart. Imports are read with grimp (the import graph library behind
import-linter), which sees every import statement, those inside functions included, so a lazy
import cannot hide an upward edge or a cycle. A module belongs to the longest layer entry that
prefixes its dotted name (``workbench.eval.fusion`` → ``workbench.eval``).
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import grimp
import pytest
from fixtures.paths import REPO

ROOT = REPO
ARCHITECTURE = ROOT / "docs" / "architecture.md"
PACKAGES = ("workbench", "retrievers", "dashboards")


def read_layers(text: str) -> list[list[str]]:
    """The layers of the first fenced block whose info string is ``layers``, bottom first.

    Raises:
        ValueError: the page has no such block, or an entry is listed twice.
    """
    m = re.search(r"^```layers\n(.*?)^```", text, flags=re.M | re.S)
    if not m:
        raise ValueError(f"{ARCHITECTURE} has no ```layers block")
    layers = [[e.strip() for e in line.split("|") if e.strip()]
              for line in m.group(1).splitlines() if line.strip() and not line.lstrip().startswith("#")]
    entries = [e for layer in layers for e in layer]
    if len(entries) != len(set(entries)):
        raise ValueError(f"an entry is listed twice in {ARCHITECTURE}'s layers block")
    return layers


def _owner(module: str, entries: list[str]) -> str | None:
    """The longest entry that is ``module`` or a dotted prefix of it."""
    best = None
    for e in entries:
        if (module == e or module.startswith(e + ".")) and (best is None or len(e) > len(best)):
            best = e
    return best


@pytest.fixture(scope="module")
def layers():
    return read_layers(ARCHITECTURE.read_text(encoding="utf-8"))


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


def layer_violations(graph, layers: list[list[str]]) -> list[str]:
    """Every import that goes to a higher layer, or sideways to a sibling of the same layer, as
    ``"importer -> imported (why)"``; also every module that no layer entry covers."""
    entries = [e for layer in layers for e in layer]
    level = {e: i for i, layer in enumerate(layers) for e in layer}
    out = []
    for m in sorted(graph.modules):
        a = _owner(m, entries)
        if a is None:
            if m not in PACKAGES[:1]:  # the bare `workbench` package (its __init__) imports nothing
                out.append(f"{m}: in no layer of {ARCHITECTURE.name}")
            continue
        for i in sorted(graph.find_modules_directly_imported_by(m)):
            b = _owner(i, entries)
            if b is None or a == b:
                continue
            if level[b] > level[a]:
                out.append(f"{m} -> {i} (up: {a} is below {b})")
            elif level[b] == level[a]:
                out.append(f"{m} -> {i} (sideways: {a} and {b} are siblings)")
    return out


def _package(module: str) -> str:
    """The unit that owns private names: ``workbench.<sub>`` inside the core, else the top package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "workbench" and len(parts) > 1 else parts[0]


def private_uses(files: list[Path], root: Path = ROOT) -> list[str]:
    """Uses of another package's ``_private`` names: ``from workbench.x.y import _name`` and
    ``y._name`` where ``y`` is a module of another package, as ``"file:line: what"``."""
    out = []
    for f in files:
        mod = ".".join(f.relative_to(root).with_suffix("").parts).removesuffix(".__init__")
        tree = ast.parse(f.read_text(encoding="utf-8"))
        aliases: dict[str, str] = {}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module \
                    and node.module.split(".")[0] in PACKAGES:
                for a in node.names:
                    full = f"{node.module}.{a.name}"
                    owner = _package(full if node.module == "workbench" else node.module)
                    if a.name.startswith("_") and not a.name.startswith("__") and owner != _package(mod):
                        out.append(f"{f.relative_to(root)}:{node.lineno}: from {node.module} import {a.name}")
                    aliases[a.asname or a.name] = full
            elif isinstance(node, ast.Import):
                for a in node.names:
                    if a.asname:
                        aliases[a.asname] = a.name
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id in aliases \
                    and node.attr.startswith("_") and not node.attr.startswith("__"):
                target = aliases[node.value.id]
                if target.split(".")[0] in PACKAGES and _package(target) != _package(mod):
                    out.append(f"{f.relative_to(root)}:{node.lineno}: {node.value.id}.{node.attr} ({target})")
    return sorted(out)


def test_there_is_no_import_cycle(graph):
    assert _cycles(graph) == []


def test_every_import_keeps_the_documented_layer_order(graph, layers):
    assert layer_violations(graph, layers) == []


def test_the_core_never_imports_a_plug_in_or_a_page(graph):
    upward = sorted((m, i) for m in graph.modules if m.split(".")[0] == "workbench"
                    for i in graph.find_modules_directly_imported_by(m) if i.split(".")[0] in ("retrievers", "dashboards"))
    assert upward == []


def test_no_package_uses_another_packages_private_names():
    files = sorted(p for pkg in PACKAGES for p in (ROOT / pkg).rglob("*.py"))
    assert private_uses(files) == []


def test_the_top_of_workbench_holds_at_most_eight_modules():
    top = sorted(p.name for p in (ROOT / "workbench").glob("*.py") if p.name != "__init__.py")
    assert len(top) <= 8, top


def test_the_checks_themselves(tmp_path):
    """The cycle finder finds a two- and a three-module cycle and not a chain; the layer check flags an
    upward and a sideways import and an unlisted module; the private-name check flags both forms."""
    class G:
        modules = {"a", "b", "c", "d", "e"}
        _e = {"a": {"b"}, "b": {"a"}, "c": {"d"}, "d": {"e"}, "e": {"c"}}

        def find_modules_directly_imported_by(self, m):
            return self._e.get(m, set())

    assert _cycles(G()) == [["a", "b"], ["c", "d", "e"]]
    G._e = {"a": {"b"}, "b": {"c"}}
    assert _cycles(G()) == []

    layers = read_layers("x\n```layers\nlow\nmid.a | mid.b\nhigh\n```\n")
    assert layers == [["low"], ["mid.a", "mid.b"], ["high"]]
    G.modules = {"low", "low.x", "mid.a.m", "mid.b", "high", "stray"}
    G._e = {"low.x": {"high"}, "mid.a.m": {"mid.b", "low"}, "high": {"mid.a.m"}}
    assert layer_violations(G(), layers) == [
        "low.x -> high (up: low is below high)", "mid.a.m -> mid.b (sideways: mid.a and mid.b are siblings)",
        "stray: in no layer of architecture.md"]
    with pytest.raises(ValueError):
        read_layers("no block here")

    pkg = tmp_path / "workbench" / "eval"
    pkg.mkdir(parents=True)
    f = pkg / "m.py"
    f.write_text("from workbench.experiment.tracking import _quiet, ok\nfrom workbench.eval.stats import _own\n"
                 "import workbench.engines.pg_client as pg\npg._first_line(1)\n")
    assert private_uses([f], tmp_path) == [
        "workbench/eval/m.py:1: from workbench.experiment.tracking import _quiet",
        "workbench/eval/m.py:4: pg._first_line (workbench.engines.pg_client)"]
