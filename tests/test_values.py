"""Staging with values (xform.ir.values, xform.runtime.paths): Python's questions about traced
values are answered from this call's values and guarded; one transformed object serves every
path, called alternately, and agrees with eager numpy and finite differences on each."""
import copy
import logging
import math
import warnings

import numpy as np
import pytest

import xform
from xform.errors import ConcretizationError, PathLimitError, PathLimitWarning
from xform.testing import check_grads

from bench import values as bench_values
from bench.values import branchy, newton_sqrt
from tests.source_lines import assert_points_at


def march(u0, T=30, dt=0.01):
    """The issue's march (bench.values), 30 steps by default: short enough for hessians."""
    return bench_values.march(u0, T, dt)


def march_eager(u0, T=30, dt=0.01):
    u = u0.copy()
    for _ in range(T - 1):
        u = u + dt * (-u ** 3)
    return np.sum(u)


def central_difference(f, x, eps=1e-6):
    x = np.asarray(x, dtype=float)
    grad = np.zeros_like(x)
    for i in np.ndindex(x.shape):
        step = np.zeros_like(x)
        step[i] = eps
        grad[i] = (f(x + step) - f(x - step)) / (2 * eps)
    return grad if grad.shape else grad[()]


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


def test_if_on_one_transformed_object_called_alternately():
    grad, jit = xform.grad(branchy), xform.jit(branchy)
    for x in [1.5, -2.0, 0.5, -0.25, 3.0, -1.0]:
        assert jit(x) == branchy(x)
        assert grad(x) == pytest.approx(central_difference(branchy, x))
    paths = xform.cache_info()["paths"]
    assert paths["grad of 'branchy'"] == paths["jit of 'branchy'"] == 2


def test_while_on_data_matches_finite_differences_per_trip_count():
    grad = xform.grad(newton_sqrt)
    for a in [2.0, 9.0, 2.0, 0.3, 100.0, 9.0]:
        assert xform.jit(newton_sqrt)(a) == newton_sqrt(a)
        assert grad(a) == pytest.approx(0.5 / np.sqrt(a), rel=1e-9)
        assert grad(a) == pytest.approx(central_difference(newton_sqrt, a), rel=1e-6)


def test_preallocated_array_filled_in_a_loop():
    grad = xform.grad(march)
    hessian = xform.hessian(march)
    for u0 in [np.array([0.5, -1.0, 2.0]), np.array([1.0, 1.0, -0.5])]:
        assert xform.jit(march)(u0) == march(u0)
        np.testing.assert_allclose(grad(u0), central_difference(march_eager, u0), rtol=1e-6)
        np.testing.assert_allclose(grad(u0), xform.grad(march_eager)(u0), rtol=1e-12)
        np.testing.assert_allclose(hessian(u0), xform.hessian(march_eager)(u0), rtol=1e-10)
        _, hvp = xform.jvp(grad, (u0,), (np.ones(3),))
        np.testing.assert_allclose(hvp, hessian(u0) @ np.ones(3), rtol=1e-10)
    batch = np.array([[0.5, -1.0, 2.0], [1.0, 1.0, -0.5]])
    np.testing.assert_array_equal(xform.vmap(march)(batch), [march(u) for u in batch])
    np.testing.assert_allclose(xform.vmap(grad)(batch), [grad(u) for u in batch], rtol=1e-14)


# The second derivative of fn(x) ** 3, in closed form.
@pytest.mark.parametrize("fn, points, second", [
    (branchy, [1.5, -2.0, 0.7, -0.3], lambda x: 162 * x if x > 0 else 48 * x),
    (newton_sqrt, [2.0, 9.0, 0.5, 9.0], lambda x: 0.75 / np.sqrt(x))])
def test_other_transforms_on_both_sides(fn, points, second):
    hessian = xform.hessian(lambda x: fn(x) ** 3)
    gradient = xform.grad(lambda x: fn(x) ** 3)
    for x in points:
        assert hessian(x) == pytest.approx(second(x), rel=1e-9)
        _, tangent = xform.jvp(gradient, (x,), (1.0,))
        assert tangent == pytest.approx(second(x), rel=1e-9)
        assert tangent == pytest.approx(central_difference(gradient, x), rel=1e-5)
    check_grads(fn, (points[0],), order=2)
    check_grads(fn, (points[1],), order=2)


