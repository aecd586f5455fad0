"""threaded_map: values and derivatives (both modes, second order, vmap) against the plain
vectorized function, closures, out=, bad input leaving out untouched, thread counts,
redefinition."""
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform import threaded_map
from xform.rules import threaded_map as tm_module
from xform.runtime import executors
from xform.testing import check_grads, check_primitive
from xform.testing import strategies as xst

THIS_FILE = "test_threaded_map.py"
f32, f64, i64 = np.dtype(np.float32), np.dtype(np.float64), np.dtype(np.int64)


def bench_f(x):
    return np.tanh(x) * np.exp(-x * x) + np.sin(x)


@xform.function
def smooth(x):
    return np.tanh(x) + 0.5 * x


# name, scalar function (also valid on whole arrays: the reference), element dtypes
MapCase = namedtuple("MapCase", "name f dtypes")
CASES = [
    MapCase("bench", bench_f, (f64,)),
    MapCase("double", lambda x: 2 * x, (f64,)),  # a non-primitive f: the seed review's bug
    MapCase("two_inputs", lambda x, y: np.sin(x) * y + x / (1 + y * y), (f64, f64)),
    MapCase("float32_and_float64", lambda x, y: np.exp(x) * y, (f32, f64)),
    MapCase("float32_in_float64_out", lambda x: x.astype(np.float64) ** 2 + x, (f32,)),
    MapCase("callee", lambda x: smooth(x) * x, (f64,)),
    MapCase("int_and_float", lambda i, x: x * i + np.cos(x), (i64, f64)),
]


def arrays_for(case, shape):
    return st.tuples(*[xst.arrays(shape, d, low=-1.5, high=1.5) for d in case.dtypes])


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_values_match_the_vectorized_function(case, data):
    xs = data.draw(arrays_for(case, data.draw(xst.shapes(min_dims=1, max_dims=2))))
    got = threaded_map(case.f, *xs, chunk_size=3)
    expected = case.f(*xs)
    assert got.shape == expected.shape and got.dtype == expected.dtype
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    staged = xform.jit(lambda *xs: threaded_map(case.f, *xs))(*xs)
    np.testing.assert_array_equal(staged, got)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
@given(data=st.data())
def test_derivatives_both_modes_to_second_order(case, data):
    xs = data.draw(arrays_for(case, (4,)))
    check_grads(lambda *xs: threaded_map(case.f, *xs, chunk_size=3), xs, order=2)


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_gradient_equals_the_vectorized_gradient(case):
    rng = np.random.default_rng(0)
    xs = [rng.uniform(-1.5, 1.5, 7).astype(d) for d in case.dtypes]
    weights = rng.standard_normal(7)
    argnums = tuple(i for i, d in enumerate(case.dtypes) if d.kind == "f")
    got = xform.grad(lambda *xs: np.sum(threaded_map(case.f, *xs) * weights), argnums)(*xs)
    expected = xform.grad(lambda *xs: np.sum(case.f(*xs) * weights), argnums)(*xs)
    for g, e in zip(got, expected):
        assert g.dtype == e.dtype
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-6)


def test_where_and_clip_away_from_their_kinks():
    def piecewise(x):
        return np.where(x > 0, np.clip(x, 0.1, 1.5), x ** 3)
    x = np.array([-1.2, -0.4, 0.05, 0.7, 1.9])
    np.testing.assert_array_equal(threaded_map(piecewise, x, chunk_size=2), piecewise(x))
    check_grads(lambda v: threaded_map(piecewise, v, chunk_size=2), (x,), order=2)


def test_hessian_vector_product_forward_over_reverse():
    x, t = np.linspace(-1.0, 1.0, 6), np.linspace(0.5, -0.3, 6)
    hvp = xform.jvp(xform.grad(lambda v: np.sum(threaded_map(bench_f, v))), (x,), (t,))[1]
    expected = xform.jvp(xform.grad(lambda v: np.sum(bench_f(v))), (x,), (t,))[1]
    np.testing.assert_allclose(hvp, expected, rtol=1e-10)
    np.testing.assert_allclose(xform.hessian(lambda v: np.sum(threaded_map(bench_f, v)))(x),
                               xform.hessian(lambda v: np.sum(bench_f(v)))(x), rtol=1e-10)


def test_linearize_keeps_the_primal_map_in_the_forward_part():
    x, t = np.linspace(-1, 1, 6), np.linspace(0.5, -0.3, 6)
    out, f_jvp = xform.linearize(lambda v: threaded_map(bench_f, v), x)
    np.testing.assert_array_equal(out, bench_f(x))
    np.testing.assert_allclose(f_jvp(t), xform.jvp(bench_f, (x,), (t,))[1], rtol=1e-12)


