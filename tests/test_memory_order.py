"""Copies keep numpy's memory order (np.copy and np.array keep a Fortran array's, the method
makes C, `order=` as asked): the bits of a later reduction depend on the order, so jit and
each tier of a gradient must give what eager numpy gives for a Fortran-ordered argument."""
import numpy as np
import pytest

import xform

COPIES = {
    "np.copy": lambda x: np.copy(x * 1.5),
    "method": lambda x: (x * 1.5).copy(),
    "method F": lambda x: (x * 1.5).copy(order="F"),
    "np.array": lambda x: np.array(x * 1.5),
    "np.array C": lambda x: np.array(x * 1.5, order="C"),
    "np.copy F": lambda x: np.copy(x * 1.5, order="F"),
    "np.asarray copy": lambda x: np.asarray(x, copy=True),
}


def _fortran():
    return np.asfortranarray(np.random.default_rng(0).standard_normal((30, 50)))


@pytest.mark.parametrize("name", COPIES)
def test_a_copy_has_numpys_memory_order(name):
    make, a = COPIES[name], _fortran()
    want = make(a)
    jitted = xform.jit(make)
    for got in (jitted(a), jitted(a)):     # the first call and the compiled one
        assert got.flags["F_CONTIGUOUS"] == want.flags["F_CONTIGUOUS"]
        assert got.flags["C_CONTIGUOUS"] == want.flags["C_CONTIGUOUS"]
        np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("name", COPIES)
def test_a_reduction_of_a_copy_has_eager_numpys_bits(name):
    make, a = COPIES[name], _fortran()
    reduced = xform.jit(lambda x: np.sum(make(x)))
    want = np.sum(make(a))
    assert reduced(a).tobytes() == want.tobytes()
    assert reduced(a).tobytes() == want.tobytes()


@pytest.mark.parametrize("name", ["np.copy", "method", "np.array C"])
def test_a_gradient_through_a_copy_is_the_same_in_both_tiers(name):
    make, a = COPIES[name], _fortran()
    grad = xform.grad(lambda x: np.sum(make(x) ** 2))
    first, second = grad(a), grad(a)
    assert first.tobytes() == second.tobytes()
    np.testing.assert_allclose(first, 2 * 1.5 ** 2 * a)
