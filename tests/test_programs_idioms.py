"""A newcomer's programs in Python's idioms (builtins, comprehensions, `int()` loop counts,
`and`/`or`, f-strings, checkpointed helpers with `if` inside), run through every transform
as written, on one transformed object called alternately on both sides of each decision, and
checked against eager numpy, autograd and finite differences."""
import collections
import copy
import functools
import math

import autograd
import autograd.numpy as anp
import numpy as np
import pytest

import xform
from xform.errors import ConcretizationError
from tests.source_lines import assert_points_at
from tests.test_values import central_difference


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


def second_difference(f, x, eps=1e-4):
    return (f(x + eps) - 2 * f(x) + f(x - eps)) / eps ** 2


# -- int() and truth values of differentiated floats: piecewise constant, zero derivative --

def exp_series(a):
    """exp(a) summed to int(a) + 1 terms: the loop count read from the data."""
    n = int(a) + 1
    total = 0.0
    term = 1.0
    for k in range(n):
        total += term
        term = term * a / (k + 1)
    return total


def exp_series_autograd(a, n):
    total, term = 0.0, 1.0
    for k in range(n):
        total = total + term
        term = term * a / (k + 1)
    return total


def or_default(a):
    """`y or default`: Python's `or` asks the float itself for its truth value."""
    scale = (a > 0) and a * 2.0 or a * -3.0
    return scale * a


@pytest.mark.parametrize("transform", ["jvp", "jacfwd", "hessian", "jvp_of_grad",
                                       "linearize"])
def test_forward_mode_through_int_and_truth_of_a_differentiated_float(transform):
    points = [0.8, 2.7, 4.2, 1.3, 0.8, 2.7]      # 1, 3, 5, 2, 1, 3 terms: paths switch
    if transform == "jvp":
        run = lambda f, a: xform.jvp(f, (a,), (1.0,))[1]
        expected = lambda f, a: central_difference(f, a)
    elif transform == "jacfwd":
        run = lambda f, a: xform.jacfwd(f)(a)
        expected = lambda f, a: central_difference(f, a)
    elif transform == "linearize":
        run = lambda f, a: xform.linearize(f, a)[1](1.0)
        expected = lambda f, a: central_difference(f, a)
    elif transform == "hessian":
        run = lambda f, a: xform.hessian(f)(a)
        expected = second_difference
    else:
        run = lambda f, a: xform.jvp(xform.grad(f), (a,), (1.0,))[1]
        expected = second_difference
    for f in (exp_series, or_default):
        for a in points + [-p for p in points[:3]]:
            assert run(f, a) == pytest.approx(expected(f, a), rel=1e-5, abs=1e-6), (f, a)


@pytest.mark.filterwarnings("ignore:Output seems independent")
def test_int_loop_count_gradients_match_autograd_with_the_count_given():
    hess = xform.hessian(exp_series)
    for a in [0.8, 2.7, 4.2, 2.7, 0.8]:
        n = int(a) + 1
        second = autograd.grad(autograd.grad(exp_series_autograd))(a, n)
        assert hess(a) == pytest.approx(second, rel=1e-12)


def test_float_of_a_differentiated_value_is_still_refused_in_forward_mode():
    def cut(x):
        return x * float(x)  # line: float-cut
    with pytest.raises(ConcretizationError, match="float") as info:
        xform.jvp(cut, (1.5,), (1.0,))
    assert_points_at(info.value, __file__, "float-cut", "cut")


# -- checkpoint of a function with Python control flow --------------------------------------

@xform.checkpoint
def soft_threshold(x, t=0.5):
    """A checkpointed helper that branches on its data, as written for numpy."""
    out = np.zeros_like(x)
    for i in range(len(x)):
        if x[i] > t:
            out[i] = x[i] - t
        elif x[i] < -t:
            out[i] = x[i] + t
    return out


def lasso_loss(x):
    return np.sum(soft_threshold(x) ** 2) + 0.1 * np.sum(x ** 2)


def lasso_loss_eager(x):
    shrunk = np.sign(x) * np.maximum(np.abs(x) - 0.5, 0.0)
    return np.sum(shrunk ** 2) + 0.1 * np.sum(x ** 2)


