"""Arguments as users pass them: at positions a transform does not differentiate or map,
Python ints and bools and non-array objects reach the function as they are (static, keyed by
value, restaged per new value with a RestagingWarning past a bound); static_argnums and
static_argnames make any argument static; keyword arguments bind as in Python."""
import warnings

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import xform
from xform.api import dispatch


def test_int_in_a_slice_issue_example():
    g = xform.grad(lambda w, i: np.sum(w[i:i + 2]))(np.ones(4), 1)
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 0.0])
    want = autograd.grad(lambda w, i: anp.sum(w[i:i + 2]))(np.ones(4), 1)
    np.testing.assert_array_equal(g, want)


def test_function_argument_issue_example():
    assert xform.grad(lambda f, x: f(x), 1)(np.sin, 1.0) == pytest.approx(np.cos(1.0))
    assert xform.grad(lambda f, x: f(x), 1)(np.tanh, 1.0) == pytest.approx(
        1 - np.tanh(1.0) ** 2)


def test_range_string_and_none_arguments():
    def f(x, n, mode, extra):
        total = 0.0
        for k in range(n):
            total = total + x ** k
        if mode == "double":
            total = total * 2.0
        return total if extra is None else total + extra
    g = xform.grad(f)
    assert g(2.0, 3, "double", None) == pytest.approx(2 * (1 + 2 * 2.0))
    assert g(2.0, 4, "plain", None) == pytest.approx(1 + 2 * 2.0 + 3 * 2.0 ** 2)
    assert g(2.0, 2, "plain", 5.0) == pytest.approx(1.0)


def test_each_static_value_is_its_own_staging():
    def f(w, i):
        return np.sum(w[:i] ** 2)
    g = xform.grad(f)
    w = np.arange(1.0, 5.0)
    builds = []
    for i in (1, 2, 1, 3, 2):
        before = xform.cache_info()["builds"]
        np.testing.assert_allclose(g(w, i), np.where(np.arange(4) < i, 2 * w, 0.0))
        builds.append(xform.cache_info()["builds"] - before)
    assert builds == [1, 1, 0, 1, 0]    # a seen value hits the cache


def test_true_and_one_are_different_static_values():
    def f(x, flag):
        return x * 2.0 if flag is True else x * 3.0
    g = xform.grad(f)
    assert g(1.0, True) == 2.0 and g(1.0, 1) == 3.0


def test_floats_and_arrays_stay_traced():
    calls = []

    def f(x, scale, offsets):
        calls.append(1)
        return np.sum(x * scale + offsets)
    g = xform.grad(f)
    for scale in (1.0, 2.0, 3.0):
        np.testing.assert_allclose(g(np.ones(2), scale, np.zeros(2)), [scale, scale])
    assert len(calls) == 1


def test_numpy_int_is_traced():
    calls = []

    def f(x, n):
        calls.append(1)
        return x * n
    g = xform.grad(f)
    assert g(1.0, np.int64(2)) == 2.0 and g(1.0, np.int64(5)) == 5.0
    assert len(calls) == 1


def test_unhashable_static_object_is_keyed_by_identity():
    class Model:
        __hash__ = None

        def __init__(self, k):
            self.k = k
    m1, m2 = Model(2.0), Model(3.0)
    g = xform.grad(lambda x, m: x * m.k)
    assert g(1.0, m1) == 2.0 and g(1.0, m2) == 3.0 and g(1.0, m1) == 2.0


def test_restaging_warns_past_the_bound(monkeypatch):
    monkeypatch.setattr(dispatch, "STATIC_RESTAGING_LIMIT", 3)

    def take(w, i):
        return np.sum(w[:i])
    g = xform.grad(take)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for i in range(1, 4):
            g(np.ones(5), i)
        assert not [w for w in caught if issubclass(w.category, xform.RestagingWarning)]
        g(np.ones(5), 4)
        g(np.ones(5), 5)
    restaged = [w for w in caught if issubclass(w.category, xform.RestagingWarning)]
    assert len(restaged) == 1    # once, when the bound is passed
    assert "take" in str(restaged[0].message) and "np.asarray" in str(restaged[0].message)
    assert restaged[0].filename == __file__


def test_static_argnums_make_any_argument_static():
    def f(x, shape):
        return np.sum(np.reshape(x, shape) ** 2)
    g = xform.grad(f, static_argnums=1)
    np.testing.assert_allclose(g(np.arange(4.0), (2, 2)), 2 * np.arange(4.0))
    jitted = xform.jit(lambda x, scale: x * scale, static_argnums=(1,))
    assert jitted(2.0, 3.0) == 6.0


def test_static_argnames_and_keywords():
    def f(x, n=2, *, power=1.0):
        return np.sum(x[:n] ** power)
    g = xform.grad(f, static_argnames="n")
    x = np.arange(1.0, 4.0)
    np.testing.assert_allclose(g(x), [1.0, 1.0, 0.0])
    np.testing.assert_allclose(g(x, n=3), [1.0, 1.0, 1.0])
    np.testing.assert_allclose(g(x, 1, power=2.0), [2.0, 0.0, 0.0])
    np.testing.assert_allclose(g(x, n=3, power=3.0), 3 * x ** 2)
    jitted = xform.jit(f, static_argnames=("n", "power"))
    assert jitted(x, n=3, power=2.0) == pytest.approx(14.0)


