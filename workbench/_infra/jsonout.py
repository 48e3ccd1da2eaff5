"""Machine output as strict JSON (RFC 8259): an undefined number is ``null``, never ``NaN`` or ``Infinity``.

Python's ``json`` writes ``NaN``, ``Infinity`` and ``-Infinity`` by default, which ``JSON.parse``, jq and every
strict parser refuse (issue #41: a gate report with ``"ci_low": NaN``). Every ``--json`` output, report, export and
artifact the workbench writes goes through :func:`dumps`: non-finite floats (numpy's included) become ``None``
first, then ``json.dumps(..., allow_nan=False)`` guarantees nothing slipped through. Readers map ``null`` back to
NaN where a number is undefined (``workbench.gate.decide.Check.from_json``).
"""

from __future__ import annotations

import json
import math
from typing import Any


def finite(obj: Any) -> Any:
    """``obj`` with every non-finite float (``nan``, ``inf``; Python's or numpy's) replaced by ``None``, numpy
    scalars as Python ones, tuples as lists; dicts and lists are copied, other values returned as they are."""
    if isinstance(obj, float):
        return obj if math.isfinite(obj) else None
    if isinstance(obj, dict):
        return {k: finite(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [finite(v) for v in obj]
    if type(obj).__module__ == "numpy" and hasattr(obj, "item") and getattr(obj, "ndim", None) == 0:
        return finite(obj.item())
    return obj


def dumps(obj: Any, **kw: Any) -> str:
    """``json.dumps(finite(obj), allow_nan=False, **kw)``: strict JSON text.

    Raises:
        TypeError: a value that is not JSON and no ``default`` was given (as ``json.dumps``).
    """
    kw.pop("allow_nan", None)
    default = kw.pop("default", None)
    if default is not None:  # a value `default` turns into a float is made finite too
        kw["default"] = lambda o: finite(default(o))
    return json.dumps(finite(obj), allow_nan=False, **kw)
