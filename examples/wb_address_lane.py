"""A third-party retriever kind in one file: the worked example of the docs' Extending page.

``address`` ranks the documents whose canonical address equals the query (``BG 2.47``), score 1.0;
nothing else. Registered by one line in its distribution's entry points::

    [workbench.retrievers]
    address = wb_address_lane:AddressKind
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pydantic import Field

from workbench.registry import Params, RetrieverKind
from workbench.run import Run
from workbench.types import Query


def _key(text: str, case_sensitive: bool) -> str:
    text = " ".join(text.split())
    return text if case_sensitive else text.casefold()


class AddressLane:
    """Exact canonical-address lookup; score 1.0 for a match (higher is better), ties by doc_id."""

    def __init__(self, name: str, documents, case_sensitive: bool):
        self.name = name
        self.score_kind = "1.0 = the document's address equals the query, higher is better"
        self.case_sensitive = case_sensitive
        self._by_key: dict[str, list[str]] = {}
        for d in documents:
            self._by_key.setdefault(_key(d.address, case_sensitive), []).append(d.doc_id)
        self.last_latencies_ms: dict[str, float] = {}

    def config(self) -> dict[str, Any]:
        return {"kind": "address", "case_sensitive": self.case_sensitive}

    def search(self, queries: Sequence[Query], k: int) -> Run:
        rows = {q.query_id: [(d, 1.0) for d in self._by_key.get(_key(q.text or "", self.case_sensitive), [])][:k]
                for q in queries}
        self.last_latencies_ms = {q.query_id: 0.0 for q in queries}
        return Run(rows, self.name)


class AddressParams(Params):
    case_sensitive: bool = Field(False, description="compare addresses with their case")


class AddressKind(RetrieverKind):
    """``address``: exact canonical-address lookup (no index, no service)."""

    kind = "address"
    summary = "exact canonical-address lookup; 1.0 for a match"
    Params = AddressParams

    def open(self, name: str, params: AddressParams, ds, res) -> AddressLane:
        return AddressLane(name, ds.documents, params.case_sensitive)
