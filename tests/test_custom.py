"""custom_jvp and custom_vjp under every transform. The rules below are deliberately *not*
the derivative of the primal (a factor 2 or 3), so each test sees whether the rule was used.
Errors name the user's line: lines checked carry a `# line: <tag>` comment."""
import functools

import numpy as np
import pytest
from hypothesis import given

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst
from tests.source_lines import assert_points_at

X = np.array([0.3, -1.2, 0.7])


# -- custom_jvp: sin with the rule 2 cos(x) t ----------------------------------------------

@xform.custom_jvp
def sin2(x):
    return np.sin(x)


@sin2.defjvp
def _sin2_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return sin2(x), 2.0 * np.cos(x) * t


def total(f):
    return lambda x: np.sum(f(x))


def test_custom_jvp_eager_and_jit_run_the_primal():
    assert np.array_equal(sin2(X), np.sin(X))
    assert np.array_equal(xform.jit(sin2)(X), np.sin(X))
    graph = xform.make_graph(sin2)(X)
    assert [e.primitive.name for e in graph.equations] == ["custom_jvp_call"]
    assert "custom_jvp_call[callee=sin2" in str(graph)


def test_custom_jvp_first_order_transforms_use_the_rule():
    rule = 2.0 * np.cos(X)
    out, t_out = xform.jvp(sin2, (X,), (np.ones(3),))
    assert np.allclose(out, np.sin(X)) and np.allclose(t_out, rule)
    assert np.allclose(xform.grad(total(sin2))(X), rule)
    assert np.allclose(xform.jit(xform.grad(total(sin2)))(X), rule)
    assert np.allclose(xform.grad(xform.jit(total(sin2)))(X), rule)
    assert np.allclose(xform.jacrev(sin2)(X), np.diag(rule))
    assert np.allclose(xform.jacfwd(sin2)(X), np.diag(rule))
    _, f_jvp = xform.linearize(sin2, X)
    assert np.allclose(f_jvp(np.ones(3)), rule)


def test_custom_jvp_under_vmap_and_its_compositions():
    xs = np.stack([X, 2 * X])
    assert np.allclose(xform.vmap(sin2)(xs), np.sin(xs))
    assert np.allclose(xform.vmap(xform.grad(total(sin2)))(xs), 2 * np.cos(xs))
    assert np.allclose(xform.grad(lambda xs: np.sum(xform.vmap(sin2)(xs)))(xs), 2 * np.cos(xs))
    nested = xform.vmap(xform.vmap(sin2))
    assert np.allclose(xform.grad(lambda xs: np.sum(nested(xs)))(xs[None]), 2 * np.cos(xs[None]))
    mixed = xform.vmap(lambda x, y: sin2(x) * y, in_axes=(0, None))
    assert np.allclose(xform.grad(lambda xs: np.sum(mixed(xs, 3.0)))(xs), 6 * np.cos(xs))


def test_custom_jvp_second_order_differentiates_the_rule():
    # d/dx 2 cos(x) = -2 sin(x), by every route to a second derivative.
    expected = -2.0 * np.sin(X)
    assert np.allclose(xform.vmap(xform.grad(xform.grad(sin2)))(X), expected)
    assert np.allclose(xform.hessian(total(sin2))(X), np.diag(expected))
    assert np.allclose(xform.jacfwd(xform.grad(total(sin2)))(X), np.diag(expected))
    assert np.allclose(xform.jacrev(xform.grad(total(sin2)))(X), np.diag(expected))


@xform.custom_jvp
def exp2x(x):
    """exp whose rule claims the derivative is 2 exp(x), computed by calling itself."""
    return np.exp(x)


@exp2x.defjvp
def _exp2x_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    out = exp2x(x)
    return out, 2.0 * out * t


def test_grad_grad_uses_the_jvp_rule_recursively():
    # JAX's semantics: the rule's own exp2x(x) is differentiated by the rule again: 4 e^x.
    x = 0.4
    assert np.isclose(xform.grad(exp2x)(x), 2 * np.exp(x))
    assert np.isclose(xform.grad(xform.grad(exp2x))(x), 4 * np.exp(x))
    assert np.isclose(xform.grad(xform.grad(xform.grad(exp2x)))(x), 8 * np.exp(x))
    assert np.isclose(xform.jvp(xform.grad(exp2x), (x,), (1.0,))[1], 4 * np.exp(x))


