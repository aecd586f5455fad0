"""xform.passes.simplify: each rule of the table fires where it says, keeps the graph checked,
and gives numpy's values: bit for bit (values, nan places, signs of zeros, dtypes) on any
input, infinities and nans included, for the rewrites marked exact; to rounding on finite inputs
for the others. Gradients through simplified graphs agree with autograd."""
import attrs
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import xform
from xform.api.pipeline import finish_graph
from xform.ir.interpret import eval_graph
from xform.passes import dce
from xform.ir.registry import primitive_for
from xform.passes.simplify import LEVELS, REWRITES, simplify
from xform.testing import strategies as xst


@pytest.fixture(autouse=True)
def reassociating():
    """The rewrites that change rounding run only under config.algebra = "reassociate"."""
    previous = xform.config.algebra
    xform.config.update("algebra", "reassociate")
    yield
    xform.config.update("algebra", previous)


# -- the functions each rule must fire on: f(a, b), a of a drawn 2-d shape, b of its reverse --

def kron_sum(a, b):
    return np.sum(np.kron(a, b))


def kron_view_sum(a, b):
    return np.sum(np.kron(a[:2, :2], np.triu(b)))


def reshape_sum(a, b):
    return np.sum(np.reshape(a * b.T, (-1,)))


def transpose_sum(a, b):
    return np.sum(np.transpose(a * b.T))


def broadcast_sum(a, b):
    return np.sum(np.broadcast_to(a, (3,) + a.shape)) + np.sum(b)


def outer_sum(a, b):
    return np.sum(a[:, :, None, None] * b[None, None, :, :])


def broadcast_max(a, b):
    return np.max(np.broadcast_to(a * b.T, (3,) + a.shape))


def broadcast_min(a, b):
    return np.min(np.broadcast_to(a, (2,) + a.shape)) - b


def dot_ones_right(a, b):
    return np.sum(a @ np.ones(a.shape[1])) + np.dot(b, np.ones(b.shape[1]))


def dot_ones_left(a, b):
    return np.ones(a.shape[0]) @ a + np.ones(b.shape[1]) @ b[0]


def scaled_by_constants_twice(a, b):
    return (a * 2.5) * 3.0 + 0.5 * (1.5 * b.T)


def scaled_by_a_value_twice(a, b):
    s = b[0, 0]
    return (a * s) * s


def exp_log(a, b):
    return np.exp(np.log(a)) + b.T


def self_difference(a, b):
    return (a - a) + (b - b).T


def where_true(a, b):
    return np.where(True, a, b.T) + np.where(np.ones(a.shape[1], bool), a[0], b.T)


def where_false(a, b):
    return np.where(np.zeros(a.shape, bool), a, -b.T)


def where_same(a, b):
    c = a + 1
    return np.where(a > b.T, c, c)


def negated_products(a, b):     # the results side by side: zero signs show
    bt = b.T
    return np.concatenate([a * bt, (-a) * bt, bt * (-a), bt * (a * -1.0), (-1 * a) * bt])


def negated_sums(a, b):
    p = a * b.T
    return np.concatenate([np.sum(-p, axis=0), np.sum(-p)[None],
                           np.sum((a + b.T) * -1.0, axis=1)])


def fused_negations(a, b):
    """A fused region (made by hand: the drawn sizes are below fusion's threshold) whose
    outputs negate another output and an input, and multiply an input by 1 and -1."""
    def body(x, y):
        e = np.exp(x)
        return e, -e, -x, y * 1.0, y * -1.0
    region = xform.make_graph(body)(np.ones(a.shape), np.ones(a.shape))
    outs = primitive_for("fusion").bind(a, b.T, max_width=4, region=region)
    return np.concatenate(outs)


def _positive_definite(xp, a):
    return a @ a.T + 4.0 * xp.eye(a.shape[0])    # entries of a in [-2, 2], at most 4 rows


def cholesky_factors(a, b):
    return (np.linalg.cholesky(_positive_definite(np, a))
            + np.linalg.cholesky(_positive_definite(np, b.T), upper=True))


def solve_with_factor(a, b):
    lower = np.linalg.cholesky(_positive_definite(np, a))
    upper = np.linalg.cholesky(_positive_definite(np, a), upper=True)
    return (np.linalg.solve(lower, b.T) + np.linalg.solve(lower.T, b.T)
            + np.linalg.solve(upper, b.T[:, 0])[:, None])