POINTS = [np.array([0.9, -1.4, 0.2]), np.array([-0.3, 2.0, -0.8]),
          np.array([0.1, 0.1, 1.7])]


def test_checkpoint_with_python_branches_on_every_transform():
    grad, jit, hess = xform.grad(lasso_loss), xform.jit(lasso_loss), xform.hessian(lasso_loss)
    for x in POINTS + POINTS:
        assert jit(x) == pytest.approx(lasso_loss_eager(x), rel=1e-14)
        assert grad(x) == pytest.approx(central_difference(lasso_loss_eager, x), rel=1e-6)
        diag = 2 * (np.abs(x) > 0.5) + 0.2
        assert hess(x) == pytest.approx(np.diag(diag), abs=1e-12)


def test_checkpoint_with_python_branches_under_vmap_lanes_that_disagree():
    xs = np.stack(POINTS)
    assert np.allclose(xform.vmap(lasso_loss)(xs), [lasso_loss_eager(x) for x in POINTS],
                       rtol=1e-14)
    grads = xform.vmap(xform.grad(lasso_loss))(xs)
    for g, x in zip(grads, POINTS):
        assert g == pytest.approx(central_difference(lasso_loss_eager, x), rel=1e-6)


def test_checkpoint_of_a_while_loop_on_data_matches_autograd():
    def newton_sqrt(a):
        x = a
        while abs(x * x - a) > 1e-12 * a:
            x = 0.5 * (x + a / x)
        return x

    def loss(a):
        return xform.checkpoint(newton_sqrt)(a) * a

    grad = xform.grad(loss)
    for a in [4.0, 0.01, 90.0, 4.0]:
        assert grad(a) == pytest.approx(1.5 * np.sqrt(a), rel=1e-10)
        assert grad(a) == pytest.approx(autograd.grad(lambda v: newton_sqrt(v) * v)(a),
                                        rel=1e-12)


# -- print and f-strings of traced values -------------------------------------------------

def logged_loss(w):
    loss = np.sum(np.tanh(w) ** 2)
    message = f"loss={loss:.4f} w0={w[0]:+.2f}"
    print(message, loss)
    return loss


def test_fstring_and_print_show_the_call_values_while_staging(capsys):
    w = np.array([0.3, -1.2, 2.0])
    grad = xform.grad(logged_loss)(w)
    assert grad == pytest.approx(autograd.grad(
        lambda v: anp.sum(anp.tanh(v) ** 2))(w), rel=1e-14)
    loss = np.sum(np.tanh(w) ** 2)
    assert capsys.readouterr().out == f"loss={loss:.4f} w0=+0.30 {loss}\n"
    assert xform.jit(logged_loss)(2 * w) == logged_loss(2 * w)


def percent_logged_loss(w):
    loss = np.sum(np.tanh(w) ** 2)
    print("loss %.4f, %d positive" % (loss, np.sum(w > 0)))
    return loss


def test_percent_formatting_shows_values_without_a_path_per_value(capsys, recwarn):
    # the loss is shown unguarded (not a path per loss); the count, an integer whose text
    # could pick something, is guarded: a path per count (2 and 3 here)
    jit = xform.jit(percent_logged_loss)
    points = [np.array([0.3, -1.2, 2.0]) + k for k in range(10)]
    for w in points:
        assert jit(w) == percent_logged_loss(w)
    counts = {int(np.sum(w > 0)) for w in points}
    assert [n for name, n in xform.cache_info()["paths"].items()
            if "percent_logged_loss" in name] == [len(counts)]
    assert not [w for w in recwarn if issubclass(w.category, xform.PathLimitWarning)]
    grad = xform.grad(percent_logged_loss)(points[0])
    assert grad == pytest.approx(central_difference(percent_logged_loss, points[0]), rel=1e-6)
    loss = np.sum(np.tanh(points[0]) ** 2)
    assert capsys.readouterr().out.splitlines()[-1] == f"loss {loss:.4f}, 2 positive"


_WEIGHTS = {"w0": 1.0, "w1": 10.0, "w2": 100.0}


