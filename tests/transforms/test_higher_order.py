"""Second and higher order through the constructs whose reverse rules make internal
primitives: while_loop (its gradient primitive has jvp, vjp, transpose and batch rules), and
calls, loops and custom functions used linearly (transposed from their vjp rules)."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.rules.control_flow import while_grad_p
from xform.testing import check_grads
from xform.testing import strategies as xst


def step(c, w):
    return c * 1.3 + w * np.sin(c)


def loop(x, w):
    """Grows x until its squared norm passes 6: the trip count depends on x."""
    carry = xform.while_loop(lambda s: np.sum(s[0] * s[0]) < 6.0,
                             lambda s: (step(s[0], s[1]), s[1]), (x, w))
    return np.sum(np.tanh(carry[0]) * carry[0])


def loop_autograd(x, w):
    c = x
    while anp.sum(c * c) < 6.0:
        c = c * 1.3 + w * anp.sin(c)
    return anp.sum(anp.tanh(c) * c)


def away_from_switching(x):
    """x whose trip count does not change within 1e-3 (finite differences stay smooth)."""
    def trips(x):
        n = 0
        while np.sum(x * x) < 6.0:
            x, n = step(x, 0.1), n + 1
        return n
    return all(trips(x + d) == trips(x) for d in (1e-3, -1e-3))


inputs = xst.arrays((3,), low=0.2, high=1.2)


@given(inputs)
def test_hessian_of_a_while_loop_matches_autograd(x):
    if not away_from_switching(x):
        return
    expected = autograd.hessian(lambda x: loop_autograd(x, 0.1))(x)
    f = lambda x: loop(x, 0.1)    # noqa: E731
    for name, hess in {"hessian": xform.hessian(f)(x),
                       "jacfwd(grad)": xform.jacfwd(xform.grad(f))(x),
                       "jacrev(grad)": xform.jacrev(xform.grad(f))(x)}.items():
        np.testing.assert_allclose(hess, expected, rtol=1e-9, atol=1e-10, err_msg=name)


@given(inputs)
def test_every_order_through_a_while_loop_against_finite_differences(x):
    if not away_from_switching(x):
        return
    check_grads(xform.grad(lambda x, w: loop(x, w)), (x, 0.1), order=2)


def test_grad_of_grad_in_a_loop_constant():
    # d2/dw2 through the loop: w is a body constant, not a carry.
    def g(w):
        return loop(np.array([0.5, 0.7, 0.9]), w)
    expected = autograd.grad(autograd.grad(
        lambda w: loop_autograd(np.array([0.5, 0.7, 0.9]), w)))(0.1)
    assert xform.grad(xform.grad(g))(0.1) == pytest.approx(expected, rel=1e-9)


def test_vmap_of_grad_with_a_per_lane_trip_count():
    xs = np.array([[0.3, 0.4, 0.5], [1.0, 1.1, 1.2], [0.2, 0.9, 0.4]])
    grad = xform.grad(lambda x: loop(x, 0.1))
    expected = [autograd.grad(lambda x: loop_autograd(x, 0.1))(x) for x in xs]
    np.testing.assert_allclose(xform.vmap(grad)(xs), expected, rtol=1e-10)
    hessians = xform.vmap(xform.hessian(lambda x: loop(x, 0.1)))(xs)
    np.testing.assert_allclose(
        hessians, [autograd.hessian(lambda x: loop_autograd(x, 0.1))(x) for x in xs],
        rtol=1e-9, atol=1e-10)


def _count(graph, prim):
    return sum(e.primitive is prim for e in graph.equations)


def test_hessian_of_a_while_loop_is_one_loop_pair_not_one_per_direction():
    """Forward over reverse batches the tangent directions through one while_loop_grad
    (a batch rule of its own, not one loop per direction)."""
    x = np.linspace(0.2, 0.6, 5)
    graph = xform.make_graph(xform.hessian(lambda x: loop(x, 0.1)))(x)
    assert _count(graph, while_grad_p) == 1


def test_jacfwd_stages_the_primal_once():
    """jacfwd reads its outputs' structure off the jvp it batches: a call of the function of
    its own would stage the gradient's loop pair a second time."""
    x = np.linspace(0.2, 0.6, 5)
    graph = xform.make_graph(xform.jacfwd(xform.grad(lambda x: loop(x, 0.1))))(x)
    assert _count(graph, while_grad_p) == 1


def test_jacrev_of_a_scalar_output_runs_the_loop_unbatched():
    """A scalar output's basis has one row: the pullback is called once, not vmapped over a
    single lane (which would batch the loop's carries)."""
    x = np.linspace(0.2, 0.6, 5)
    graph = xform.make_graph(xform.jacrev(lambda x: loop(x, 0.1)))(x)
    grads = [e for e in graph.equations if e.primitive is while_grad_p]
    assert len(grads) == 1
    assert grads[0].inputs[0].aval.shape == x.shape


