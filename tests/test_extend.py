"""The extension API as a library author uses it: primitives registered with the public API
alone, the loop-batch fallback, non_differentiable, overlays, the minimal and default contexts
(every primitive with a decomposition agrees with it), and check_primitive's reports."""
import contextlib
import re
import sys
import warnings
from collections import namedtuple

import numpy as np
import pytest
import scipy.special
from hypothesis import given
from hypothesis import strategies as st

import xform
import xform.rules.elementwise
from xform.extend import logsumexp, softplus
from xform.extend import Undefined, Zero
from xform.ir.registry import RULES, LoopBatchWarning, ScalarMath, register
from xform.passes.fuse import fuse_elementwise
from xform.rules.helpers import elementwise_abstract_eval, vectorized_batch
from xform.testing import CheckFailure, check_grads, check_primitive
from xform.testing import strategies as xst
from xform.tree import tree_leaves, tree_map
from tests.source_lines import assert_points_at, line_of

X = np.array([0.3, -1.2, 0.7])


# -- a primitive from the public API alone ------------------------------------------------------

def make_sin_primitive(name, batch=True):
    """sin(k x) with a static parameter k, by decorators, JAX style."""
    p = xform.Primitive(name)

    @p.def_impl
    def _impl(x, *, k):
        return np.sin(k * x)

    @p.def_abstract_eval
    def _abstract_eval(x, *, k):
        if x.dtype.kind != "f":
            raise TypeError(f"{name} takes floats, got {x.dtype}")
        return xform.ShapedArray(x.shape, x.dtype)

    @p.def_jvp
    def _jvp(primals, tangents, *, k):
        (x,), (t,) = primals, tangents
        return p.bind(x, k=k), k * np.cos(k * x) * t

    if batch:
        p.def_batch(lambda size, args, dims, *, k: (p.bind(*args, k=k), dims[0]))
    return p


sink_p = make_sin_primitive("sink")


def sink(x, k=2.0):
    return sink_p.bind(x, k=k)


def test_a_public_api_primitive_works_under_every_transform():
    assert np.allclose(sink(X), np.sin(2 * X))
    assert np.allclose(xform.jit(sink)(X), np.sin(2 * X))
    assert np.allclose(xform.grad(lambda x: np.sum(sink(x)))(X), 2 * np.cos(2 * X))
    assert np.allclose(xform.jvp(sink, (X,), (np.ones(3),))[1], 2 * np.cos(2 * X))
    assert np.allclose(xform.vmap(sink)(np.stack([X, X])), np.sin(2 * np.stack([X, X])))
    assert np.allclose(xform.hessian(lambda x: np.sum(sink(x)))(X), np.diag(-4 * np.sin(2 * X)))
    assert np.allclose(xform.vmap(xform.grad(sink))(X), 2 * np.cos(2 * X))


@given(xst.arrays(xst.shapes(max_dims=2), np.float64))
def test_a_public_api_primitive_passes_check_primitive(x):
    check_primitive(sink_p, x, params={"k": 1.5}, order=2)


scale_p = xform.Primitive("scale_by")  # linear: jvp + transpose, reverse mode derived
scale_p.def_impl(lambda x, *, c: c * x)
scale_p.def_abstract_eval(lambda x, *, c: x)
scale_p.def_jvp(lambda primals, tangents, *, c: (scale_p.bind(primals[0], c=c),
                                                 scale_p.bind(tangents[0], c=c)))
scale_p.def_transpose(lambda ct, x, *, c: (scale_p.bind(ct, c=c),))
scale_p.def_batch(lambda size, args, dims, *, c: (scale_p.bind(args[0], c=c), dims[0]))


def test_reverse_mode_is_derived_from_jvp_and_transpose():
    assert RULES[scale_p].vjp is None
    assert np.allclose(xform.grad(lambda x: np.sum(scale_p.bind(x, c=3.0) ** 2))(X), 18 * X)
    check_primitive(scale_p, X, params={"c": -0.5}, order=2)