def test_vmap_of_values_and_gradients():
    xs, ys = np.linspace(-1, 1, 12).reshape(3, 4), np.linspace(2, 3, 4)
    two = CASES[2].f
    got = xform.vmap(lambda x, y: threaded_map(two, x, y), in_axes=(0, None))(xs, ys)
    np.testing.assert_allclose(got, two(xs, ys[None]))
    got = xform.vmap(lambda x, y: threaded_map(two, x, y), in_axes=(1, None))(xs.T, ys)
    np.testing.assert_allclose(got, two(xs, ys[None]))
    grads = xform.vmap(xform.grad(lambda v: np.sum(threaded_map(bench_f, v))))(xs)
    np.testing.assert_allclose(grads, xform.vmap(xform.grad(lambda v: np.sum(bench_f(v))))(xs))


def test_vmap_over_a_closed_over_scalar_maps_it_too():
    xs, scales = np.linspace(-0.5, 1.5, 5), np.array([0.5, 2.0, -1.0])
    got = xform.vmap(lambda a: threaded_map(lambda x: a * np.sin(x) + a, xs))(scales)
    np.testing.assert_allclose(got, scales[:, None] * np.sin(xs) + scales[:, None])
    grads = xform.vmap(xform.grad(
        lambda a: np.sum(threaded_map(lambda x: a * a * np.sin(x), xs))))(scales)
    np.testing.assert_allclose(grads, 2 * scales * np.sum(np.sin(xs)))


def test_the_primitive_passes_the_battery():
    x, y = np.array([0.3, -0.8, 1.1]), np.array([1.5, 0.2, -0.4])
    graph = xform.make_graph(lambda a, x, y: threaded_map(
        lambda x, y: a * np.sin(x) * y + x, x, y))(0.7, x, y)
    eqn = graph.equations[-1]
    assert eqn.primitive is tm_module.threaded_map_p
    check_primitive(tm_module.threaded_map_p, x, y, np.float64(0.7), params=dict(eqn.params),
                    order=2)


# -- closures ------------------------------------------------------------------------------

def test_closures_over_constants():
    xs, w, c = np.linspace(-0.5, 1.5, 9), np.array([0.5, -2.0, 3.0]), 3.0
    np.testing.assert_allclose(threaded_map(lambda x: c * x + w[1] * np.sum(w), xs),
                               c * xs + w[1] * np.sum(w))
    np.testing.assert_allclose(xform.grad(lambda v: np.sum(threaded_map(
        lambda x: w[2] * np.sin(x), v)))(xs), w[2] * np.cos(xs))


def test_closure_over_a_traced_scalar_gets_the_summed_gradient():
    xs = np.linspace(-0.5, 1.5, 9)
    got = xform.grad(lambda a: np.sum(threaded_map(lambda x: a * np.sin(x), xs)))(2.0)
    np.testing.assert_allclose(got, np.sum(np.sin(xs)))
    second = xform.grad(xform.grad(
        lambda a: np.sum(threaded_map(lambda x: a ** 3 * np.sin(x), xs))))(2.0)
    np.testing.assert_allclose(second, 6 * 2.0 * np.sum(np.sin(xs)))


def test_a_weakly_typed_closure_keeps_the_element_dtype():
    xs = np.linspace(-0.5, 1.5, 1000).astype(np.float32)  # float64 math would round apart
    got = xform.jit(lambda a: threaded_map(lambda x: a * np.sin(x), xs))(0.1)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, 0.1 * np.sin(xs))


def test_closures_over_traced_values_both_modes_to_second_order():
    xs = np.linspace(-1, 1, 5)
    check_grads(lambda a, v: threaded_map(lambda x: a * np.sin(x) + a * a * x, v),
                (np.float64(0.7), xs), order=2)
    # a closed-over array: indexing and reductions of it run once, outside the parallel part
    check_grads(lambda w, v: threaded_map(lambda x: w[0] * np.exp(w[1] * x) + np.sum(w * w),
                                          v), (np.array([0.5, -0.3, 0.2]), xs), order=2)


def test_closure_graph_keeps_the_indexing_outside_the_map():
    graph = xform.make_graph(lambda w, v: threaded_map(lambda x: w[0] * x, v))(
        np.ones(3), np.ones(4))
    top = [eqn.primitive.name for eqn in graph.equations]
    assert top.count("threaded_map") == 1 and top.index("threaded_map") == len(top) - 1
    body = graph.equations[-1].params["graph"]
    assert [eqn.primitive.name for eqn in body.equations] == ["multiply"]