@pytest.mark.parametrize("key", [lambda i: f"w{i}", lambda i: "w" + str(i),
                                 lambda i: "w%d" % i], ids=["fstring", "str", "percent"])
def test_the_text_of_a_traced_integer_picks_what_eager_numpy_picks_on_every_call(key):
    # an integer's text may key a dict: one transformed object, called alternately, must not
    # keep the first call's pick
    def pick(x, i):
        return _WEIGHTS[key(i)] * x
    jit, grad = xform.jit(pick), xform.grad(pick)
    for i in [0, 2, 1, 0, 2]:
        assert jit(2.0, np.int64(i)) == pick(2.0, i)
        assert grad(2.0, np.int64(i)) == _WEIGHTS[f"w{i}"]


def test_a_format_spec_without_values_names_the_line():
    def shown_in_a_branch(x):
        def positive(v):
            label = f"{v:.2f}"  # line: format-spec
            return v * len(label)
        return xform.cond(x > 0, positive, lambda v: v, x)
    with pytest.raises(ConcretizationError, match="formatting a traced value") as info:
        xform.grad(shown_in_a_branch)(1.0)
    assert_points_at(info.value, __file__, "format-spec", "positive")


# -- Python's round() and divmod() of traced scalars ----------------------------------------

def bucketed(a):
    """round() to an int for a count, round(x, 1) and divmod as numpy's scalars answer."""
    n = round(a)
    q, r = divmod(a, 1.5)
    total = 0.0
    for k in range(n):
        total += a / (k + 1)
    return total + round(a * a, 1) + r * q + 2.0 * r


def bucketed_autograd(a, n, q):
    total = 0.0
    for k in range(n):
        total = total + a / (k + 1)
    return total + (a - 1.5 * q) * q + 2.0 * (a - 1.5 * q)


def test_round_and_divmod_of_traced_scalars_match_numpy_and_autograd():
    grad, jit = xform.grad(bucketed), xform.jit(bucketed)
    for a in [2.3, 3.7, -2.2, 2.3, 4.9]:
        x = np.float64(a)
        assert jit(x) == bucketed(x)
        n, q = round(x), divmod(x, 1.5)[0]
        assert grad(x) == pytest.approx(autograd.grad(bucketed_autograd)(a, n, q), rel=1e-14)


def cell_weight(a):
    """Interpolation-style cell indices by Python's math module."""
    i = math.floor(a * 4)
    j = math.ceil(a)
    k = math.trunc(-a)
    return a ** 2 * (i + j + k)


def test_math_floor_ceil_trunc_of_a_differentiated_scalar():
    grad, hess = xform.grad(cell_weight), xform.hessian(cell_weight)
    for a in [1.3, -0.7, 2.6, 1.3]:
        count = math.floor(a * 4) + math.ceil(a) + math.trunc(-a)
        assert xform.jit(cell_weight)(a) == cell_weight(a)
        assert grad(a) == pytest.approx(2 * a * count, rel=1e-14)
        assert hess(a) == pytest.approx(2 * count, rel=1e-14)


def test_round_of_a_traced_array_points_to_np_round():
    def rounded(x):
        return np.sum(round(x))  # line: round-array
    with pytest.raises(TypeError, match="round") as info:
        xform.grad(rounded)(np.ones(3))
    assert_points_at(info.value, __file__, "round-array", "rounded")


# -- an `if` inside a custom_vjp function: answered from the call's values, guarded --------------

def test_python_if_inside_a_custom_vjp_function():
    @xform.custom_vjp
    def safe_norm(v):
        n = np.sqrt(np.sum(v * v))
        if n < 1e-12:
            return 0.0 * n
        return n
    safe_norm.defvjp(lambda v: (safe_norm(v), v),
                     lambda v, g: (g * v / max(np.linalg.norm(v), 1e-12),))
    grad = xform.grad(lambda x: safe_norm(x) ** 2)
    for v in [np.array([3.0, 4.0]), np.array([1e-13, 0.0]), np.array([-1.0, 2.0])]:
        expected = 2.0 * v if np.linalg.norm(v) >= 1e-12 else np.zeros(2)
        np.testing.assert_allclose(grad(v), expected)


