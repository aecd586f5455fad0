"""Python values a staged function read from mutable containers are guarded: changing a dict
entry, a list item, an attribute of the user's object, or a captured array in place
makes the next call stage again (as autograd, which traces every call, would see the change);
containers left alone keep the cached entry."""
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.runtime.reads import fingerprint

TRANSFORMS = {"jit": xform.jit, "grad": xform.grad, "value_and_grad": xform.value_and_grad}


@pytest.mark.parametrize("name", sorted(TRANSFORMS))
def test_a_changed_dict_entry_is_seen(name):
    config = {"k": 2.0}
    fun = TRANSFORMS[name](lambda x: config["k"] * x * x)
    first = fun(1.5)
    config["k"] = 7.0
    np.testing.assert_allclose(fun(1.5), np.multiply(first, 3.5))


class Model:
    def __init__(self):
        self.a = 2.0
        self.weights = [1.0, 2.0]

    def loss(self, x):
        return self.a * x * self.weights[1]


def test_a_changed_attribute_or_list_item_is_seen():
    model = Model()
    through_closure = xform.grad(lambda x: model.a * x)
    through_method = xform.grad(model.loss)
    assert through_closure(1.0) == 2.0 and through_method(1.0) == 4.0
    model.a = 4.0
    assert through_closure(1.0) == 4.0 and through_method(1.0) == 8.0
    model.weights[1] = 10.0
    assert through_method(1.0) == 40.0


@pytest.mark.parametrize("size", [3, 20_000], ids=["blake2b", "universal hash"])
def test_arrays_refilled_in_place_are_seen_by_every_transform(size):
    data = np.ones(size)

    def loop_sum(x):
        total = 0.0
        for i in range(3):
            total = total + x[i] * data[i]       # data[i] is read by numpy while staging
        return total
    funs = {"jit": xform.jit(lambda x: np.sum(x * data)),
            "grad": xform.grad(lambda x: np.sum(x * data)),
            "grad of a square": xform.grad(lambda x: np.sum(x * data ** 2)),
            "vmap": xform.vmap(lambda x: x * data),
            "loop grad": xform.grad(loop_sum)}
    x = np.ones(size)
    for fun in funs.values():
        fun(x)
    data[:3] = [5.0, 1.0, -1.0]                   # X[:] = next_batch
    np.testing.assert_array_equal(funs["jit"](x), np.sum(data))
    np.testing.assert_array_equal(funs["grad"](x), data)
    np.testing.assert_array_equal(funs["grad of a square"](x), data ** 2)
    np.testing.assert_array_equal(funs["vmap"](np.ones((2, size))), np.stack([data, data]))
    np.testing.assert_array_equal(funs["loop grad"](x)[:3], data[:3])


@given(size=st.integers(10_001, 30_000), dtype=st.sampled_from(["f8", "f4", "i2", "u1"]),
       data=st.data())
def test_a_large_arrays_fingerprint_sees_any_one_change_and_a_shuffle(size, dtype, data):
    array = np.arange(size).astype(dtype)
    before = fingerprint(array)
    position = data.draw(st.integers(0, size - 1))
    array[position] += 1
    assert fingerprint(array) != before
    array[position] -= 1
    assert fingerprint(array) == before
    np.random.default_rng(0).shuffle(array)
    assert fingerprint(array) != before


def test_untouched_containers_keep_the_cached_entry():
    config, model = {"k": 2.0}, Model()
    fun = xform.grad(lambda x: config["k"] * model.a * x)
    fun(1.0)
    config["k"] = config["k"]        # the same object back: nothing changed
    before = xform.cache_info()
    assert fun(1.0) == 4.0
    after = xform.cache_info()
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + 1


def test_what_staging_itself_appends_does_not_invalidate():
    seen = []

    def traced(x):
        seen.append(1)          # a side effect of staging, read once
        return x * 2.0
    fun = xform.jit(traced)
    fun(1.0), fun(2.0)
    assert len(seen) == 1