def test_vmap_lanes_that_disagree_are_each_right():
    mapped = xform.vmap(branchy)
    mapped_grad = xform.vmap(xform.grad(branchy))
    for xs in [np.array([1.0, 2.0]), np.array([-1.0, 2.0, -3.0]), np.array([-1.0, -2.0]),
               np.array([4.0, -2.0, 5.0])]:
        np.testing.assert_array_equal(mapped(xs), [branchy(x) for x in xs])
        np.testing.assert_array_equal(mapped_grad(xs), [3.0 if x > 0 else 2.0 for x in xs])


def test_vmap_of_a_loop_with_a_trip_count_per_lane():
    xs = np.array([2.0, 9.0, 0.5, 100.0])
    np.testing.assert_allclose(xform.vmap(newton_sqrt)(xs), np.sqrt(xs), rtol=1e-12)
    np.testing.assert_allclose(xform.vmap(xform.grad(newton_sqrt))(xs), 0.5 / np.sqrt(xs),
                               rtol=1e-9)


def test_builtins_over_traced_scalars():
    relu = xform.grad(lambda a: max(0.0, a) * 2)
    assert relu(1.5) == 2.0 and relu(-1.5) == 0.0
    smaller = xform.grad(lambda a, b: min(a, b), argnums=(0, 1))
    assert smaller(1.0, 2.0) == (1.0, 0.0) and smaller(3.0, 2.0) == (0.0, 1.0)
    first = xform.jit(lambda a: sorted([a, 2.0 * a, -a])[0])
    assert first(1.0) == -1.0 and first(-1.0) == -2.0
    both = xform.jit(lambda v: bool(any(v > 0) and all(v < 5)))
    assert both(np.array([1.0, 2.0])) and not both(np.array([1.0, 7.0]))


def test_integers_from_values_index_and_bound_loops():
    def total(v, n):
        return sum(v[i] for i in range(n))
    v = np.array([1.0, -2.0, 3.0])
    jitted = xform.jit(total)
    assert jitted(v, np.int64(2)) == -1.0 and jitted(v, np.int64(3)) == 2.0
    peak = xform.grad(lambda w: w[int(np.argmax(w))] ** 2)
    np.testing.assert_array_equal(peak(v), [0.0, 0.0, 6.0])
    np.testing.assert_array_equal(peak(np.array([5.0, 1.0])), [10.0, 0.0])


def test_float_of_a_value_no_derivative_flows_through():
    jitted = xform.jit(lambda a: a * float(a) + math.sin(a))
    assert jitted(2.0) == 2.0 * 2.0 + math.sin(2.0)
    assert jitted(3.0) == 3.0 * 3.0 + math.sin(3.0)


def test_float_of_a_differentiated_value_raises_at_the_users_line():
    def f(a):
        return a * float(a)  # line: float-cut
    with pytest.raises(ConcretizationError, match="derivative would be cut") as info:
        xform.grad(f)(2.0)
    assert_points_at(info.value, __file__, "float-cut", "f")
    with pytest.raises(ConcretizationError, match="derivative would be cut"):
        xform.grad(lambda a: math.exp(a))(1.0)


def test_float_of_a_value_whose_derivative_is_cut_or_zero_is_answered():
    # the error's hint names stop_gradient as the way to cut on purpose: it must work, as
    # float() of a step function (floor) does, whose derivative is zero
    def scaled(a):
        return a * float(xform.stop_gradient(a)) + a * float(np.floor(2.0 * a))
    for a in [1.3, 2.7, 1.3]:
        assert xform.grad(scaled)(a) == a + np.floor(2.0 * a)
        assert xform.hessian(scaled)(a) == 0.0
        assert xform.jit(scaled)(a) == scaled(a)


def test_abstract_staging_still_refuses_a_question():
    with pytest.raises(ConcretizationError, match="`if`"):
        xform.make_graph(branchy)(xform.ShapedArray((), np.float64))


def test_make_graph_of_values_shows_the_guard():
    text = str(xform.make_graph(branchy)(2.0))
    assert "guard[" in text and "expected=True" in text
    assert "expected=False" in str(xform.make_graph(branchy)(-2.0))