CASES = {   # rule name -> (functions where it must fire, kind of inputs)
    "sum of a reshape": ([kron_sum, reshape_sum], "finite"),
    "sum of a transpose": ([transpose_sum], "finite"),
    "sum of an outer product": ([kron_sum, kron_view_sum, outer_sum], "finite"),
    "sum of a broadcast": ([broadcast_sum], "finite"),
    "max of a broadcast": ([broadcast_max], "edge"),
    "min of a broadcast": ([broadcast_min], "edge"),
    "dot with ones": ([dot_ones_right, dot_ones_left], "finite"),
    "repeated scaling by constants": ([scaled_by_constants_twice], "finite"),
    "repeated scaling": ([scaled_by_a_value_twice], "finite"),
    "exp of log": ([exp_log], "edge"),
    "cholesky by LAPACK": ([cholesky_factors, solve_with_factor], "finite"),
    "solve with a Cholesky factor": ([solve_with_factor], "finite"),
    "solve knows a Cholesky factor's triangle": ([solve_with_factor], "int"),
    "product of a negation": ([negated_products], "edge"),
    "sum of a negation": ([negated_sums], "edge"),
    "negations out of a fused region": ([fused_negations], "edge"),
    "difference of a value with itself": ([self_difference], "int"),
    "where with a known mask": ([where_true, where_false, where_same], "edge"),
}

# Infinities, nans, signed zeros, huge and tiny values next to ordinary ones.
EDGE_VALUES = [0.0, -0.0, np.inf, -np.inf, np.nan, 1.5, -2.25, 1e308, -1e-310, 3.0]


def draw_inputs(data, kind, shape):
    if kind == "edge":
        elements = st.sampled_from(EDGE_VALUES)
        return [data.draw(hnp.arrays(np.float64, s, elements=elements))
                for s in (shape, shape[::-1])]
    dtype = np.int64 if kind == "int" else np.float64
    return [data.draw(xst.arrays(s, dtype, low=-1e3 if kind == "int" else -2.0,
                                 high=1e3 if kind == "int" else 2.0))
            for s in (shape, shape[::-1])]


def assert_same_bits(got, want):
    """Equal values, nans in the same places, zeros of the same sign, the same dtype."""
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)    # nans in the same places
    numbers = ~np.isnan(want)   # (numpy makes no promise about the sign of a nan)
    assert np.array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def test_every_rule_is_documented_and_tested():
    assert {rule.name for rule in REWRITES} == set(CASES)
    assert all(rule.doc and rule.exact in (True, False) for rule in REWRITES)
    # The exact rewrites are tested bit for bit on infinities and nans, the others on finite values.
    for rule in REWRITES:
        assert (CASES[rule.name][1] != "finite") == rule.exact or rule.name == "exp of log"


def counting(fired):
    def counted(rule):
        def rewrite(eqn, known):
            new = rule.rewrite(eqn, known)
            if new is not None:
                fired.append(rule.name)
            return new
        return attrs.evolve(rule, rewrite=rewrite)
    return [counted(rule) for rule in REWRITES]


@pytest.mark.parametrize("name, fun", [(n, f) for n, (fs, _) in CASES.items() for f in fs])
@given(data=st.data())
def test_rule_fires_and_keeps_the_value(name, fun, data):
    kind = CASES[name][1]
    exact = next(rule.exact for rule in REWRITES if rule.name == name)
    shape = data.draw(xst.shapes(min_dims=2, max_dims=2, min_side=2, max_side=4))
    a, b = draw_inputs(data, kind, shape)
    graph = xform.make_graph(fun)(a, b)
    fired = []
    after = dce(simplify(graph, exact=exact, rewrites=counting(fired)))
    after.check()
    assert name in fired, f"{name} did not fire on {fun.__name__}"
    with np.errstate(all="ignore"):
        want = fun(a, b)
        got = xform.eval_graph(after, a, b)[0]
    if exact:
        assert_same_bits(got, want)
        return
    assert np.asarray(got).dtype == np.asarray(want).dtype
    scale = np.prod([max(np.sum(np.abs(x[np.isfinite(x)])), 1.0) for x in (a, b)])
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12 * scale)


@pytest.mark.parametrize("fun", [f for fs, kind in CASES.values() if kind != "finite"
                                 for f in fs if f is not exp_log])
@given(data=st.data())
def test_exact_rules_keep_numpys_bits_in_compiled_code(fun, data):
    """Under the default, config.algebra "exact", jit gives numpy's result bit for bit."""
    xform.config.update("algebra", "exact")
    kind = next(k for fs, k in CASES.values() if fun in fs)
    shape = data.draw(xst.shapes(min_dims=2, max_dims=2, min_side=2, max_side=4))
    a, b = draw_inputs(data, kind, shape)
    with np.errstate(all="ignore"):
        assert_same_bits(xform.jit(fun)(a, b), fun(a, b))