def test_two_inputs_and_zero_tangents_reach_rules_as_arrays():
    p = xform.Primitive("weighted")
    p.def_impl(lambda x, w: x * w)
    p.def_abstract_eval(lambda x, w: x)
    seen = []

    @p.def_jvp
    def _jvp(primals, tangents):
        seen.append(all(not isinstance(t, xform.extend.Zero) for t in tangents))
        (x, w), (x_dot, w_dot) = primals, tangents
        return p.bind(x, w), x_dot * w + x * w_dot
    assert np.allclose(xform.grad(lambda x: np.sum(p.bind(x, X)))(X), X)
    assert seen == [True]


@contextlib.contextmanager
def registered(prim, **rules):
    """`prim` registered with `rules` while the block runs (the table is global)."""
    register(prim, **rules)
    try:
        yield prim
    finally:
        del RULES[prim]


def _zero_seeing_rules(name, seen, **flags):
    """A primitive x * w whose rules record whether a symbolic Zero reached them."""
    p = xform.Primitive(name)

    def jvp(primals, tangents):
        seen.append(("jvp", any(type(t) is Zero for t in tangents)))
        (x, w), (x_dot, w_dot) = primals, tangents
        x_dot = 0.0 if type(x_dot) is Zero else x_dot
        w_dot = 0.0 if type(w_dot) is Zero else w_dot
        return p.bind(x, w), p.bind(x_dot, w) + x * w_dot

    def transpose(ct, x, w):
        seen.append(("transpose", type(ct) is Zero))
        return (ct * w if type(x) is Undefined else None), None
    return p, dict(impl=lambda x, w: x * w, abstract_eval=lambda x, w: x, jvp=jvp,
                   transpose=transpose, **flags)


@pytest.mark.parametrize("symbolic_zeros", [False, True])
def test_symbolic_zeros_is_one_convention_whichever_door_a_rule_comes_in_by(symbolic_zeros):
    # Only x varies: w's tangent is zero. Rules see a Zero only when they declare it.
    for door in ("register", "def_jvp"):
        seen = []
        p, rules = _zero_seeing_rules(f"weighted_{door}", seen)
        if door == "register":
            register(p, **rules, symbolic_zeros=symbolic_zeros)
        else:
            p.def_impl(rules["impl"])
            p.def_abstract_eval(rules["abstract_eval"])
            p.def_jvp(rules["jvp"], symbolic_zeros=symbolic_zeros)
        try:
            t_out = xform.jvp(lambda x: p.bind(x, X), (X,), (np.ones(3),))[1]
            assert np.allclose(t_out, X)
            assert seen == [("jvp", symbolic_zeros)], door
            declared = {"jvp", "transpose"} if door == "register" else {"jvp"}
            assert RULES[p].symbolic_zeros == (declared if symbolic_zeros else set())
        finally:
            del RULES[p]


def test_def_transpose_with_symbolic_zeros_and_as_a_decorator():
    seen = []
    p, rules = _zero_seeing_rules("weighted_transposed", seen)
    p.def_impl(rules["impl"])
    p.def_abstract_eval(rules["abstract_eval"])
    p.def_jvp(rules["jvp"], symbolic_zeros=True)
    p.def_transpose(symbolic_zeros=True)(rules["transpose"])
    try:
        assert RULES[p].symbolic_zeros == {"jvp", "transpose"}
        assert np.allclose(xform.grad(lambda x: np.sum(p.bind(x, X)))(X), X)
        assert ("transpose", False) in seen
        p.def_transpose(rules["transpose"])    # again, without the flag: zeros as arrays
        assert RULES[p].symbolic_zeros == {"jvp"}
    finally:
        del RULES[p]


@pytest.mark.parametrize("linear_in", [(), (0,)])
def test_a_linear_jvp_declared_linear_in_takes_the_direct_transpose_path(linear_in):
    p = xform.Primitive(f"double_{len(linear_in)}")
    jvp_calls = []

    def jvp(primals, tangents):
        jvp_calls.append(1)
        return p.bind(*primals), p.bind(*tangents)
    with registered(p, impl=lambda x: 2 * x, abstract_eval=lambda x: x, jvp=jvp,
                    transpose=lambda ct, x: (p.bind(ct),), linear_in=linear_in):
        assert np.allclose(xform.grad(lambda x: np.sum(p.bind(x) ** 2))(X), 8 * X)
    # Without the trait reverse mode linearizes the jvp; with it, the transpose rule is
    # the vjp and the jvp never runs.
    assert bool(jvp_calls) == (not linear_in)