def test_boolean_masks_and_sizes_from_values():
    grad = xform.grad(lambda v: np.sum(v[v > 0] ** 2))
    for v in [np.array([1.0, -2.0, 3.0]), np.array([-1.0, -2.0, 3.0]), np.array([1.0, 2.0])]:
        np.testing.assert_array_equal(grad(v), 2 * v * (v > 0))
    x = np.array([[1.5, -1.0], [0.0, 2.5]])
    for fn in (lambda a: np.nonzero(a > 0), lambda a: np.argwhere(a > 0),
               lambda a: np.flatnonzero(a), lambda a: np.unique(np.round(a)),
               lambda a: np.compress(a.ravel() > 0, a.ravel()),
               lambda a: np.extract(a > 0, a)):
        expected, got = fn(x), xform.jit(fn)(x)
        for e, g in zip(expected if isinstance(expected, tuple) else [expected],
                        got if isinstance(got, tuple) else [got]):
            np.testing.assert_array_equal(g, e)
            assert g.dtype == e.dtype


def test_lists_of_traced_values_to_numpy_functions():
    assert xform.grad(lambda a, b: np.sum([a, b * b]), argnums=1)(1.0, 2.0) == 4.0
    assert xform.grad(lambda a, b: np.mean([a, b * b]))(1.0, 2.0) == 0.5
    assert xform.grad(lambda a: np.max([a, 0.0]))(3.0) == 1.0
    assert xform.grad(lambda a: np.max([a, 0.0]))(-3.0) == 0.0
    norm = xform.grad(lambda a, b: np.linalg.norm([a, b]), argnums=(0, 1))(3.0, 4.0)
    np.testing.assert_allclose(norm, [0.6, 0.8])


def test_matrix_filled_in_a_double_loop():
    def kernel_sum(x):
        K = np.zeros((x.size, x.size))
        for i in range(x.size):
            for j in range(x.size):
                K[i, j] = np.exp(-(x[i] - x[j]) ** 2)
        return np.sum(K)
    x = np.array([0.1, -0.4, 0.9])
    np.testing.assert_allclose(xform.grad(kernel_sum)(x), central_difference(kernel_sum, x),
                               rtol=1e-6)


class Model:
    def __init__(self, scale=2.0):
        self.W = np.array([1.0, -1.0, 0.5])
        self.b = 0.25
        self.name = "linear"
        self.layers = 2

    def loss(self, x):
        out = x
        for _ in range(self.layers):
            out = np.tanh(self.W * out + self.b)
        return np.sum(out ** 2)


def test_plain_objects_are_differentiated_and_rebuilt():
    model, x = Model(), np.array([0.3, -0.2, 0.8])
    grads = xform.grad(lambda m, v: m.loss(v))(model, x)
    assert type(grads) is Model and grads.name == "linear" and grads.layers == 2

    def loss_of(W):
        other = Model()
        other.W = W
        return other.loss(x)
    np.testing.assert_allclose(grads.W, central_difference(loss_of, model.W), rtol=1e-6)
    again = xform.grad(lambda m: m.loss(x))(model)
    np.testing.assert_allclose(again.W, grads.W)


def test_assigning_to_a_plain_object_inside_never_leaks_a_tracer():
    model = Model()
    W = model.W

    def loss(m, W):
        m.W = W      # the autograd habit
        return m.loss(np.ones(3))
    xform.grad(loss, argnums=1)(model, W * 2)
    assert model.W is W


class CallableModel(Model):
    """A model whose `__call__` runs it, as Keras' and torch's habits write one."""

    def __call__(self, x):
        return np.tanh(self.W * x + self.b)


def test_a_callable_plain_object_is_differentiated_as_any_other():
    model, x = CallableModel(), np.array([0.3, -0.2, 0.8])
    grads = xform.grad(lambda m: np.sum(m(x) ** 2))(model)
    assert type(grads) is CallableModel and grads.name == "linear"

    def loss_of(W):
        other = CallableModel()
        other.W = W
        return np.sum(other(x) ** 2)
    np.testing.assert_allclose(grads.W, central_difference(loss_of, model.W), rtol=1e-6)
    np.testing.assert_allclose(grads.b, central_difference(
        lambda b: np.sum(np.tanh(model.W * x + b) ** 2), 0.25), rtol=1e-6)