# -- out=, shapes, empty input, threads -----------------------------------------------------

def test_out_is_written_in_place_and_returned():
    x = np.linspace(-1, 1, 10).astype(np.float32)
    out = np.full(10, np.nan)  # float64: float32 results are stored safely
    assert threaded_map(lambda x: np.sin(x) * x, x, out=out, chunk_size=4) is out
    np.testing.assert_array_equal(out, (np.sin(x) * x).astype(np.float64))


def test_out_may_be_an_input_or_a_strided_view():
    x = np.linspace(-1, 1, 10)
    expected = bench_f(x)
    threaded_map(bench_f, x, out=x, chunk_size=3)
    np.testing.assert_array_equal(x, expected)
    base = np.zeros(20)
    threaded_map(bench_f, np.linspace(-1, 1, 10), out=base[::2])
    np.testing.assert_array_equal(base[::2], expected)
    assert not np.any(base[1::2])
    y = np.linspace(0, 1, 6)
    shifted = np.zeros(7)
    shifted[:6] = y
    threaded_map(lambda a, b: a + b, shifted[:6], shifted[1:], out=shifted[1:])
    np.testing.assert_array_equal(shifted[1:], y + np.append(y[1:], 0.0))


def test_any_shape_zero_dimensional_and_empty_inputs():
    x = np.arange(12.0).reshape(3, 4).T  # not contiguous
    np.testing.assert_array_equal(threaded_map(bench_f, x, chunk_size=5), bench_f(x))
    scalar = threaded_map(bench_f, 0.5)
    assert scalar.shape == () and scalar == bench_f(0.5)
    empty = threaded_map(bench_f, np.zeros(0))
    assert empty.shape == (0,) and empty.dtype == np.float64
    assert xform.grad(lambda v: np.sum(threaded_map(bench_f, v)))(np.zeros(0)).shape == (0,)
    assert threaded_map(bench_f, np.zeros((0, 3)), out=np.zeros((0, 3))).shape == (0, 3)


def test_results_are_identical_for_any_thread_count():
    x = np.random.default_rng(1).standard_normal(40_000)  # several default chunks
    loss = [xform.grad(lambda v, n=n: np.sum(threaded_map(bench_f, v, num_threads=n)))
            for n in (1, 2, 4)]
    primal = [threaded_map(bench_f, x, num_threads=n) for n in (1, 2, 4)]
    small = [threaded_map(bench_f, x[:100], num_threads=n, chunk_size=7) for n in (1, 2, 4)]
    for results in (primal, small, [g(x) for g in loss]):
        for r in results[1:]:
            np.testing.assert_array_equal(r, results[0])
    np.testing.assert_allclose(primal[0], bench_f(x), rtol=1e-12)


def test_one_thread_never_touches_the_pool(monkeypatch):
    def no_pool():
        raise AssertionError("the pool was used")
    monkeypatch.setattr(executors, "_shared_pool", no_pool)
    x = np.linspace(-1, 1, 50)
    np.testing.assert_array_equal(threaded_map(bench_f, x, num_threads=1, chunk_size=4),
                                  bench_f(x))
    with pytest.raises(AssertionError, match="pool"):
        threaded_map(bench_f, x, num_threads=2, chunk_size=4)


def test_numpy_error_state_reaches_the_worker_threads():
    x = -np.ones(64)
    with np.errstate(invalid="raise"), pytest.raises(FloatingPointError):
        threaded_map(np.log, x, num_threads=4, chunk_size=8)


def test_staged_once_per_dtypes_and_printed_as_one_equation():
    def square_plus(x):
        return x * x + 1.0
    x = np.linspace(0, 1, 5)
    builds = xform.cache_info()["builds"]
    threaded_map(square_plus, x)
    threaded_map(square_plus, x + 1)
    assert xform.cache_info()["builds"] == builds + 1
    threaded_map(square_plus, x.astype(np.float32))
    assert xform.cache_info()["builds"] == builds + 2
    text = str(xform.make_graph(lambda v: np.sum(threaded_map(square_plus, v)))(x))
    assert text.count("threaded_map[") == 1 and "multiply" in text


def helper(x):
    return np.sin(x)


def uses_helper(x):
    return helper(x) * 2.0