def _cube_rules(p, **traits):
    return dict(impl=lambda x: x * x * x, abstract_eval=elementwise_abstract_eval(np.square),
                jvp=lambda primals, tangents: (p.bind(*primals),
                                               3 * primals[0] ** 2 * tangents[0]),
                batch=vectorized_batch(p), **traits)


def _twice_rules(p, **traits):
    return dict(impl=lambda x: x + x, abstract_eval=elementwise_abstract_eval(np.square),
                jvp=lambda primals, tangents: (p.bind(*primals), p.bind(*tangents)),
                batch=vectorized_batch(p), **traits)


def test_a_library_elementwise_primitive_is_fused(monkeypatch):
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)  # small too
    cube_p = xform.Primitive("library_cube")
    with registered(cube_p, **_cube_rules(cube_p, elementwise=True)):
        graph = xform.make_graph(lambda x: np.sum(np.sin(cube_p.bind(x)) * x))(X)
        fused = fuse_elementwise(graph)
        assert [e.primitive.name for e in fused.equations] == ["elementwise", "sum"]
        region = fused.equations[0].params["region"]
        assert [e.primitive.name for e in region.equations] == ["library_cube", "sin",
                                                                "multiply"]
        assert np.allclose(xform.eval_graph(fused, X)[0], np.sum(np.sin(X ** 3) * X))


def test_a_library_elementwise_primitive_is_mapped_by_threaded_map():
    cube_p = xform.Primitive("library_cube_mapped")
    with registered(cube_p, **_cube_rules(cube_p, elementwise=True)):
        out = xform.threaded_map(lambda x: cube_p.bind(x) + 1.0, X)
        assert np.allclose(out, X ** 3 + 1.0)
    other_p = xform.Primitive("library_cube_not_elementwise")
    with registered(other_p, **_cube_rules(other_p)):
        with pytest.raises(xform.TypeCheckError, match="library_cube_not_elementwise"):
            xform.threaded_map(lambda x: other_p.bind(x) + 1.0, X)


def test_a_library_primitive_with_scalar_math_takes_the_scalar_path():
    from xform.codegen import compile_graph, graph_source
    from xform.codegen import scalar
    twice_p, cube_p = xform.Primitive("library_twice"), xform.Primitive("library_cube_scalar")
    exact = ScalarMath(lambda a: a + a, "{0} + {0}", exact=True, monotone=(0,))
    fast = ScalarMath(lambda a: a * a * a)        # not correctly rounded: "fast" only
    with registered(twice_p, **_twice_rules(twice_p, elementwise=True, scalar_math=exact)), \
            registered(cube_p, **_cube_rules(cube_p, elementwise=True, scalar_math=fast)):
        def f(x):
            return twice_p.bind(twice_p.bind(x)) * x + 1.0
        graph = xform.make_graph(f)(0.5)
        source = graph_source(graph)[0]          # "exact" admits the exact trait
        assert "to_float(" in source and "s0 + s0" in source
        assert compile_graph(graph)(0.75)[0] == xform.eval_graph(graph, 0.75)[0] == 3.25
        graph = xform.make_graph(lambda x: cube_p.bind(x) * x + 1.0)(0.5)
        assert "m0(" not in graph_source(graph)[0]
        # Pinned, as the "fast" self-check would admit it on a machine where it agrees.
        table = {p: c.op for p, c in scalar.candidates().items() if c.exact}
        table[cube_p] = scalar.candidates()[cube_p].op
        with scalar.pinned(table):
            source, namespace = graph_source(graph)
        assert "m0(" in source and namespace["m0"] is fast.function


def test_softplus_is_elementwise(monkeypatch):
    monkeypatch.setattr(sys.modules["xform.passes.fuse"], "FUSION_MIN_SIZE", 0)  # small too
    assert xform.ir.registry.is_elementwise(xform.extend.softplus_p)
    graph = xform.make_graph(lambda x: np.sum(softplus(np.sin(x))))(X)
    assert [e.primitive.name for e in fuse_elementwise(graph).equations] == ["elementwise",
                                                                             "sum"]