def _lookup(make_table):
    def lookup(x):
        table = make_table()
        idx = (np.clip(x, 0.0, 0.99) * 5).astype(int)
        return np.sum(table[idx] * x)
    return lookup


@pytest.mark.parametrize("make_table", [
    lambda: np.linspace(0.0, 1.0, 5) ** 2, lambda: np.logspace(0.0, 1.0, 5),
    lambda: np.geomspace(1.0, 2.0, 5), lambda: np.asarray([1.0, 2.0, 4.0, 8.0, 16.0])],
    ids=["linspace", "logspace", "geomspace", "asarray"])
def test_a_table_made_in_the_function_is_indexed_by_traced_integers(make_table):
    lookup, table = _lookup(make_table), make_table()
    grad = xform.grad(lookup)
    for x in [np.array([0.1, 0.5, 0.77]), np.array([0.9, 0.05, 0.3])]:   # other indices
        assert xform.jit(lookup)(x) == lookup(x)
        np.testing.assert_array_equal(grad(x), table[(np.clip(x, 0.0, 0.99) * 5).astype(int)])


def test_an_array_of_numbers_made_by_asarray_takes_traced_writes():
    def f(x):
        y = np.asarray([0.0, 0.0, 1.0])
        y[0] = x * 2.0
        return np.sum(y * y)
    assert xform.grad(f)(1.5) == 12.0 and xform.jit(f)(1.5) == f(1.5)


def test_asarray_of_an_array_is_that_array_while_staging():
    # numpy's asarray(A) returns A itself: a write through it must reach A as in eager
    # numpy (refused for a captured array while staging), never a traced copy
    A = np.zeros(3)

    def f(x):
        y = np.asarray(A)
        return np.sum(y) + x, y is A
    assert f(1.0)[1] and xform.jit(lambda x: f(x)[0])(1.0) == 1.0

    def writes(x):
        y = np.asarray(A)
        y[0] = 5.0
        return x * 2.0
    with pytest.raises(xform.XformError):
        xform.jit(writes)(1.0)


def test_every_call_draws_what_eager_numpy_draws_across_paths():
    def noisy(a):
        rs_draw = np.random.standard_normal()
        if a > 0:
            return a * 2.0 + rs_draw
        return a - rs_draw
    jitted = xform.jit(noisy)
    for seed in range(3):
        for a in [1.0, -1.0, 2.0, -3.0]:
            np.random.seed(seed)
            expected = (noisy(a), np.random.standard_normal())
            np.random.seed(seed)
            assert (jitted(a), np.random.standard_normal()) == expected


def halvings(a):
    n = 0
    while a > 1.0:
        a = a / 2.0
        n += 1
    return a * n


def test_the_path_bound_warns_once_and_stays_right():
    count = halvings
    jitted = xform.jit(count)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for a in 2.0 ** np.arange(1, 14) + 0.5:
            assert jitted(a) == count(a)
    limit = [w for w in caught if issubclass(w.category, PathLimitWarning)]
    assert len(limit) == 1
    assert "while a > 1.0" in str(limit[0].message)
    assert xform.cache_info()["paths"]["jit of 'halvings'"] == xform.config.max_paths


def test_the_strict_setting_raises_past_the_bound():
    xform.config.update("path_limit", "raise")
    xform.config.update("max_paths", 2)
    try:
        jitted = xform.jit(halvings)
        assert jitted(3.0) == halvings(3.0) and jitted(5.0) == halvings(5.0)
        with pytest.raises(PathLimitError, match="while a > 1.0"):
            jitted(9.0)
    finally:
        xform.config.update("path_limit", "warn")
        xform.config.update("max_paths", 8)


def test_explain_logs_every_new_path(caplog, monkeypatch):
    # (a library's logging set-up, dask's, may have disabled the loggers that existed then)
    monkeypatch.setattr(logging.getLogger("xform.paths"), "disabled", False)
    xform.config.update("explain_paths", True)
    try:
        jitted = xform.jit(branchy)
        with caplog.at_level(logging.WARNING, logger="xform.paths"):
            jitted(1.0)
            jitted(-1.0)
            jitted(2.0)     # a path seen before: nothing new to explain
    finally:
        xform.config.update("explain_paths", False)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 1
    assert "if a > 0" in messages[0] and "was True, now False" in messages[0]