def test_argnums_overlapping_static_argnums_is_an_error():
    with pytest.raises(xform.TypeCheckError, match="overlap"):
        xform.grad(lambda x, y: x * y, argnums=0, static_argnums=0)(1.0, 2.0)


def test_jacobians_and_hessian_take_static_ints():
    def f(w, i):
        return np.sin(w[i:]) * 2.0
    w = np.array([0.1, 0.2, 0.3])
    for transform in (xform.jacfwd, xform.jacrev):
        jac = transform(f)(w, 1)
        want = np.zeros((2, 3))
        want[[0, 1], [1, 2]] = 2 * np.cos(w[1:])
        np.testing.assert_allclose(jac, want)
    hess = xform.hessian(lambda w, i: np.sum(w[:i] ** 3))(w, 2)
    np.testing.assert_allclose(hess, np.diag([6 * 0.1, 6 * 0.2, 0.0]))


def test_vmap_unmapped_python_values_are_static():
    out = xform.vmap(lambda x, n, f: f(x[:n]), in_axes=(0, None, None))(
        np.arange(12.0).reshape(3, 4), 2, np.cos)
    np.testing.assert_allclose(out, np.cos(np.arange(12.0).reshape(3, 4)[:, :2]))


def test_size_one_output_is_accepted_as_autograd_does():
    def f(x):
        return np.sin(x[:1]) * x[1]
    x = np.array([0.3, 2.0])
    np.testing.assert_allclose(xform.grad(f)(x), autograd.grad(
        lambda x: anp.sin(x[:1]) * x[1])(x))
    value, g = xform.value_and_grad(f)(x)
    assert np.shape(value) == (1,)
    np.testing.assert_allclose(value, np.sin(0.3) * 2.0)
    with pytest.raises(xform.TypeCheckError, match="scalar"):
        xform.grad(lambda x: x * 2.0)(np.ones(2))


def test_statics_under_an_enclosing_transform():
    def inner(w, i):
        return np.sum(w[i:] ** 2)
    # grad of a function calling grad with a static int, and vmap over it.
    outer = xform.grad(lambda w: np.sum(xform.grad(inner)(w, 1) * w))
    np.testing.assert_allclose(outer(np.ones(3)), [0.0, 4.0, 4.0])
    per_row = xform.vmap(lambda w: xform.grad(inner)(w, 2))(np.ones((2, 3)))
    np.testing.assert_allclose(per_row, [[0.0, 0.0, 2.0]] * 2)


def test_all_array_calls_keep_the_cached_path():
    g = xform.grad(lambda x, y: np.sum(x * y))
    x, y = np.ones(3), np.arange(3.0)
    g(x, y)
    before = xform.cache_info()["hits"]
    g(x, y)
    # Served by the cached call path: the entry's own counter moved, no lookup by key.
    assert xform.cache_info()["hits"] == before + 1
    assert len(g._entries) == 1


def test_static_calls_have_a_cached_path_keyed_by_value():
    g = xform.grad(lambda w, i: np.sum(w[:i] ** 2))
    w = np.arange(1.0, 4.0)
    g(w, 2)
    g(w, 3)
    before = xform.cache_info()
    for i, want in ((2, [2.0, 4.0, 0.0]), (3, [2.0, 4.0, 6.0])):
        np.testing.assert_allclose(g(w, i), want)
    after = xform.cache_info()
    assert after["builds"] == before["builds"] and after["hits"] == before["hits"] + 2
    assert after["misses"] == before["misses"]      # no lookup by the full key


def test_cached_static_path_tells_values_apart():
    apply = xform.grad(lambda f, x: f(x), 1)
    for _ in range(2):
        assert apply(np.sin, 0.5) == pytest.approx(np.cos(0.5))
        assert apply(np.cos, 0.5) == pytest.approx(-np.sin(0.5))
    scaled = xform.jit(lambda x, k: x * k, static_argnums=1)
    for _ in range(2):    # a static float is keyed by value too
        assert scaled(np.ones(2), 3.0)[0] == 3.0 and scaled(np.ones(2), 4.0)[0] == 4.0
    flagged = xform.grad(lambda x, flag: x * (2.0 if flag is True else 3.0))
    for _ in range(2):
        assert flagged(1.0, True) == 2.0 and flagged(1.0, 1) == 3.0


def test_functions_with_defaults_take_keywords_on_every_transform():
    def f(x, k=2.0, *, shift=0.0):
        return np.sum(x * k + shift)
    x = np.ones(2)
    np.testing.assert_allclose(xform.grad(f)(x, k=3.0), [3.0, 3.0])
    np.testing.assert_allclose(xform.grad(f)(x), [2.0, 2.0])
    assert xform.jit(f)(x, shift=1.0) == pytest.approx(6.0)
    np.testing.assert_allclose(xform.jacrev(f)(x, k=4.0), [4.0, 4.0])
    np.testing.assert_allclose(xform.vmap(f, in_axes=(0, None))(np.ones((3, 2)), 5.0),
                               [10.0] * 3)