def test_a_vjp_only_primitive_has_reverse_but_not_forward_mode():
    p = xform.Primitive("cube_vjp")
    p.def_impl(lambda x: x ** 3)
    p.def_abstract_eval(lambda x: x)
    p.def_vjp(lambda primals, out, ct: (3 * primals[0] ** 2 * ct,))
    assert np.allclose(xform.grad(lambda x: np.sum(p.bind(x)))(X), 3 * X ** 2)
    with pytest.raises(xform.MissingRuleError, match="'cube_vjp' has no jvp rule") as info:
        xform.jvp(lambda x: p.bind(x), (X,), (X,))  # line: no-jvp
    assert_points_at(info.value, __file__, "no-jvp")


def test_missing_rules_are_named_with_the_user_line():
    p = xform.Primitive("opaque")
    p.def_abstract_eval(lambda x: x)
    with pytest.raises(xform.MissingRuleError, match="'opaque' has no jvp rule") as info:
        xform.grad(lambda x: np.sum(p.bind(x) * 2.0))(X)  # line: no-rule
    assert_points_at(info.value, __file__, "no-rule")
    assert "p.def_jvp" in str(info.value)
    with pytest.raises(xform.MissingRuleError, match="'opaque' has no batch rule") as info:
        xform.vmap(lambda x: p.bind(x))(np.ones((2, 3)))  # line: no-batch
    assert_points_at(info.value, __file__, "no-batch")
    with pytest.raises(xform.MissingRuleError, match="'opaque' has no impl rule"):
        xform.jit(lambda x: p.bind(x))(X)
    with pytest.raises(xform.ShapeError, match="sink takes floats") as info:
        xform.jit(lambda x: sink_p.bind(x, k=1.0))(np.arange(3))  # line: bad-input
    assert_points_at(info.value, __file__, "bad-input")


# -- the loop-batch fallback ----------------------------------------------------------------------

def test_loop_batch_fallback_warns_once_names_the_primitive_and_is_correct():
    p = make_sin_primitive("sink_unbatched", batch=False)
    xs = np.stack([X, 2 * X, 3 * X])
    with pytest.warns(LoopBatchWarning, match="'sink_unbatched' has no batch rule") as record:
        out = xform.vmap(lambda x: p.bind(x, k=2.0))(xs)  # line: loop-warning
    assert record[0].filename == __file__ and record[0].lineno == line_of(__file__, "loop-warning")
    assert np.allclose(out, np.sin(2 * xs))
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a second warning would fail here
        grads = xform.vmap(xform.grad(lambda x: np.sum(p.bind(x, k=2.0))))(xs)
        assert np.allclose(grads, 2 * np.cos(2 * xs))
        mixed = xform.vmap(lambda x, y: p.bind(x * y, k=1.0), in_axes=(1, None))(xs.T, 2.0)
        assert np.allclose(mixed, np.sin(2 * xs))
        loss = lambda xs: np.sum(xform.vmap(lambda x: p.bind(x, k=2.0))(xs))  # noqa: E731
        assert np.allclose(xform.grad(loss)(xs), 2 * np.cos(2 * xs))


def test_loop_batch_fallback_for_multiple_results():
    p = xform.Primitive("sincos", multiple_results=True)
    p.def_impl(lambda x: [np.sin(x), np.cos(x)])
    p.def_abstract_eval(lambda x: [x, x])
    p.def_jvp(lambda primals, tangents: (p.bind(*primals),
                                         [np.cos(primals[0]) * tangents[0],
                                          -np.sin(primals[0]) * tangents[0]]))
    xs = np.stack([X, -X])
    with pytest.warns(LoopBatchWarning, match="sincos"):
        s, c = xform.vmap(lambda x: p.bind(x))(xs)
    assert np.allclose(s, np.sin(xs)) and np.allclose(c, np.cos(xs))
    check_grads(lambda x: np.sum(xform.vmap(lambda y: p.bind(y)[0] * p.bind(y)[1])(x)),
                (xs,), order=2)


# -- check_primitive reports which property failed -----------------------------------------------