# -- np.unique with its counts and inverse --------------------------------------------------

def binned_mean_loss(x):
    """Group values by their rounded level, as a histogram-minded newcomer writes it."""
    levels, inverse, counts = np.unique(np.round(x), return_inverse=True, return_counts=True)
    sums = np.zeros(len(levels))
    np.add.at(sums, inverse, x)
    means = sums / counts
    return np.sum((x - means[inverse]) ** 2) + np.sum(levels * counts)


def binned_mean_loss_eager(x):
    total = 0.0
    levels = sorted(set(np.round(x).tolist()))
    for level in levels:
        members = x[np.round(x) == level]
        total = total + np.sum((members - np.mean(members)) ** 2) + level * len(members)
    return total


def test_unique_with_counts_and_inverse_on_one_transformed_object():
    grad, jit = xform.grad(binned_mean_loss), xform.jit(binned_mean_loss)
    points = [np.array([0.6, 0.7, 2.2, 1.9]), np.array([1.1, 3.2, 0.9, 2.7]),
              np.array([0.2, 0.3, 0.1, 0.4])]      # 2, 3 and 1 distinct levels
    for x in points + points:
        assert jit(x) == pytest.approx(binned_mean_loss_eager(x), rel=1e-13)
        assert grad(x) == pytest.approx(central_difference(binned_mean_loss_eager, x),
                                        rel=1e-6, abs=1e-8)
    lanes = xform.vmap(binned_mean_loss)(np.stack(points))
    assert lanes == pytest.approx([binned_mean_loss_eager(x) for x in points], rel=1e-13)


def test_unique_of_nans_is_numpy_s_one_nan():
    x = np.array([[np.nan, 1.0], [np.nan, 3.0]])
    both = lambda v: np.unique(2.0 * v, return_index=True, return_inverse=True,
                               return_counts=True)
    for got, expected in zip(xform.jit(both)(x), both(x)):
        np.testing.assert_array_equal(got, expected)


# -- ndarray methods, copies and lists, as numpy code calls them ----------------------------

def ranked_loss(x):
    """argsort, round, take, put, nonzero and copies, spelled as methods."""
    order = x.argsort()
    y = x.copy()
    y.put([0], 3.0 * x[order[-1]])
    kept = x.take(x.nonzero()[0])
    snapshot = copy.deepcopy({"w": y})["w"]
    snapshot[1] = 0.0               # a copy: y stays as it is
    z = copy.copy(x)
    z[2] = x[0] * x[1]              # a copy: the argument stays as it is
    return np.sum(y ** 2) + np.sum(kept * x.round(1)) + np.sum(snapshot) + np.sum(z ** 2)


def test_ndarray_methods_and_copies_match_numpy_and_finite_differences():
    grad, jit = xform.grad(ranked_loss), xform.jit(ranked_loss)
    points = [np.array([0.57, -1.33, 2.21]), np.array([-0.78, 1.66, 0.32]),
              np.array([1.22, 0.43, -2.44])]
    for x in points + points:
        before = x.copy()
        assert jit(x) == pytest.approx(ranked_loss(x), rel=1e-14)
        assert grad(x) == pytest.approx(central_difference(ranked_loss, x), rel=1e-6)
        np.testing.assert_array_equal(x, before)


def test_tolist_holds_traced_elements_under_jit_and_grad():
    # no value is guarded (one path for every call) and derivatives flow through the list
    def norm_of_list(x):
        values = x.tolist()
        return np.sqrt(sum(v * v for v in values))
    jit, grad = xform.jit(norm_of_list), xform.grad(norm_of_list)
    for x in [np.array([3.0, 4.0]), np.array([5.0, 12.0]), np.array([3.0, 4.0])]:
        assert jit(x) == norm_of_list(x)
        np.testing.assert_allclose(grad(x), x / np.linalg.norm(x), rtol=1e-15)
    assert not [name for name in xform.cache_info()["paths"] if "norm_of_list" in name]