def test_sum_of_kron_never_builds_the_product():
    a, b = np.ones((20, 20)), np.ones((40, 40))
    after = dce(simplify(xform.make_graph(kron_sum)(a, b)))
    assert [e.primitive.name for e in after.equations] == ["sum", "sum", "multiply"]


@pytest.mark.parametrize("fun", [
    lambda a, b: np.sum(a * b),                 # an axis spans both operands
    lambda a, b: a - a,                         # floats: inf - inf is nan
    lambda a, b: np.where(a > 0, a, b),         # a mask known only at run time
    lambda a, b: np.where(np.array([True, False]), a, b),     # a mixed mask
    lambda a, b: a @ np.full(2, 2.0),           # not ones
    lambda a, b: (a * 1e300) * 1e300,           # the product of the scales overflows
    lambda a, b: (a * 1e-300) * 1e-300,         # ... or underflows
    lambda a, b: (a[0, 0] * b[0, 0]) * b[0, 1],   # 0-d operands: nothing to save
    lambda a, b: (-a) * b,                      # a * b is not computed
    lambda a, b: np.sum(-a, axis=0),            # an argument: its layout is the caller's
    lambda a, b: np.sum(-(a * b).T, axis=1),    # a view: its sum adds in another order
    lambda a, b: np.sum(-(a * b), axis=()),     # no axis: a copy, -0.0 stays -0.0
    lambda a, b: (a > 0) * -1,                  # integers
], ids=["shared-axis", "float-self-difference", "run-time-mask", "mixed-mask", "not-ones",
        "overflowing-scale", "underflowing-scale", "scalar-scaling", "product-not-computed",
        "sum-of-an-argument", "sum-of-a-view", "sum-over-no-axis", "integer-product"])
def test_no_match(fun):
    graph = xform.make_graph(fun)(np.ones((2, 2)), np.ones((2, 2)))
    assert simplify(graph) is graph


def test_an_input_is_never_returned_in_place_of_a_new_array():
    graph = xform.make_graph(lambda a, b: np.where(True, a, b))(np.ones(2), np.ones(2))
    assert simplify(graph) is graph


def test_exact_runs_only_exact_rules():
    graph = xform.make_graph(kron_sum)(np.ones((2, 2)), np.ones((3, 3)))
    assert simplify(graph, exact=True) is graph
    fired = []
    simplify(xform.make_graph(where_true)(np.ones((2, 2)), np.ones((2, 2))), exact=True,
             rewrites=counting(fired))
    assert fired and all(next(r for r in REWRITES if r.name == n).exact for n in fired)


@pytest.mark.parametrize("fun, runs", [
    (lambda a, b: (a * b) * (-b) * 2.0, False),   # a product of a negation, but no a * b
    (lambda a, b: a * b - (-a) * b, True),
    (lambda a, b: np.sum(-(a * b)), True),
])
def test_rules_of_negations_run_only_where_they_may_apply(fun, runs):
    """Their `when` spares the driver (a few us per equation) graphs they cannot change: a
    gradient's products and negations rarely pair up."""
    called = []

    def spied(rule):
        def rewrite(eqn, known):
            called.append(rule.name)
            return rule.rewrite(eqn, known)
        return attrs.evolve(rule, rewrite=rewrite)
    graph = xform.make_graph(fun)(np.ones((2, 2)), np.ones((2, 2)))
    simplify(graph, exact=True, rewrites=[spied(rule) for rule in REWRITES])
    assert bool(called) == runs


def test_the_peepholes_meet_what_the_rules_emit():
    """The product with one that a region's rule moves out of it goes too (fold's x * 1)."""
    graph = xform.make_graph(fused_negations)(np.ones((2, 3)), np.ones((3, 2)))
    simplified = dce(simplify(graph, exact=True))
    assert not [eqn for eqn in simplified.equations if eqn.primitive.name == "multiply"
                and any(getattr(a, "value", None) == 1 for a in eqn.inputs)]
    a, b = np.arange(6.0).reshape(2, 3) - 2.5, np.arange(6.0).reshape(3, 2)
    assert_same_bits(eval_graph(simplified, a, b)[0], fused_negations(a, b))