def broken(name, **changes):
    """A copy of sink_p with some rules replaced by wrong ones."""
    p = make_sin_primitive(name)
    rules = {"jvp": lambda primals, tangents, *, k: (p.bind(primals[0], k=k),
                                                     np.cos(k * primals[0]) * tangents[0]),
             "abstract_eval": lambda x, *, k: xform.ShapedArray(x.shape, np.float32),
             "batch": lambda size, args, dims, *, k: (p.bind(args[0] + 1.0, k=k), dims[0]),
             "vjp": lambda primals, out, ct, *, k: (2 * ct,)}
    for kind in changes:
        getattr(p, f"def_{kind}")(rules[kind])
    return p


@pytest.mark.parametrize("kind, prop", [("jvp", "jvp vs finite differences"),
                                        ("abstract_eval", "abstract eval vs impl"),
                                        ("batch", "batch vs loop"),
                                        ("vjp", "vjp vs jvp (dot-product identity)")])
def test_check_primitive_names_the_broken_property(kind, prop):
    p = broken(f"broken_{kind}", **{kind: True})
    message = re.escape(f"check_primitive(broken_{kind}): {prop} failed")
    with pytest.raises(CheckFailure, match=message):
        check_primitive(p, X, params={"k": 2.0})


def test_check_primitive_order_0_skips_only_the_derivative_properties():
    check_primitive(broken("broken_jvp_order_0", jvp=True), X, params={"k": 2.0}, order=0)
    with pytest.raises(CheckFailure, match="batch vs loop"):
        check_primitive(broken("broken_batch_order_0", batch=True), X, params={"k": 2.0},
                        order=0)


def test_check_primitive_insists_on_registered_rules():
    p = make_sin_primitive("sink_no_batch", batch=False)
    with pytest.raises(CheckFailure, match="registered rules failed\nno batch rule"):
        check_primitive(p, X, params={"k": 2.0})
    check_primitive(p, X, params={"k": 2.0}, batch=False)


# -- non_differentiable --------------------------------------------------------------------------

@xform.non_differentiable
def bucket(x, edges=(0.0, 1.0)):
    """Not stageable as written (np.digitize) and not differentiable."""
    return np.digitize(x, list(edges))


def test_a_non_differentiable_function_stages_as_one_primitive_with_zero_derivative():
    x = np.array([0.5, 2.0, -1.0])
    assert np.array_equal(bucket(x), [1, 2, 0])
    graph = xform.make_graph(lambda x: x * bucket(x))(x)
    assert [e.primitive.name for e in graph.equations] == ["bucket", "multiply"]
    assert np.allclose(xform.grad(lambda x: np.sum(x * bucket(x)))(x), [1, 2, 0])
    assert np.allclose(xform.grad(lambda x: np.sum(x * bucket(x, edges=(-5.0,))))(x), 1)
    assert np.allclose(xform.jvp(lambda x: x * bucket(x), (x,), (np.ones(3),))[1], [1, 2, 0])
    with pytest.warns(LoopBatchWarning, match="bucket"):
        assert np.array_equal(xform.vmap(bucket)(np.stack([x, -x])), [[1, 2, 0], [0, 0, 2]])
    with pytest.raises(xform.TypeCheckError, match="static") as info:
        xform.jit(lambda x: bucket(x, edges=x))(x)  # line: traced-kwarg
    assert_points_at(info.value, __file__, "traced-kwarg")


def test_non_differentiable_with_an_out_spec_and_pytrees():
    calls = []

    @xform.non_differentiable(out_spec=lambda x: {"hits": xform.ShapedArray((), np.int64),
                                                  "first": x["v"]})
    def count(x):
        calls.append(1)
        return {"hits": np.int64(np.sum(x["v"] > 0)), "first": x["v"] * 0 + x["v"][0]}
    x = {"v": X}
    out = xform.jit(count)(x)
    assert out["hits"] == 2 and np.allclose(out["first"], X[0])
    assert len(calls) == 1  # the out spec answered the abstract eval
    assert np.allclose(xform.grad(lambda v: np.sum(count({"v": v})["first"] * v))(X), X[0])


def test_non_differentiable_primitive():
    p = make_sin_primitive("sink_constant")
    assert xform.non_differentiable(p) is p
    assert np.allclose(xform.grad(lambda x: np.sum(p.bind(x, k=2.0) + x))(X), 1.0)


