"""The one rule for names people type (raters, dashboard tokens): the whole string must match."""

from __future__ import annotations

import pytest

from workbench.data.catalog import valid_name
from workbench.names import is_name, name_error


@pytest.mark.parametrize("name", ["ann", "a", "zed.r@uni-x_1", "9", "x" * 64])
def test_good_names(name):
    assert is_name(name) and name_error("rater name", name) is None


@pytest.mark.parametrize("name", ["zed\n", "zed\r", "\nzed", "ze d", "", "-zed", "x" * 65, "zëd", None, 7])
def test_bad_names_including_a_trailing_newline(name):
    # re.match(r"^...$") accepted "zed\n": `$` matches before a final newline.
    assert not is_name(name)
    assert name_error("token name", name) == (f"token name {name!r} is not valid: use 1-64 letters, digits, '_', '.', "
                                              "'@' or '-', starting with a letter or digit (no spaces or newlines)")


def test_a_dataset_name_with_a_trailing_newline_is_not_a_folder_name():
    assert valid_name("gita") and not valid_name("gita\n")