def test_a_rule_meets_what_another_rule_emitted_though_the_graph_held_none_of_it():
    """Patterns are the only filter: no list of what rewrites emit can be forgotten. The graph
    holds no `negative`; the first rule makes one, the second matches a sum of it."""
    from xform.ir.core import Equation
    from xform.passes.simplify import Rewrite, _made_by

    def sin_to_negative(eqn, known):
        return [Equation(primitive_for("negative"), eqn.inputs, eqn.outputs)]

    def sum_of_negative(eqn, known):
        inner = known.made_by(eqn.inputs[0], "negative")
        return [attrs.evolve(eqn, primitive=primitive_for("reduce_max"))] if inner else None
    rewrites = (Rewrite("sin to negative", "sin", sin_to_negative, exact=True, doc=""),
             Rewrite("sum of a negative", "sum", sum_of_negative, exact=True, doc="",
                  operand_of=_made_by(0, "negative")))
    graph = xform.make_graph(lambda x: np.sum(np.sin(x)))(np.ones(3))
    names = [eqn.primitive.name for eqn in simplify(graph, rewrites=rewrites).equations]
    assert names == ["negative", "reduce_max"]


def autograd_version(fun):
    sources = {kron_sum: lambda a, b: anp.sum(anp.kron(a, b)),
               kron_view_sum: lambda a, b: anp.sum(anp.kron(a[:2, :2], anp.triu(b))),
               outer_sum: lambda a, b: anp.sum(a[:, :, None, None] * b[None, None, :, :]),
               dot_ones_right: lambda a, b: (anp.sum(anp.dot(a, anp.ones(a.shape[1])))
                                             + anp.dot(b, anp.ones(b.shape[1]))),
               dot_ones_left: lambda a, b: (anp.dot(anp.ones(a.shape[0]), a)
                                            + anp.dot(anp.ones(b.shape[1]), b[0])),
               scaled_by_constants_twice: lambda a, b: (a * 2.5) * 3.0 + 0.5 * (1.5 * b.T),
               scaled_by_a_value_twice: lambda a, b: (a * b[0, 0]) * b[0, 0],
               exp_log: lambda a, b: anp.exp(anp.log(a)) + b.T,
               cholesky_factors: lambda a, b: (
                   anp.linalg.cholesky(_positive_definite(anp, a))
                   + anp.linalg.cholesky(_positive_definite(anp, b.T)).T),
               solve_with_factor: lambda a, b: (
                   anp.linalg.solve(anp.linalg.cholesky(_positive_definite(anp, a)), b.T)
                   + anp.linalg.solve(anp.linalg.cholesky(_positive_definite(anp, a)).T, b.T)
                   + anp.linalg.solve(anp.linalg.cholesky(_positive_definite(anp, a)).T,
                                      b.T[:, 0])[:, None])}
    return sources[fun]


@pytest.mark.parametrize("fun", [kron_sum, kron_view_sum, outer_sum, dot_ones_right,
                                 dot_ones_left, scaled_by_constants_twice,
                                 scaled_by_a_value_twice, exp_log, cholesky_factors,
                                 solve_with_factor])
@given(data=st.data())
def test_gradients_agree_with_autograd(fun, data):
    a = data.draw(xst.arrays((3, 2), low=0.1))   # positive: exp_log's domain
    b = data.draw(xst.arrays((2, 3)))
    scalar = (lambda a, b: np.sum(fun(a, b))) if fun is not kron_sum else fun
    got = xform.grad(scalar, (0, 1))(a, b)
    want = autograd.grad(lambda a, b: anp.sum(autograd_version(fun)(a, b)), (0, 1))(a, b)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def live_ndims(graph):
    graph = dce(xform.passes.optimize(graph))
    return {v.aval.ndim for e in graph.equations for v in e.outputs}


def test_config_algebra_exact_keeps_numpys_bits_of_values_only():
    """Under "exact", what f returns is numpy's bits (value_and_grad's value, jit); a gradient
    alone, which numpy does not define, is computed from sum(a) * sum(b) (rounding only)."""
    a = np.linspace(0.1, 1.3, 9).reshape(3, 3)
    b = np.linspace(-1.1, 0.7, 16).reshape(4, 4)
    xform.config.update("algebra", "exact")
    assert xform.jit(kron_sum)(a, b) == kron_sum(a, b)  # bit for bit
    value, grads = xform.value_and_grad(kron_sum, (0, 1))(a, b)
    assert value == kron_sum(a, b)
    assert 4 in live_ndims(xform.make_graph(xform.value_and_grad(kron_sum, (0, 1)))(a, b))
    assert 4 not in live_ndims(xform.make_graph(xform.grad(kron_sum, (0, 1)))(a, b))
    for g, w in zip(xform.grad(kron_sum, (0, 1))(a, b), grads):
        np.testing.assert_allclose(g, w, rtol=1e-13)
    with pytest.raises(ValueError, match="algebra"):
        xform.config.update("algebra", "fast")