# -- overlays ------------------------------------------------------------------------------------

def log1pexp(x):
    return np.log(1.0 + np.exp(x))


def test_an_overlay_changes_what_is_differentiated():
    with np.errstate(all="ignore"):
        assert np.isnan(xform.grad(log1pexp)(1000.0))
        xform.overlay(log1pexp, softplus)
        try:
            assert xform.grad(log1pexp)(1000.0) == 1.0
            assert np.allclose(xform.grad(log1pexp)(0.0), 0.5)
            assert [e.primitive.name for e in xform.make_graph(log1pexp)(1.0).equations] == \
                ["softplus"]
            assert np.isinf(log1pexp(1000.0))  # only staging sees the overlay
        finally:
            xform.extend.remove_overlay(log1pexp)
        assert np.isnan(xform.grad(log1pexp)(1000.0))


def test_an_overlay_may_call_the_definition_it_replaces():
    @xform.overlay(np.expm1)
    def expm1_twice(x):
        return 2.0 * np.expm1(x)  # np.expm1 here is the original
    try:
        assert np.allclose(xform.jit(np.expm1)(X), 2 * np.expm1(X))
        assert np.allclose(xform.grad(lambda x: np.sum(np.expm1(x)))(X), 2 * np.exp(X))
        assert np.allclose(np.expm1(X), np.expm1(X))
    finally:
        xform.extend.remove_overlay(np.expm1)
    assert np.allclose(xform.jit(np.expm1)(X), np.expm1(X))


def test_an_overlay_makes_an_unsupported_numpy_function_stageable():
    with pytest.raises(xform.UnsupportedError, match="i0"):
        xform.jit(np.i0)(X)

    @xform.overlay(np.i0)
    def i0(x):
        # the power series sum_k (x^2 / 4)^k / (k!)^2, converged for |x| <= 3 after 30 terms
        term = total = np.ones_like(x)
        for k in range(1, 30):
            term = term * (x * x / 4) / (k * k)
            total = total + term
        return total
    try:
        x = np.array([0.0, 0.25, -1.5])
        assert np.allclose(xform.jit(np.i0)(x), np.i0(x))
        assert np.allclose(xform.grad(lambda x: np.sum(np.i0(x)))(x), scipy.special.i1(x))
        check_grads(np.i0, (X,), order=2)
    finally:
        xform.extend.remove_overlay(np.i0)
    with pytest.raises(xform.UnsupportedError, match="i0"):
        xform.jit(np.i0)(X)


def test_an_overlay_of_a_library_function_reaches_names_imported_before():
    from json import dumps          # any Python function: its calls with tracers are replaced

    @xform.overlay(dumps)
    def traced_dumps(x):
        return x * 2.0
    try:
        assert xform.jit(lambda x: dumps(x))(1.5) == 3.0
        assert dumps(1.5) == "1.5"               # outside staging: json's own
    finally:
        xform.extend.remove_overlay(dumps)
    assert dumps(1.5) == "1.5"


def test_a_second_overlay_replaces_the_first():
    def f(x):
        return x + 1.0
    xform.overlay(f, lambda x: x * 10.0)
    xform.overlay(f, lambda x: f(x) * 2.0)     # f inside means f's own definition
    try:
        assert xform.jit(f)(1.0) == 4.0
    finally:
        xform.extend.remove_overlay(f)
    assert xform.jit(f)(1.0) == 2.0


def test_overlay_refuses_targets_it_cannot_intercept():
    import math
    with pytest.raises(xform.TypeCheckError, match="neither a numpy function") as info:
        xform.overlay(math.exp, np.exp)  # line: bad-overlay
    assert_points_at(info.value, __file__, "bad-overlay")
    with pytest.raises(xform.TypeCheckError, match="has no overlay"):
        xform.extend.remove_overlay(np.sin)


# -- contexts --------------------------------------------------------------------------------------

def primitive_names(fun, *args):
    return {e.primitive.name for e in xform.make_graph(fun)(*args).equations}