def helper_positive(a):
    return a * 3.0


def test_redefining_a_function_only_the_second_path_reached_is_noticed():
    global helper_positive

    def uses(a):
        if a > 0:
            return helper_positive(a)
        return -a
    jitted = xform.jit(uses)
    assert jitted(-1.0) == 1.0
    assert jitted(2.0) == 6.0       # the second path reads helper_positive
    original = helper_positive
    try:
        helper_positive = lambda a: a * 5.0    # noqa: E731
        assert jitted(2.0) == 10.0
    finally:
        helper_positive = original


_DEEP_RNG = np.random.default_rng(0)


def _draw5(x):
    return x + _DEEP_RNG.standard_normal()


def _draw4(x):
    return _draw5(x)


def _draw3(x):
    return _draw4(x)


def _draw2(x):
    return _draw3(x)


def _draw1(x):
    return _draw2(x)


def test_a_draw_past_the_walk_is_never_frozen_silently():
    # Five calls deep the effect walk stops: the second call's staging of the same path finds
    # the hidden draw, warns once, and every call then stages anew. Each call draws once, as
    # eager numpy does: the stream is eager's, draw for draw.
    expected = [x + d for x, d in zip([0.0, 1.0, 0.0, 2.0],
                                      copy.deepcopy(_DEEP_RNG).standard_normal(4))]
    jitted = xform.jit(_draw1)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = [jitted(x) for x in [0.0, 1.0, 0.0, 2.0]]
    np.testing.assert_array_equal(got, expected)
    told = [w for w in caught if issubclass(w.category, xform.UnstagedEffectWarning)]
    assert len(told) == 1 and told[0].filename == __file__


def _twice5(x):
    return x * 2.0


def _twice4(x):
    return _twice5(x)


def _twice3(x):
    return _twice4(x)


def _twice2(x):
    return _twice3(x)


def _twice1(x):
    return _twice2(x)


def test_a_function_past_the_walk_without_effects_is_cached_from_its_second_call():
    jitted = xform.jit(_twice1)
    builds = xform.cache_info()["builds"]
    assert [jitted(x) for x in [1.0, 2.0, 3.0, 4.0]] == [2.0, 4.0, 6.0, 8.0]
    assert xform.cache_info()["builds"] == builds + 2      # the first call's, and the check


_SIGNATURES_RNG = np.random.default_rng(1)


def _signature_draw5(x):
    return x + _SIGNATURES_RNG.standard_normal()


def _signature_draw4(x):
    return _signature_draw5(x)


def _signature_draw3(x):
    return _signature_draw4(x)


def _signature_draw2(x):
    return _signature_draw3(x)


def _signature_draw1(x):
    return _signature_draw2(x)


def test_a_draw_past_the_walk_is_found_for_every_signature():
    # The walk of a function is remembered; what it could not follow is remembered with it,
    # so a second signature's entry is checked as the first one's was.
    rng_copy = copy.deepcopy(_SIGNATURES_RNG)
    jitted = xform.jit(_signature_draw1)
    arguments = [np.zeros(2), np.zeros(2), np.zeros(3), np.zeros(3), np.zeros(3)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", xform.UnstagedEffectWarning)
        got = [jitted(x) for x in arguments]
    for value, x in zip(got, arguments):
        np.testing.assert_array_equal(value, x + rng_copy.standard_normal())


def test_a_large_captured_array_is_warned_about_once(monkeypatch):
    from xform.runtime import dependencies
    monkeypatch.setattr(dependencies, "LARGE_CHECK_BYTES", 1024)   # a small "large" array
    table = np.arange(512.0)

    def lookup(x):
        return x * table[3]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        jitted = xform.jit(lookup)
        assert jitted(2.0) == 6.0 and jitted(3.0) == 9.0
        xform.jit(lambda x: lookup(x) + 1.0)(2.0)
    told = [w for w in caught if issubclass(w.category, xform.CapturedArrayWarning)]
    assert len(told) == 1 and "float64[512]" in str(told[0].message)
    assert told[0].filename == __file__
    table.flags.writeable = False       # the fix the warning names: no check, no warning
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        xform.jit(lambda x: x * table[4])(2.0)
    assert not [w for w in caught if issubclass(w.category, xform.CapturedArrayWarning)]
