"""A key typed into a URL is never printed in a refusal (issue #41: the openai embedder's refusal showed it)."""

from __future__ import annotations

import pytest

from workbench.errors import ConfigError
from workbench.io.http import check_url, masked_url


@pytest.mark.parametrize("url, shown", [
    ("https://user:sk-SECRET@[::1/v1", "'https://***@[::1/v1'"),
    ("ftp://host/v1?api_key=sk-SECRET", "'ftp://host/v1?***'"),
    ("api.openai.com/v1#sk-SECRET", "'api.openai.com/v1#***'"),
    ("http://127.0.0.1:8000/v1", "'http://127.0.0.1:8000/v1'"),
    (None, "None"),
])
def test_masked_url(url, shown):
    assert masked_url(url) == shown


@pytest.mark.parametrize("url", ["https://user:sk-SECRET@[::1/v1", "ftp://host/v1?api_key=sk-SECRET",
                                 "https://sk-SECRET@host/v1"])
def test_no_refusal_prints_the_key(url):
    with pytest.raises(ConfigError) as err:
        check_url(url, "embedders.prod base_url", 'base_url = "https://api.openai.com/v1"')
    assert "sk-SECRET" not in str(err.value) and str(err.value).startswith("embedders.prod base_url ")