def test_the_minimal_context_stages_default_only_primitives_as_their_decomposition():
    lse = lambda x: logsumexp(x, axis=1)  # noqa: E731
    xs = np.array([[1.0, 2.0, 3.0], [1000.0, 1000.0, -np.inf]])
    assert primitive_names(lse, xs) == {"logsumexp"}
    default_grad = xform.grad(lambda x: np.sum(lse(x)))(xs)
    with xform.context("minimal"):
        assert xform.extend.current_context() == "minimal"
        assert "logsumexp" not in primitive_names(lse, xs)
        assert "softplus" not in primitive_names(softplus, X)
        assert np.allclose(xform.jit(lse)(xs), [np.log(np.sum(np.exp(xs[0]))), 1000 + np.log(2)])
        assert np.allclose(xform.grad(lambda x: np.sum(lse(x)))(xs), default_grad)
    assert xform.extend.current_context() == "default"
    assert primitive_names(lse, xs) == {"logsumexp"}
    xform.context("minimal")  # as a statement: a switch
    try:
        assert "softplus" not in primitive_names(softplus, X)
    finally:
        xform.context("default")
    assert primitive_names(softplus, X) == {"softplus"}
    with pytest.raises(xform.TypeCheckError, match="unknown context 'fast'"):
        xform.context("fast")


def test_a_context_switch_clears_the_cache():
    f = xform.jit(lambda x: softplus(x) * 2.0)
    f(X)
    assert xform.cache_info()["entries"] > 0
    with xform.context("minimal"):
        assert xform.cache_info()["entries"] == 0
        f(X)
    assert xform.cache_info()["entries"] == 0
    with xform.context("default"):      # no switch: the cache is kept
        f(X)
        assert xform.cache_info()["entries"] > 0


def test_primitive_sets():
    minimal, default = xform.extend.primitives("minimal"), xform.extend.primitives("default")
    assert minimal < default
    assert set(default - minimal) == {p for p, r in RULES.items() if r.decomposition}
    assert {xform.extend.logsumexp_p, xform.extend.softplus_p} <= default - minimal


def reduction_args(draw):
    shape = draw(xst.shapes(min_dims=1, max_dims=3))
    x = draw(xst.arrays(shape, draw(xst.float_dtypes), low=-5.0, high=5.0))
    axes = tuple(sorted(draw(st.sets(st.integers(0, len(shape) - 1)))))
    return (x,), {"axes": axes}


def unary_args(draw):
    shape = draw(xst.shapes(max_dims=2))
    return (draw(xst.arrays(shape, draw(xst.float_dtypes), low=-5.0, high=5.0)),), {}


def fused_region_args(draw):
    """A fused element-wise region (what xform.passes.fuse makes), both vjp strategies."""
    from xform.passes.fuse import NDUAL_MAX_WIDTH
    shape, dtype = draw(xst.shapes(max_dims=2)), draw(xst.float_dtypes)
    x, y = (draw(xst.arrays(shape, dtype, low=-2.0, high=2.0)) for _ in range(2))
    region = xform.make_graph(lambda x, y: np.sin(x) * y + np.exp(-x))(x, y)
    return (x, y), {"max_width": draw(st.sampled_from([0, NDUAL_MAX_WIDTH])), "region": region}


DecompositionCase = namedtuple("DecompositionCase", "primitive args")
DECOMPOSITION_CASES = [
    DecompositionCase(xform.extend.logsumexp_p, reduction_args),
    DecompositionCase(xform.extend.softplus_p, unary_args),
    DecompositionCase(xform.rules.elementwise.elementwise_p, fused_region_args),
]
EXTEND_CASES = [c for c in DECOMPOSITION_CASES
                if c.primitive in (xform.extend.logsumexp_p, xform.extend.softplus_p)]


def test_every_primitive_with_a_decomposition_has_a_case():
    assert {c.primitive for c in DECOMPOSITION_CASES} == \
        {p for p, r in RULES.items() if r.decomposition is not None}