@xform.custom_jvp
def log1pexp(x):
    return np.log(1.0 + np.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return log1pexp(x), t * (1.0 - 1.0 / (1.0 + np.exp(x)))


@given(xst.arrays((3,), np.float64, low=-3.0, high=3.0))
def test_a_correct_rule_passes_check_grads(x):
    check_grads(log1pexp, (x,), order=2)
    check_grads(lambda x: np.sum(xform.vmap(log1pexp)(x[:, None])), (x,), order=2)


def test_a_stable_rule_fixes_the_gradient_at_an_overflow_point():
    with np.errstate(all="ignore"):
        assert np.isclose(xform.grad(log1pexp)(1000.0), 1.0)


def test_the_rule_is_staged_lazily_once_per_signature():
    calls = []

    @xform.custom_jvp
    def f(x):
        return x * x

    @f.defjvp
    def f_jvp(primals, tangents):
        calls.append(1)
        return f(primals[0]), 2.0 * primals[0] * tangents[0]

    xform.jit(f)(X)
    xform.vmap(f)(np.ones((2, 3)))
    assert calls == []
    grad_f = xform.grad(total(f))
    assert np.allclose(grad_f(X), 2 * X) and np.allclose(grad_f(2 * X), 4 * X)
    assert np.allclose(xform.grad(xform.grad(lambda x: f(x)))(1.5), 2.0)
    assert len(calls) == 2  # one per signature: f64[3] and weak f64[]


# -- custom_jvp: nondiff_argnums, pytrees, integer arguments ------------------------------------

@functools.partial(xform.custom_jvp, nondiff_argnums=(0,))
def apply(fn, x):
    return fn(x)


@apply.defjvp
def _apply_jvp(fn, primals, tangents):
    (x,), (t,) = primals, tangents
    return apply(fn, x), 3.0 * t


@xform.custom_jvp(nondiff_argnums=(1,))
def power(x, n):
    return x ** n


@power.defjvp
def _power_jvp(n, primals, tangents):
    (x,), (t,) = primals, tangents
    return power(x, n), 2.0 * n * x ** (n - 1) * t


def test_nondiff_argnums_are_static_and_come_first_in_the_rule():
    assert np.allclose(xform.grad(lambda x: np.sum(apply(np.sin, x)))(X), 3.0)
    assert np.allclose(xform.grad(lambda x: np.sum(apply(np.cos, x)))(X), 3.0)
    assert np.allclose(xform.vmap(lambda x: apply(np.tanh, x))(X), np.tanh(X))
    for n in (2, 3):
        expected = 2.0 * n * X ** (n - 1)
        assert np.allclose(xform.grad(lambda x: np.sum(power(x, n)))(X), expected)
        assert np.allclose(xform.vmap(xform.grad(lambda x: power(x, n)))(X), expected)
        assert np.allclose(xform.jit(lambda x: power(x, n))(X), X ** n)
    assert np.allclose(xform.grad(lambda x: np.sum(power(x=x, n=2)))(X), 4 * X)


def test_traced_nondiff_arguments_are_values_without_a_derivative():
    # grad and jit trace every argument, so n arrives traced: it is passed as a value.
    grad_x, grad_n = xform.grad(lambda x, n: np.sum(power(x, n)), argnums=(0, 1))(X, 3.0)
    assert np.allclose(grad_x, 6.0 * X ** 2) and grad_n == 0.0
    assert np.allclose(xform.jit(power)(X, 3), X ** 3)
    assert np.allclose(xform.vmap(xform.grad(power), in_axes=(0, None))(X, 2), 4.0 * X)
    assert np.allclose(xform.vmap(xform.grad(power))(X, np.array([1.0, 2.0, 3.0])),
                       2.0 * np.array([1.0, 2.0, 3.0]) * X ** np.array([0.0, 1.0, 2.0]))
    with pytest.raises(xform.TypeCheckError, match="arrays or hashable") as info:
        xform.grad(lambda x: np.sum(power(x, [2])))(X)  # line: unhashable
    assert_points_at(info.value, __file__, "unhashable")


@xform.custom_jvp
def scaled(params, x, n):
    """A pytree argument, an integer argument and a pytree result."""
    return {"out": params["w"] * x ** n, "n": n}


@scaled.defjvp
def _scaled_jvp(primals, tangents):
    (params, x, n), (params_dot, x_dot, n_dot) = primals, tangents
    assert n_dot.dtype == xform.float0
    out = scaled(params, x, n)
    tangent = params_dot["w"] * x ** n + 10.0 * x_dot
    return out, {"out": tangent, "n": np.zeros((), xform.float0)}


def test_custom_jvp_with_pytrees_and_integer_arguments():
    params = {"w": np.array(2.0)}

    def loss(params, x):
        return np.sum(scaled(params, x, 2)["out"])
    grads = xform.grad(loss, argnums=(0, 1))(params, X)
    assert np.allclose(grads[0]["w"], np.sum(X ** 2)) and np.allclose(grads[1], 10.0)
    out, t_out = xform.jvp(lambda x: scaled(params, x, 2), (X,), (np.ones(3),))
    assert np.allclose(out["out"], 2 * X ** 2) and np.allclose(t_out["out"], 10.0)
    assert xform.jit(lambda x: scaled(params, x, 3))(X)["n"] == 3


# -- custom_vjp: x * y whose bwd claims d/dx = 3 y ---------------------------------------------

@xform.custom_vjp
def mul3(x, y):
    return x * y


def _mul3_fwd(x, y):
    return mul3(x, y), (x, y)


def _mul3_bwd(residuals, ct):
    x, y = residuals
    return 3.0 * y * ct, x * ct


mul3.defvjp(_mul3_fwd, _mul3_bwd)
Y = np.array([1.5, 0.5, -2.0])


def test_custom_vjp_reverse_mode_uses_bwd():
    assert np.array_equal(mul3(X, Y), X * Y)
    loss = lambda x, y: np.sum(mul3(x, y))  # noqa: E731
    gx, gy = xform.grad(loss, argnums=(0, 1))(X, Y)
    assert np.allclose(gx, 3 * Y) and np.allclose(gy, X)
    assert np.allclose(xform.jit(xform.grad(loss))(X, Y), 3 * Y)
    assert np.allclose(xform.grad(xform.jit(loss))(X, Y), 3 * Y)
    _, pullback = xform.vjp(mul3, X, Y)
    assert np.allclose(pullback(np.ones(3))[0], 3 * Y)
    assert np.allclose(xform.jacrev(mul3)(X, Y), np.diag(3 * Y))


def test_custom_vjp_forward_mode_transposes_bwd():
    _, t_out = xform.jvp(mul3, (X, Y), (np.ones(3), np.zeros(3)))
    assert np.allclose(t_out, 3 * Y)
    _, t_out = xform.jvp(mul3, (X, Y), (np.zeros(3), np.ones(3)))
    assert np.allclose(t_out, X)
    assert np.allclose(xform.jacfwd(mul3)(X, Y), np.diag(3 * Y))


def test_custom_vjp_under_vmap_batches_fwd_and_bwd():
    xs, ys = np.stack([X, 2 * X]), np.stack([Y, Y])
    assert np.allclose(xform.vmap(mul3)(xs, ys), xs * ys)
    assert np.allclose(xform.vmap(xform.grad(lambda x, y: np.sum(mul3(x, y))))(xs, ys), 3 * ys)

    def loss(xs):
        return np.sum(xform.vmap(mul3, in_axes=(0, None))(xs, Y))
    assert np.allclose(xform.grad(loss)(xs), 3 * ys)
    # fwd and bwd are batched graphs, not a loop: the graph does not grow with the batch.
    sizes = [len(xform.make_graph(xform.grad(loss))(np.ones((n, 3))).equations) for n in (2, 7)]
    assert sizes[0] == sizes[1]


def test_custom_vjp_second_order_differentiates_fwd_and_bwd():
    # grad of x -> 3 y x with y = x (bwd's residuals): d/dx (3 x * 1 + x * 1) = 4.
    square = lambda x: mul3(x, x)  # noqa: E731
    assert np.isclose(xform.grad(xform.grad(square))(0.7), 4.0)
    assert np.allclose(xform.vmap(xform.grad(xform.grad(square)))(X), 4.0)
    assert np.allclose(xform.hessian(lambda x: np.sum(square(x)))(X), 4.0 * np.eye(3))


@xform.custom_vjp
def clip_gradient(x):
    return x


clip_gradient.defvjp(lambda x: (x, None), lambda _, ct: (np.clip(ct, -1.0, 1.0),))


def test_a_nonlinear_bwd_works_in_reverse_mode_and_is_refused_in_forward_mode():
    assert np.allclose(xform.grad(lambda x: np.sum(10.0 * clip_gradient(x)))(X), 1.0)
    with pytest.raises(xform.MissingRuleError, match="transpose") as info:
        xform.jvp(clip_gradient, (X,), (np.ones(3),))
    assert "custom_jvp" in str(info.value) and "clip_gradient" in str(info.value)


@functools.partial(xform.custom_vjp, nondiff_argnums=(1,))
def sum_power(x, n, scale):
    """A nondiff argument in the middle, a pytree residual and a None cotangent."""
    return scale * np.sum(x ** n)


def _sum_power_fwd(x, n, scale):
    return sum_power(x, n, scale), {"x": x, "nothing": None}


def _sum_power_bwd(n, residuals, ct):
    return (ct * 2.0 * n * residuals["x"] ** (n - 1), None)


sum_power.defvjp(_sum_power_fwd, _sum_power_bwd)


def test_custom_vjp_nondiff_argnums_pytree_residuals_and_none_cotangents():
    gx, gscale = xform.grad(sum_power, argnums=(0, 2))(X, 3, 1.5)
    assert np.allclose(gx, 6.0 * X ** 2) and gscale == 0.0
    assert np.allclose(xform.vmap(xform.grad(sum_power), in_axes=(0, None, None))(
        np.stack([X, X]), 2, 1.0), 4.0 * np.stack([X, X]))


@xform.custom_vjp
def log1pexp_vjp(x):
    return np.log(1.0 + np.exp(x))


log1pexp_vjp.defvjp(lambda x: (log1pexp_vjp(x), x),
                    lambda x, ct: (ct * (1.0 - 1.0 / (1.0 + np.exp(x))),))


@given(xst.arrays((3,), np.float64, low=-3.0, high=3.0))
def test_a_correct_vjp_passes_check_grads(x):
    check_grads(log1pexp_vjp, (x,), order=2)


# -- errors ------------------------------------------------------------------------------------

def test_custom_jvp_without_a_rule_names_the_missing_rule():
    @xform.custom_jvp
    def f(x):
        return np.sin(x)
    assert np.allclose(xform.jit(f)(X), np.sin(X))
    with pytest.raises(xform.MissingRuleError, match="'f' has no jvp rule") as info:
        xform.grad(lambda x: np.sum(f(x)))(X)  # line: no-jvp
    assert_points_at(info.value, __file__, "no-jvp")
    assert "f.defjvp" in str(info.value)

    g = xform.custom_vjp(np.cos)
    with pytest.raises(xform.MissingRuleError, match="defvjp"):
        xform.grad(lambda x: np.sum(g(x)))(X)


def test_a_rule_returning_the_wrong_structure_names_the_rule():
    @xform.custom_jvp
    def f(x):
        return np.sin(x)

    @f.defjvp
    def f_jvp(primals, tangents):  # line: bad-jvp
        return f(primals[0]), (tangents[0], tangents[0])
    with pytest.raises(xform.TypeCheckError, match="jvp rule of 'f'") as info:
        xform.grad(lambda x: np.sum(f(x)))(X)
    assert_points_at(info.value, __file__, "bad-jvp")

    @f.defjvp
    def f_jvp_shape(primals, tangents):  # line: bad-jvp-shape
        return f(primals[0]), np.sum(tangents[0])
    with pytest.raises(xform.ShapeError, match="jvp rule of 'f'") as info:
        xform.jvp(f, (X,), (X,))
    assert_points_at(info.value, __file__, "bad-jvp-shape")


def test_a_bwd_returning_the_wrong_cotangents_names_bwd():
    @xform.custom_vjp
    def f(x, y):
        return x * y

    def bad_length(res, ct):  # line: bad-length
        return (ct,)

    def bad_shape(res, ct):  # line: bad-shape
        return ct, np.sum(ct)
    f.defvjp(lambda x, y: (f(x, y), None), bad_length)
    with pytest.raises(xform.TypeCheckError, match="tuple of 2 cotangents") as info:
        xform.grad(lambda x: np.sum(f(x, X)))(X)
    assert_points_at(info.value, __file__, "bad-length")
    f.defvjp(lambda x, y: (f(x, y), None), bad_shape)
    with pytest.raises(xform.ShapeError, match="shape \\(\\) for argument 1") as info:
        xform.grad(lambda x: np.sum(f(x, X)))(X)
    assert_points_at(info.value, __file__, "bad-shape")
    f.defvjp(lambda x, y: x * y, bad_shape)  # line: bad-fwd
    with pytest.raises(xform.TypeCheckError, match="fwd of 'f' must return"):
        xform.grad(lambda x: np.sum(f(x, X)))(X)


def test_closing_over_a_traced_value_is_refused_with_the_variable_name():
    def loss(w):
        @xform.custom_jvp
        def f(x):
            return x * w

        @f.defjvp
        def f_jvp(primals, tangents):
            return f(primals[0]), w * tangents[0]
        return np.sum(f(X))  # line: closure
    with pytest.raises(xform.XformError, match="closes over the traced value 'w'") as info:
        xform.grad(loss)(2.0)
    assert_points_at(info.value, __file__, "closure")
