"""Transforms compose in every order; each composition is checked against finite differences
and against the other orders that compute the same thing."""
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.testing import check_grads, numerical_jvp
from xform.testing import strategies as xst


def f(x):
    return np.sum(np.sin(x) * np.exp(0.3 * x) + x ** 2)


def hessian_reference(x, eps=1e-5):
    n = x.size
    columns = []
    for i in range(n):
        e = np.zeros(n)
        e[i] = eps
        columns.append((xform.grad(f)(x + e) - xform.grad(f)(x - e)) / (2 * eps))
    return np.stack(columns, axis=1)


@given(xst.arrays((3,), low=-1.5, high=1.5))
def test_all_hessian_routes_agree(x):
    reference = hessian_reference(x)
    v = np.array([0.3, -1.0, 0.5])
    routes = {
        "hessian": xform.hessian(f)(x),
        "jacfwd(jacrev)": xform.jacfwd(xform.jacrev(f))(x),
        "jacrev(jacfwd)": xform.jacrev(xform.jacfwd(f))(x),
        "jacrev(grad)": xform.jacrev(xform.grad(f))(x),
        "jacfwd(grad)": xform.jacfwd(xform.grad(f))(x),
        "jit(hessian)": xform.jit(xform.hessian(f))(x),
    }
    for name, hess in routes.items():
        np.testing.assert_allclose(hess, reference, rtol=1e-5, atol=1e-6, err_msg=name)
    hvps = {
        "jvp(grad)": xform.jvp(xform.grad(f), (x,), (v,))[1],
        "grad(jvp)": xform.grad(lambda x: xform.jvp(f, (x,), (v,))[1])(x),
        "vjp(grad)": xform.vjp(xform.grad(f), x)[1](v)[0],
        "linearize(grad)": xform.linearize(xform.grad(f), x)[1](v),
    }
    for name, hvp in hvps.items():
        np.testing.assert_allclose(hvp, reference @ v, rtol=1e-5, atol=1e-6, err_msg=name)


def test_grad_of_grad_matches_finite_differences():
    check_grads(xform.grad(lambda x: np.sin(x) * x ** 3), (0.7,), order=2)
    assert xform.grad(xform.grad(xform.grad(lambda x: x ** 4)))(2.0) == pytest.approx(48.0)


def test_jvp_of_jvp():
    def g(x):
        return np.sin(x) * x
    second = xform.jvp(lambda x: xform.jvp(g, (x,), (1.0,))[1], (0.4,), (1.0,))[1]
    assert second == pytest.approx(2 * np.cos(0.4) - 0.4 * np.sin(0.4))


def test_per_example_gradients_vmap_of_grad():
    w = np.array([0.5, -0.2, 0.1])
    xs = np.linspace(-1, 1, 12).reshape(4, 3)
    ys = np.array([0.1, 0.2, -0.3, 0.4])

    def loss(w, x, y):
        return (np.tanh(np.sum(w * x)) - y) ** 2
    per_example = xform.vmap(xform.grad(loss), in_axes=(None, 0, 0))(w, xs, ys)
    for i in range(4):
        np.testing.assert_allclose(per_example[i], xform.grad(loss)(w, xs[i], ys[i]))
    total = xform.grad(lambda w: np.sum(xform.vmap(loss, in_axes=(None, 0, 0))(w, xs, ys)))(w)
    np.testing.assert_allclose(per_example.sum(0), total)


def test_grad_of_vmap_and_vmap_of_vmap():
    x = np.linspace(0.1, 1.2, 6).reshape(2, 3)
    check_grads(lambda x: np.sum(xform.vmap(lambda r: np.sin(r) * np.sum(r))(x)), (x,))
    nested = xform.vmap(xform.vmap(lambda a: np.cos(a) * a))(x)
    np.testing.assert_allclose(nested, np.cos(x) * x)
    outer = xform.vmap(xform.vmap(lambda a, b: a * b, in_axes=(0, None)), in_axes=(None, 0))
    np.testing.assert_allclose(outer(np.arange(3.0), np.arange(2.0)),
                               np.arange(2.0)[:, None] * np.arange(3.0)[None, :])


def test_jit_composes_with_grad():
    g = np.cos(1.1) * 1.1 + np.sin(1.1)
    h = lambda x: np.sin(x) * x  # noqa: E731
    for route in (xform.grad(xform.jit(h)), xform.jit(xform.grad(h)),
                  xform.jit(xform.grad(xform.jit(h)))):
        assert route(1.1) == pytest.approx(g)


def test_no_perturbation_confusion():
    # d/dx [ d/dy (x * y) at y = 1 ] = d/dx x = 1; confusing the two levels gives 2.
    assert xform.grad(lambda x: xform.grad(lambda y: x * y)(1.0))(2.0) == pytest.approx(1.0)
    assert xform.jvp(lambda x: xform.jvp(lambda y: x * y, (1.0,), (1.0,))[1],
                     (2.0,), (1.0,))[1] == pytest.approx(1.0)
    # Closed-over outer value used under vmap inside grad.
    value = xform.grad(lambda a: np.sum(xform.vmap(lambda x: a * np.sin(x))(np.ones(3))))(2.0)
    assert value == pytest.approx(3 * np.sin(1.0))


def test_pytrees_through_every_transform():
    params = {"w": np.array([0.5, -1.0]), "b": 0.25}

    def model(p, x):
        return np.sum(np.tanh(p["w"] * x + p["b"]))
    grads = xform.grad(model)(params, np.array([1.0, 2.0]))
    assert set(grads) == {"w", "b"}
    check_grads(model, (params, np.array([1.0, 2.0])), order=2)
    value, aux_grads = xform.value_and_grad(lambda p, x: (model(p, x), "aux-ignored"[:0] or 1.0),
                                            has_aux=True)(params, np.array([1.0, 2.0]))
    assert value[1] == 1.0 and set(aux_grads) == {"w", "b"}


def test_argnums_and_integer_inputs_get_float0():
    def g(x, n, y):
        return np.sum(x * n) + y
    gx, gn, gy = xform.grad(g, argnums=(0, 1, 2), allow_int=True)(np.ones(2), np.int64(3),
                                                              2.0)
    np.testing.assert_allclose(gx, [3.0, 3.0])
    assert gn.dtype == xform.float0 and gy == pytest.approx(1.0)
    out, tangent = xform.jvp(g, (np.ones(2), np.int64(3), 2.0),
                             (np.ones(2), np.zeros((), xform.float0), 1.0))
    assert tangent == pytest.approx(7.0)


def test_stop_gradient():
    assert xform.grad(lambda x: x * xform.stop_gradient(x))(3.0) == pytest.approx(3.0)


def test_grad_of_non_scalar_is_a_clear_error():
    with pytest.raises(xform.XformError, match="scalar"):
        xform.grad(lambda x: x * 2.0)(np.ones(3))


def test_jacobians_match_finite_differences():
    def g(x):
        return np.stack([np.sin(x[0]) * x[1], x[0] ** 2, np.exp(x[1])])
    x = np.array([0.4, -0.8])
    fd = np.stack([numerical_jvp(g, (x,), (e,), 1e-6)[0] for e in np.eye(2)], axis=1)
    np.testing.assert_allclose(xform.jacfwd(g)(x), fd, rtol=1e-6, atol=1e-8)
    np.testing.assert_allclose(xform.jacrev(g)(x), fd, rtol=1e-6, atol=1e-8)
