"""A transform's first call (issue 30, part 5): what the cache entry of a function that decides
on data keeps, and the lazily classified names of numpy's constructor group."""
import gc
import weakref

import numpy as np

import xform
from xform.numpy.stand_ins import groups_unreached


def _branchy(a):
    if a > 0:
        return a * 3.0
    return a * 2.0


def _entries():
    return xform.cache_info()["entries"]


def test_a_deciding_functions_entry_leaves_the_cache_when_the_function_dies():
    before = _entries()

    def branchy(a):
        return _branchy(a)
    grad = xform.grad(branchy)
    assert grad(1.5) == 3.0 and grad(-1.0) == 2.0     # two paths in one entry
    assert _entries() == before + 1
    alive = weakref.ref(branchy)
    del branchy, grad
    gc.collect()
    assert alive() is None
    assert _entries() == before


def test_a_path_staged_after_the_transform_that_made_the_entry_died():
    def branchy(a):
        return _branchy(a)
    builds = xform.cache_info()["builds"]
    assert xform.grad(branchy)(1.5) == 3.0
    gc.collect()    # the transform is gone; its entry lives as long as `branchy`
    assert xform.grad(branchy)(-1.0) == 2.0
    assert xform.grad(branchy)(2.0) == 3.0
    assert xform.cache_info()["builds"] == builds + 1
    assert xform.cache_info()["paths"]["grad of 'test_a_path_staged_after_the_transform_" \
                                       "that_made_the_entry_died.<locals>.branchy'"] == 2


def test_a_later_path_keeps_the_static_keywords():
    def scaled(a, *, mode):
        factor = 3.0 if mode == "triple" else 5.0
        if a > 0:
            return a * factor
        return -a * factor
    grad = xform.grad(scaled, static_argnames="mode")
    assert grad(1.0, mode="triple") == 3.0
    gc.collect()
    assert grad(-1.0, mode="triple") == -3.0
    assert grad(-1.0, mode="other") == -5.0


def test_constructor_group_names_are_classified_as_code_spells_them():
    # A constructor, a numpy submodule, numpy's Python callables reach numpy's constructors;
    # ufuncs and dispatched functions do not.
    reached = "numpy constructors"
    assert reached in groups_unreached({"np", "sum", "sin", "inv"})
    for name in ("zeros", "polynomial", "vectorize", "ma"):
        assert reached not in groups_unreached({"np", name})
    assert reached in groups_unreached({"np", "a_name_numpy_does_not_have"})