def test_one_argument_where_is_nonzero():
    def positive_part(x):
        return np.sum(x[np.where(x > 0)] ** 2) + np.sum(np.where(x < 0)[0] * x[0])
    grad = xform.grad(positive_part)
    for x in [np.array([0.5, -1.2, 2.0]), np.array([-0.7, 1.5, 0.3]),
              np.array([0.5, -1.2, 2.0])]:
        assert xform.jit(positive_part)(x) == positive_part(x)
        assert grad(x) == pytest.approx(central_difference(positive_part, x), rel=1e-6)


# -- np.vectorize of a Python function that branches --------------------------------------

def hinge(v):
    if v > 0:
        return v ** 2
    return -0.5 * v


def test_vectorize_of_a_branchy_function_on_every_transform():
    def loss(x):
        return np.sum(np.vectorize(hinge)(x) * np.arange(1.0, 4.0))
    def loss_eager(x):
        return np.sum(np.where(x > 0, x ** 2, -0.5 * x) * np.arange(1.0, 4.0))
    points = [np.array([0.5, -1.2, 2.0]), np.array([-0.7, 1.5, -0.3])]
    grad, hess = xform.grad(loss), xform.hessian(loss)
    for x in points + points:
        assert xform.jit(loss)(x) == loss(x)
        assert grad(x) == pytest.approx(autograd.grad(loss_eager)(x), rel=1e-14)
        assert hess(x) == pytest.approx(np.diag(2.0 * (x > 0) * np.arange(1.0, 4.0)))
    assert np.allclose(xform.vmap(loss)(np.stack(points)), [loss(x) for x in points])


def test_vectorize_keeps_numpy_s_output_types():
    clipped = np.vectorize(lambda a: 0 if a < 0 else a)     # first result an int: ints
    pair = np.vectorize(lambda a, b: (a * b, a + b), otypes=[float, float])
    def f(x):
        products, sums = pair(x, 2.0)
        return clipped(x), products, sums
    x = np.array([-1.0, 2.5, 0.7])
    for got, expected in zip(xform.jit(f)(x), f(x)):
        assert got.dtype == expected.dtype
        np.testing.assert_array_equal(got, expected)


def test_vectorize_takes_keyword_arguments_and_excluded_ones():
    scaled = np.vectorize(lambda a, scale=1.0: a * scale if a > 0 else -a)
    shifted = np.vectorize(lambda a, shift: a + shift[0], excluded={"shift"})
    def f(x):
        return np.sum(scaled(x, scale=2.0)) + np.sum(shifted(x, shift=[0.5, 9.0]) ** 2)
    grad = xform.grad(f)
    for x in [np.array([1.0, -2.0]), np.array([-0.5, 3.0]), np.array([1.0, -2.0])]:
        assert xform.jit(f)(x) == f(x)
        h = 1e-6
        fd = [(f(x + h * e) - f(x - h * e)) / (2 * h) for e in np.eye(2)]
        np.testing.assert_allclose(grad(x), fd, rtol=1e-6)


# -- ufunc.outer and np.fromiter of traced values -----------------------------------------

def pairwise_energy(x):
    """Pairwise distances by np.subtract.outer, weights from a generator by np.fromiter."""
    gaps = np.subtract.outer(x, x)
    weights = np.fromiter((1.0 / (k + 1) for k in range(len(x))), dtype=float)
    squares = np.fromiter((v * v for v in x), dtype=float)
    return np.sum(np.multiply.outer(weights, squares)) + np.sum(np.exp(-gaps ** 2))


def test_ufunc_outer_and_fromiter_of_traced_values():
    grad, jit = xform.grad(pairwise_energy), xform.jit(pairwise_energy)
    for x in [np.array([0.5, -1.2, 2.0]), np.array([1.5, 0.2, -0.4]), np.array([0.5, -1.2, 2.0])]:
        assert jit(x) == pytest.approx(pairwise_energy(x), rel=1e-14)
        assert grad(x) == pytest.approx(central_difference(pairwise_energy, x), rel=1e-6)
    # the generator's values are staged, not asked for as floats: one path for every x
    assert xform.cache_info()["paths"] == {}


# -- isinstance checks in the user's code take eager numpy's side --------------------------

