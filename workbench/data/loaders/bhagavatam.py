"""The Śrīmad-Bhāgavatam sample (sanskritsahitya-com-data): optional, for tests only.

No licence is stated for this digitisation (see its PROVENANCE.md), so the workbench
never builds a dataset from it by default; tests and experiments may use it when it is
present. One document per verse entry: doc_id ``sb<canto>.<chapter>.<verse>``, address
``SB <canto>.<chapter>.<verse>``; the 526 entries that repeat an address get the suffix
``#<i>`` with the running index ``i``. Texts: the Devanagari as given and an IAST form
made with ``indic-transliteration``.
"""

from __future__ import annotations

from pathlib import Path

from workbench.data.loaders._io import read_json
from workbench.errors import DataError
from workbench.text.normalize import nfc
from workbench.types import Document, Text

RELATIVE_PATH = Path("sanskritsahitya-bhagavatam") / "srimadbhaagavatam" / "srimadbhaagavatam.json"


def load_bhagavatam(data_dir: Path, limit: int | None = None) -> list[Document]:
    """Load Bhāgavatam verses (in text order, at most ``limit``).

    Raises:
        DataError: the file is missing or malformed (names the path).
    """
    from indic_transliteration import sanscript

    path = data_dir / RELATIVE_PATH
    obj = read_json(path)
    if not isinstance(obj, dict) or not isinstance(obj.get("data"), list):
        raise DataError(f"{path} has no 'data' list; it is not the sanskritsahitya JSON expected")
    docs: list[Document] = []
    seen: set[str] = set()
    for rec in obj["data"]:
        if "v" not in rec or "n" not in rec:
            continue
        addr = f"{rec['c']}.{rec['n']}"
        doc_id = f"sb{addr}"
        if doc_id in seen:
            doc_id = f"{doc_id}#{rec.get('i')}"
        seen.add(doc_id)
        deva = nfc(rec["v"]).strip()
        iast = sanscript.transliterate(deva, sanscript.DEVANAGARI, sanscript.IAST)
        docs.append(
            Document(
                doc_id=doc_id, address=f"SB {addr}", work_id="sb", granularity="verse",
                texts=(Text("root", "sa", "Deva", deva, "sanskritsahitya"),
                       Text("transliteration_iast", "sa", "Latn", iast, "indic-transliteration")),
                metadata={"canto": int(str(rec["c"]).split(".")[0]), "index": rec.get("i")},
            )
        )
        if limit is not None and len(docs) >= limit:
            break
    return docs
