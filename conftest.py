"""Doctest namespace: every `>>>` example in xform may use `np` and `xform`; anything else
it needs it imports or defines itself."""
import numpy as np
import pytest

import xform


@pytest.fixture(autouse=True)
def _doctest_names(doctest_namespace):
    doctest_namespace["np"] = np
    doctest_namespace["xform"] = xform