def test_redefining_what_f_calls_restages_it():
    global helper
    x = np.linspace(-1, 1, 5)
    loss = xform.grad(lambda v: np.sum(threaded_map(uses_helper, v)))
    np.testing.assert_allclose(threaded_map(uses_helper, x), 2 * np.sin(x))
    np.testing.assert_allclose(loss(x), 2 * np.cos(x))
    original = helper
    try:
        helper = np.cos
        np.testing.assert_allclose(threaded_map(uses_helper, x), 2 * np.cos(x))
        np.testing.assert_allclose(loss(x), -2 * np.sin(x))
    finally:
        helper = original


# -- bad input: a clear xform error, out and the inputs untouched ---------------------------

shared = []


def appends(x):
    shared.append(x)
    return x


class Counter:
    def __init__(self):
        self.calls = 0

    def scaled(self, x):
        self.calls += 1
        return 2.0 * x


@xform.function
def halvings(x, n):
    return xform.cond(n > 0, lambda: halvings(x, n - 1) * 0.5, lambda: x)


counts = np.zeros(2)


def increments(x):
    counts[0] += 1.0
    return x


def branches(x):
    if x > 0:
        return x
    return -x


X3, X4, W3 = np.linspace(0, 1, 3), np.linspace(0, 1, 4), np.array([1.0, 2.0, 3.0])
READ_ONLY = np.zeros(3)
READ_ONLY.flags.writeable = False
BAD = {
    "unequal shapes": lambda out: threaded_map(lambda x, y: x + y, X3, X4, out=out),
    "non-numeric input": lambda out: threaded_map(np.sin, np.array(["a", "b", "c"]), out=out),
    "out of another shape": lambda out: threaded_map(np.sin, X4, out=out),
    "unsafe out dtype": lambda out: threaded_map(np.sin, X3, out=out.view(np.int64)),
    "out not an array": lambda out: threaded_map(np.sin, X3, out=[0.0, 0.0, 0.0]),
    "read-only out": lambda out: threaded_map(np.sin, X3, out=READ_ONLY),
    "f returns a tuple": lambda out: threaded_map(lambda x: (x, x), X3, out=out),
    "f returns an array": lambda out: threaded_map(lambda x: x * W3, X3, out=out),
    "f reduces": lambda out: threaded_map(lambda x: np.sum(x) * 2, X3, out=out),
    "f reshapes": lambda out: threaded_map(lambda x: np.reshape(x, (1,)), X3, out=out),
    "f mutates shared state": lambda out: threaded_map(appends, X3, out=out),
    "f's callee mutates shared state": lambda out: threaded_map(lambda x: appends(x) * 2.0, X3,
                                                                out=out),
    "f writes a global array": lambda out: threaded_map(increments, X3, out=out),
    "f mutates its instance": lambda out: threaded_map(Counter().scaled, X3, out=out),
    "f branches in Python": lambda out: threaded_map(branches, X3, out=out),
    "f recurses": lambda out: threaded_map(lambda x: halvings(x, np.int64(2)), X3, out=out),
    "zero threads": lambda out: threaded_map(np.sin, X3, out=out, num_threads=0),
    "negative chunks": lambda out: threaded_map(np.sin, X3, out=out, chunk_size=-2),
    "fractional threads": lambda out: threaded_map(np.sin, X3, out=out, num_threads=1.5),
    "no inputs": lambda out: threaded_map(np.sin, out=out),
    "f not callable": lambda out: threaded_map(3.0, X3, out=out),
}


@pytest.mark.parametrize("name", list(BAD))
def test_bad_input_raises_and_leaves_out_untouched(name):
    out = np.full(3, 7.0)
    inputs = [X3.copy(), X4.copy(), W3.copy()]
    with pytest.raises(xform.XformError) as info:
        BAD[name](out)
    assert THIS_FILE in str(info.value), str(info.value)
    np.testing.assert_array_equal(out, 7.0)
    for before, now in zip(inputs, (X3, X4, W3)):
        np.testing.assert_array_equal(before, now)
    shared.clear()  # f's own mutation happened while it was staged; it is reported, not undone


def test_bad_input_under_staging():
    with pytest.raises(xform.ShapeError, match="equal shapes") as info:
        xform.jit(lambda x, y: threaded_map(lambda a, b: a * b, x, y))(X3, X4)
    assert THIS_FILE in str(info.value)
    out = np.zeros(3)
    with pytest.raises(xform.XformError, match="out= cannot be used inside a staged"):
        xform.jit(lambda x: threaded_map(np.sin, X3, out=out) * x)(X3)
    assert not np.any(out)
    with pytest.raises(xform.XformError, match="element-wise") as info:
        xform.grad(lambda x: np.sum(threaded_map(lambda e: np.cumsum(e)[0], x)))(X3)
    assert THIS_FILE in str(info.value)