@pytest.mark.parametrize("case", DECOMPOSITION_CASES, ids=lambda c: c.primitive.name)
@given(data=st.data())
def test_default_only_primitives_agree_with_their_decomposition(case, data):
    args, params = case.args(data.draw)
    decomposition = RULES[case.primitive].decomposition

    def prim(*xs):
        return case.primitive.bind(*xs, **params)

    def decomposed(*xs):
        return decomposition(*xs, **params)

    def assert_close(got, want):
        got, want = tree_leaves(got), tree_leaves(want)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert np.asarray(g).dtype == np.asarray(w).dtype
            assert np.allclose(g, w, **tol)
    single = args[0].dtype == np.float32
    tol = dict(rtol=2e-5, atol=2e-5) if single else dict(rtol=1e-9, atol=1e-12)
    assert_close(prim(*args), decomposed(*args))
    assert_close(xform.jit(prim)(*args), xform.jit(decomposed)(*args))
    rng = np.random.default_rng(0)
    tangents = tuple(rng.standard_normal(np.shape(x)).astype(x.dtype) for x in args)
    assert_close(xform.jvp(prim, args, tangents), xform.jvp(decomposed, args, tangents))
    out, pullback = xform.vjp(prim, *args)
    cts = tree_map(lambda o: rng.standard_normal(np.shape(o)).astype(np.asarray(o).dtype), out)
    assert_close(pullback(cts), xform.vjp(decomposed, *args)[1](cts))


@pytest.mark.parametrize("case", EXTEND_CASES, ids=lambda c: c.primitive.name)
@given(data=st.data())
def test_default_only_primitives_pass_check_primitive(case, data):
    args, params = case.args(data.draw)
    check_primitive(case.primitive, *args, params=params, order=2)


def test_logsumexp_and_softplus_are_stable_and_match_scipy():
    scipy_special = pytest.importorskip("scipy.special")
    x = np.array([[1000.0, 1000.0, -3.0], [-np.inf, 0.5, 2.0]])
    for axis in (None, 0, 1, (0, 1)):
        assert np.allclose(logsumexp(x, axis=axis), scipy_special.logsumexp(x, axis=axis))
    assert np.allclose(logsumexp(x, axis=1, keepdims=True),
                       scipy_special.logsumexp(x, axis=1, keepdims=True))
    assert logsumexp(np.full(3, -np.inf)) == -np.inf
    assert np.allclose(xform.grad(lambda x: logsumexp(x))(np.array([1000.0, 1000.0])), 0.5)
    assert np.allclose(softplus(np.array([-1000.0, 0.0, 1000.0])), [0.0, np.log(2), 1000.0])
    assert np.allclose(xform.grad(lambda x: np.sum(softplus(x)))(np.array([-1e3, 0.0, 1e3])),
                       [0.0, 0.5, 1.0])
    assert logsumexp(np.array([1, 2])).dtype == np.float64
    with pytest.raises(xform.ShapeError, match="zero-size") as info:
        xform.jit(lambda x: logsumexp(x, axis=0))(np.zeros((0, 2)))  # line: empty
    assert_points_at(info.value, __file__, "empty")


def test_an_unknown_hook_name_fails_at_registration_naming_the_hooks():
    typo_p = xform.Primitive("library_hook_typo")
    with pytest.raises(xform.RegistrationError, match="'xlaa'.*peephole"):
        xform.extend.register(typo_p, impl=np.negative, abstract_eval=lambda x: x,
                              hooks={"xlaa": np.negative})
    assert typo_p not in xform.ir.registry.RULES
    with pytest.raises(LookupError, match="no hook named 'peep_hole'"):
        xform.ir.registry.hooks_named("peep_hole")


def test_hooks_given_as_names_or_as_a_record_are_one_record_and_extend_keeps_the_others():
    hooked_p = xform.Primitive("library_hooked")
    lowering = np.negative
    xform.extend.register(hooked_p, impl=np.negative, abstract_eval=lambda x: x,
                          hooks={"xla": lowering})
    try:
        assert xform.ir.registry.RULES[hooked_p].hooks == xform.extend.Hooks(xla=lowering)
        xform.extend.extend(hooked_p, hooks=xform.extend.Hooks(takes_floats=True))
        assert xform.ir.registry.RULES[hooked_p].hooks == xform.extend.Hooks(
            xla=lowering, takes_floats=True)
        assert xform.ir.registry.hooks_named("xla")[hooked_p] is lowering
    finally:
        del xform.ir.registry.RULES[hooked_p]
