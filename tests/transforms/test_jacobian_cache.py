"""jacfwd, jacrev and hessian are cached per function and signature, also when the transform
is made anew for each call (`xform.hessian(f)(x)`); and their one-row bases (a scalar input
for jacfwd, a scalar output for jacrev) give what the batched path gives."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.testing import strategies as xst


def cubic(x):
    return np.sum(np.sin(x) * x ** 3)


def cubic_autograd(x):
    return anp.sum(anp.sin(x) * x ** 3)


@pytest.mark.parametrize("transform", [xform.jacfwd, xform.jacrev, xform.hessian])
def test_a_transform_made_anew_for_each_call_is_staged_once(transform):
    calls = []

    def f(x):
        calls.append(1)
        return np.sin(x) * x ** 3 if transform is not xform.hessian else cubic(x)
    x = np.array([0.3, -1.1, 0.7])
    first = transform(f)(x)
    before, n_calls = xform.cache_info(), len(calls)
    second = transform(f)(x * 0.5)
    after = xform.cache_info()
    assert after["builds"] == before["builds"]
    assert after["hits"] > before["hits"]
    assert len(calls) == n_calls
    oracle = {xform.jacfwd: autograd.jacobian(lambda x: anp.sin(x) * x ** 3),
              xform.jacrev: autograd.jacobian(lambda x: anp.sin(x) * x ** 3),
              xform.hessian: autograd.hessian(cubic_autograd)}[transform]
    np.testing.assert_allclose(first, oracle(x), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(second, oracle(x * 0.5), rtol=1e-12, atol=1e-12)


def test_hessian_cache_keeps_its_options_apart():
    """The entry of hessian(f) is not that of jacfwd(f) or of hessian(f, has_aux=True)."""
    def f(x):
        return cubic(x), {"norm": np.sum(x * x)}
    x = np.array([0.4, 1.3])
    hess, aux = xform.hessian(f, has_aux=True)(x)
    np.testing.assert_allclose(hess, autograd.hessian(cubic_autograd)(x), rtol=1e-12)
    np.testing.assert_allclose(aux["norm"], np.sum(x * x))
    grad_f = xform.grad(lambda x: f(x)[0])
    np.testing.assert_allclose(xform.jacfwd(grad_f)(x), hess, rtol=1e-12)
    np.testing.assert_allclose(xform.hessian(lambda x: f(x)[0])(x), hess, rtol=1e-12)


@given(xst.arrays((), low=-2.0, high=2.0))
def test_jacfwd_of_a_scalar_input(s):
    def f(s):
        return {"a": np.array([np.sin(s), s * s]), "b": np.exp(s) * s}
    jac = xform.jacfwd(f)(s)
    assert np.shape(jac["a"]) == (2,) and np.shape(jac["b"]) == ()
    np.testing.assert_allclose(jac["a"], [np.cos(s), 2 * s], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jac["b"], np.exp(s) * (s + 1), rtol=1e-12, atol=1e-12)


@given(xst.arrays((2, 3), low=-2.0, high=2.0))
def test_jacrev_of_a_scalar_output(x):
    jac_w, jac_b = xform.jacrev(lambda w, b: np.sum(np.tanh(w) * b), argnums=(0, 1))(x, 1.5)
    np.testing.assert_allclose(jac_w, autograd.grad(lambda w: anp.sum(anp.tanh(w) * 1.5))(x),
                               rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(jac_b, np.sum(np.tanh(x)), rtol=1e-12, atol=1e-12)


def test_jacrev_of_a_scalar_output_with_an_integer_input():
    jac = xform.jacrev(lambda x, n: x * n, argnums=1, allow_int=True)(2.0, np.int64(3))
    assert jac.dtype == xform.float0 and jac.shape == ()