def as_vector_loss(x):
    """Library-style argument handling: a scalar becomes a vector, an array stays one."""
    if not isinstance(x, np.ndarray):
        x = np.array([x])
    return np.sum(x ** 2) * len(x)


def doubled_if_scalar(x):
    def scale(v):
        if isinstance(v, (float, np.floating)):
            return 2.0 * v
        return np.sum(v)
    return scale(x[0]) + scale(x)


def test_isinstance_in_user_code_answers_as_for_eager_numpy():
    for f in (as_vector_loss, doubled_if_scalar):
        grad, jit = xform.grad(f), xform.jit(f)
        for x in [np.array([0.5, -1.2, 2.0]), np.array([1.5, 0.2, -0.4])]:
            assert jit(x) == pytest.approx(f(x), rel=1e-14)
            assert grad(x) == pytest.approx(central_difference(f, x), rel=1e-6)
        lanes = xform.vmap(f)(np.ones((2, 3)))
        assert lanes == pytest.approx([f(np.ones(3))] * 2)


# -- 0-d traced values as dict keys and set members hash by value, as numpy's scalars -------

def weighted_label_counts(labels, w):
    """Group weights by integer label with a Counter and a dict, as written for numpy."""
    counts = collections.Counter()
    totals = {}
    for label, v in zip(labels, w):
        counts[label] += 1
        totals[label] = totals.get(label, 0.0) + v
    return sum(totals[k] * counts[k] for k in sorted(counts))


def grouped_by_sign(x):
    groups = collections.defaultdict(list)
    for v in x:
        groups[v > 0].append(v)
    seen = set()
    for v in np.round(x).astype(int):
        seen.add(v)
    return sum(np.sum(np.array(g) ** 2) * (1 + len(g)) for g in groups.values()) + len(seen)


def test_an_lru_cache_keyed_by_traced_values_never_hands_back_another_staging_s():
    @functools.lru_cache(maxsize=None)
    def scaled(v):
        return 2.0 * v

    @functools.lru_cache(maxsize=None)
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def f(x):
        return np.sum(x) * scaled(x[0]) + fib(np.sum(x > 0)) * x[1]
    x = np.array([1.0, 2.0])
    for w in [x, x + 1, x, -x]:
        expected = central_difference(f, w)
        assert xform.jit(f)(w) == f(w)
        assert xform.grad(f)(w) == pytest.approx(expected, rel=1e-6)


def test_dict_keys_and_set_members_of_traced_scalars_group_by_value():
    jit = xform.jit(weighted_label_counts)
    w = np.array([0.5, 1.0, 2.0, -1.0])
    for labels in [np.array([0, 1, 1, 2]), np.array([2, 2, 0, 1]), np.array([3, 3, 3, 3]),
                   np.array([0, 1, 1, 2])]:
        assert jit(labels, w) == weighted_label_counts(labels, w)
        assert xform.grad(weighted_label_counts, argnums=1)(labels, w) == pytest.approx(
            central_difference(lambda v: weighted_label_counts(labels, v), w), rel=1e-6)
    grad = xform.grad(grouped_by_sign)
    for x in [np.array([0.5, -1.2, 2.0]), np.array([-0.7, -1.4, 0.3]),
              np.array([0.5, -1.2, 2.0])]:
        assert xform.jit(grouped_by_sign)(x) == grouped_by_sign(x)
        assert grad(x) == pytest.approx(central_difference(grouped_by_sign, x), rel=1e-6)


def test_an_lru_cache_of_a_traced_count_serves_later_calls_and_eager_numpy():
    @functools.lru_cache(maxsize=None)
    def fib(n):
        return n if n < 2 else fib(n - 1) + fib(n - 2)

    def f(x):
        return fib(np.sum(x > 0)) * x[1]
    for w in [np.array([1.0, 2.0, 3.0]), np.array([-1.0, 2.0, 3.0]),
              np.array([1.0, 2.0, 3.0])]:
        assert xform.jit(f)(w) == f(w)      # the cache holds keys of a finished staging
        assert xform.grad(f)(w) == pytest.approx(central_difference(f, w), rel=1e-6)
        assert f(w) == fib(int(np.sum(w > 0))) * w[1]