def test_levels_admit_what_they_say():
    assert all(rule.exact for rule in REWRITES if LEVELS["exact"](rule))
    gradient = {rule.name for rule in REWRITES if LEVELS["gradient"](rule)}
    assert "exp of log" not in gradient and "repeated scaling" not in gradient
    assert "sum of an outer product" in gradient and "where with a known mask" in gradient
    assert all(LEVELS["reassociate"](rule) for rule in REWRITES)
    fired = []
    graph = xform.make_graph(exp_log)(np.ones((2, 2)), np.ones((2, 2)))
    simplify(graph, level="gradient", rewrites=counting(fired))
    assert fired == []


def primitive_names(graph):
    """The primitives left after the passes "exact" runs."""
    graph = xform.passes.optimize(graph, xform.passes.EXACT_PIPELINE)
    return {eqn.primitive.name for eqn in graph.equations}


def test_only_a_gradient_factors_by_potrf_and_solves_by_substitution():
    """Under "exact", plain grad's forward pass factors by LAPACK potrf and solves with the
    factor by substitution (values it does not return); value_and_grad and jit compute
    numpy's cholesky and solve, bit for bit."""
    xform.config.update("algebra", "exact")
    a = np.linspace(-1.0, 1.7, 12).reshape(3, 4)
    b = np.linspace(0.3, -1.2, 12).reshape(4, 3)
    loss = lambda a, b: np.sum(solve_with_factor(a, b) ** 2)    # noqa: E731
    grad_names = primitive_names(xform.make_graph(xform.grad(loss, (0, 1)))(a, b))
    assert {"cholesky_lapack", "triangular_solve"} <= grad_names
    assert not {"cholesky", "solve"} & grad_names
    for transform in (xform.value_and_grad(loss, (0, 1)), xform.jit(loss)):
        names = primitive_names(xform.make_graph(transform)(a, b))
        assert {"cholesky", "solve"} <= names and "cholesky_lapack" not in names
    value, grads = xform.value_and_grad(loss, (0, 1))(a, b)
    assert value == loss(a, b) and xform.jit(loss)(a, b) == loss(a, b)
    for g, w in zip(xform.grad(loss, (0, 1))(a, b), grads):
        np.testing.assert_allclose(g, w, rtol=1e-12)


def _gp_log_likelihood(xp, solve_triangular, x, y, s):
    n = x.shape[0]
    k = xp.exp(-0.5 * (x[:, None] - x[None, :]) ** 2) + (s * s + 1e-3) * xp.eye(n)
    chol = xp.linalg.cholesky(k)
    alpha = solve_triangular(chol, y, lower=True)
    return -0.5 * xp.sum(alpha * alpha) - xp.sum(xp.log(xp.diagonal(chol, 0, -1, -2)))


def test_partials_of_a_difference_share_one_product():
    """A GP likelihood's gradient (the kernel large enough to fuse): the partials of
    x[:, None] - x[None, :] negate each other, so one product with the kernel's cotangent
    serves both sums, and the fused region returns neither the negated partial nor the
    noise's partial eye * 1. First and compiled calls agree bit for bit, and with autograd."""
    import autograd.scipy.linalg
    import scipy.linalg
    xform.config.update("algebra", "exact")
    x, s = np.linspace(-3, 3, 40), 0.3
    y = np.sin(x)
    grad = xform.grad(lambda *a: _gp_log_likelihood(np, scipy.linalg.solve_triangular, *a),
                      (0, 1, 2))
    first, second = grad(x, y, s), grad(x, y, s)
    for a, b in zip(first, second):
        assert_same_bits(a, b)
    want = autograd.grad(lambda *a: _gp_log_likelihood(
        anp, autograd.scipy.linalg.solve_triangular, *a), (0, 1, 2))(x, y, s)
    for got, w in zip(second, want):
        np.testing.assert_allclose(got, w, rtol=1e-10, atol=1e-10)
    graph = finish_graph(xform.make_graph(grad)(x, y, s), fuse=True)
    square = [e for e in graph.equations if e.outputs[0].aval.shape == (40, 40)]
    region, = [e for e in square if e.primitive.name == "elementwise"]
    assert len(region.outputs) == 2    # the kernel and one partial
    summed = {e.params["axes"]: e.inputs[0] for e in graph.equations
              if e.primitive.name == "sum" and e.inputs[0].aval.shape == (40, 40)}
    assert summed[(0,)] is summed[(1,)]