def test_custom_vjp_whose_bwd_calls_a_custom_vjp_function_in_forward_mode():
    scale = xform.custom_vjp(lambda ct, x: ct * np.cos(x))
    scale.defvjp(lambda ct, x: (ct * np.cos(x), (ct, x)),
                 lambda res, g: (g * np.cos(res[1]), -g * res[0] * np.sin(res[1])))
    sin = xform.custom_vjp(np.sin)
    sin.defvjp(lambda x: (np.sin(x), x), lambda x, ct: (scale(ct, x),))
    x = np.array([0.3, -1.2])
    _, tangent = xform.jvp(sin, (x,), (np.ones(2),))
    np.testing.assert_allclose(tangent, np.cos(x))
    np.testing.assert_allclose(xform.hessian(lambda x: np.sum(sin(x)))(x),
                               np.diag(-np.sin(x)))


@pytest.mark.parametrize("construct", ["while_loop", "cond", "call", "scan", "custom_jvp",
                                       "checkpoint"])
def test_forward_mode_transposes_a_bwd_that_uses_a_construct_linearly(construct):
    """jvp of a custom_vjp transposes its bwd, linear in the cotangent: the constructs it
    uses on the cotangent are transposed through their vjp rules."""
    x0 = np.array([0.4, 0.9])

    def inner(x):     # R^2 -> R^2, the function whose vjp the bwd computes
        return loop_vec(x) if construct == "while_loop" else np.sin(x) * x[::-1]

    def linear_in_ct(x, ct):
        if construct == "while_loop":
            return xform.vjp(inner, x)[1](ct)[0]
        if construct == "cond":
            return xform.cond(np.sum(x) > 0, lambda c: c * np.cos(x), lambda c: -c, ct)
        if construct == "call":
            return scaled(ct, x)
        if construct == "custom_jvp":
            return scaled_jvp(ct, x)
        if construct == "checkpoint":
            return xform.checkpoint(lambda c: np.sin(x) * c)(ct)
        carry, _ = xform.scan(lambda c, s: (c * np.cos(x) * s, None), ct, np.ones(1))
        return carry

    f = xform.custom_vjp(lambda x: x)
    f.defvjp(lambda x: (x, x), lambda x, ct: (linear_in_ct(x, ct),))
    t = np.array([1.0, -0.5])
    _, tangent = xform.jvp(f, (x0,), (t,))
    # bwd is ct -> L ct, with L = matrix.T: the tangent is L^T t.
    matrix = np.stack([linear_in_ct(x0, e) for e in np.eye(2)])
    np.testing.assert_allclose(tangent, matrix @ t, rtol=1e-10)


def loop_vec(x):
    return xform.while_loop(lambda c: np.sum(c * c) < 4.0, lambda c: c * 1.5 + 0.1, x)


@xform.function
def scaled(ct, x):
    return ct * np.cos(x)


scaled_jvp = xform.custom_jvp(lambda ct, x: ct * np.cos(x))


@scaled_jvp.defjvp
def _scaled_jvp_rule(primals, tangents):
    (ct, x), (t_ct, t_x) = primals, tangents
    return scaled_jvp(ct, x), t_ct * np.cos(x) - ct * np.sin(x) * t_x


def counted(x, w):
    """Five iterations whatever x is: the predicate reads only the counter."""
    state = xform.while_loop(lambda s: s[0] < 5, lambda s: (s[0] + 1, np.sin(s[1]) * w + s[1]),
                             (0, x))
    return np.sum(state[1] * state[1])


def counted_autograd(x, w):
    for _ in range(5):
        x = anp.sin(x) * w + x
    return anp.sum(x * x)


def _loop_bodies(graph):
    return [e.params["body_graph"] for e in graph.equations
            if e.primitive.name in ("while_loop", "while_loop_grad")]


def test_a_trip_count_shared_by_every_lane_needs_no_masks():
    xs = np.array([[0.3, 0.4], [1.0, -1.1], [0.2, 0.9]])
    grad = xform.grad(counted)
    np.testing.assert_allclose(xform.vmap(grad, in_axes=(0, None))(xs, 0.7),
                               [autograd.grad(counted_autograd)(x, 0.7) for x in xs])
    np.testing.assert_allclose(xform.vmap(counted, in_axes=(0, None))(xs, 0.7),
                               [counted_autograd(x, 0.7) for x in xs])
    hess = xform.hessian(counted)
    np.testing.assert_allclose(hess(xs[1], 0.7), autograd.hessian(counted_autograd)(xs[1], 0.7))
    for fun, args in ((xform.vmap(counted, in_axes=(0, None)), (xs, 0.7)),
                      (xform.vmap(grad, in_axes=(0, None)), (xs, 0.7)), (hess, (xs[1], 0.7))):
        bodies = _loop_bodies(xform.make_graph(fun)(*args))
        assert bodies and all(e.primitive.name != "where" for b in bodies
                              for e in b.equations)
    # The counter is not batched: it stays a scalar in the batched loop.
    (body,) = _loop_bodies(xform.make_graph(xform.vmap(counted, in_axes=(0, None)))(xs, 0.7))
    assert body.inputs[0].aval.shape == ()
