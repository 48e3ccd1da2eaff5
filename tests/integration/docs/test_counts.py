"""The docs' table of query counts (docs/how-to/datasets.md) matches what `workbench data build` produces."""

from __future__ import annotations

import json
import re

from fixtures.paths import REPO

from workbench.data import catalog

PAGE = REPO / "docs" / "how-to" / "datasets.md"


def test_the_docs_query_counts_match_the_build(built_home):
    text = PAGE.read_text(encoding="utf-8")
    rows = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"^\| `([a-z0-9-]+)`", line)
        if m:
            current = m.group(1)
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if current and len(cells) == 7 and cells[-1].replace(",", "").isdigit() and cells[3].isdigit():
            qtype = cells[2].split()[0]
            rows[(current, qtype)] = tuple(int(c.replace(",", "")) for c in cells[3:])
    assert rows, f"no count rows found in the table of {PAGE}"
    for name in ("gita", "bilara-segments", "cst4-mn"):
        manifest = json.loads((catalog.dataset_dir(name, built_home) / "manifest.json").read_text())
        for qtype, by in manifest["counts"]["by_type_split"].items():
            expected = (by.get("train", 0), by.get("dev", 0), by.get("test", 0), sum(by.values()))
            assert rows.get((name, qtype)) == expected, (name, qtype, rows.get((name, qtype)), expected)
