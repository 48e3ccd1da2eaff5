"""Strict JSON for machine output (issue #41): an undefined number is null, never NaN."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from workbench._infra.durable import atomic_write_json
from workbench._infra.jsonout import dumps, finite


def _strict(text: str):
    def refuse(name):
        raise ValueError(f"{name} is not JSON")

    return json.loads(text, parse_constant=refuse)


def test_non_finite_numbers_become_null_at_any_depth_and_numpy_scalars_plain_numbers():
    body = {"ci": [math.nan, 0.5, math.inf], "p": {"x": -math.inf, "y": np.float32(0.25), "z": np.float64("nan")},
            "n": np.int64(3), "t": (1, math.nan), "s": "NaN"}
    assert finite(body) == {"ci": [None, 0.5, None], "p": {"x": None, "y": 0.25, "z": None}, "n": 3,
                            "t": [1, None], "s": "NaN"}
    assert _strict(dumps(body, sort_keys=True)) == finite(body)
    assert json.dumps(body, default=str).count("NaN") == 4  # three bare NaN (the bug) and the string


def test_a_default_that_gives_a_float_is_made_finite_and_allow_nan_cannot_be_turned_back_on():
    class Odd:
        pass

    assert dumps({"v": Odd()}, default=lambda _o: math.nan) == '{"v": null}'
    assert dumps([math.nan], allow_nan=True) == "[null]"
    with pytest.raises(TypeError):
        dumps({"v": Odd()})


def test_atomic_json_files_are_strict(tmp_path):
    path = atomic_write_json(tmp_path / "r.json", {"ci_low": math.nan, "name": "गीता"})
    assert _strict(path.read_text(encoding="utf-8")) == {"ci_low": None, "name": "गीता"}
