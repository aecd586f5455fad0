"""Values while staging inside functions given their own derivative rules: a custom_jvp or
custom_vjp function whose primal, jvp rule, fwd or bwd asks Python about a value (`if`,
`while`, `int()`, `max()`, `float()` of a value no derivative flows through, a boolean mask)
is answered from the call's values and guarded, as outside (docs/control-flow.md); each
transformed object is called alternately on both sides of every decision and compared with
eager numpy, finite differences, and the rule's own derivative where it differs on purpose.
Then results holding strings, None and Python numbers next to arrays (has_aux, jit)."""
import numpy as np
import pytest

import xform
import xform.rules.custom as custom_rules
from xform.errors import ConcretizationError
from tests.source_lines import assert_points_at
from tests.test_values import central_difference


@pytest.fixture(autouse=True)
def fresh_cache():
    xform.clear_cache()
    yield
    xform.clear_cache()


def alternately(points):
    """The points, then again in reverse: each side of a decision follows the other."""
    return list(points) + list(points)[::-1]


# -- a kink: the primal, fwd and bwd each branch on the value ----------------------------------

@xform.custom_vjp
def kink(x):
    if x > 0:
        return x * 3.0
    return x * 2.0


def _kink_fwd(x):
    return kink(x), x


def _kink_bwd(x, ct):
    if x > 0:
        return (ct * 3.0,)
    return (ct * 2.0,)


kink.defvjp(_kink_fwd, _kink_bwd)


def kink_np(x):
    return x * 3.0 if x > 0 else x * 2.0


KINK_POINTS = [1.5, -1.5, 2.0, -0.5]


def test_custom_vjp_branching_in_primal_fwd_and_bwd_under_every_transform():
    grad = xform.grad(kink)
    value_and_grad = xform.value_and_grad(kink)
    jit = xform.jit(kink)
    for x in alternately(KINK_POINTS):
        slope = central_difference(kink_np, x)
        assert grad(x) == pytest.approx(slope)
        value, g = value_and_grad(x)
        assert (value, g) == (kink_np(x), pytest.approx(slope))
        assert jit(x) == kink_np(x)
        out, tangent = xform.jvp(kink, (x,), (1.0,))   # forward mode transposes bwd
        assert (out, tangent) == (kink_np(x), pytest.approx(slope))
        out, pullback = xform.vjp(kink, x)
        assert pullback(2.0) == (pytest.approx(2.0 * slope),)
        out, linear = xform.linearize(kink, x)
        assert (out, linear(1.0)) == (kink_np(x), pytest.approx(slope))
        assert xform.jacfwd(kink)(x) == pytest.approx(slope)
        assert xform.jacrev(kink)(x) == pytest.approx(slope)
        assert xform.grad(xform.checkpoint(kink))(x) == pytest.approx(slope)


def test_a_gradients_first_call_computes_the_bits_of_its_compiled_calls():
    value_and_grad = xform.value_and_grad(
        lambda x: np.sin(kink(x)) * np.exp(hypot_or_gap(x * x + 0.5)))
    for x in alternately([0.7, -0.3, 2.0]):
        first, again = value_and_grad(x), value_and_grad(x)
        assert np.asarray(first).tobytes() == np.asarray(again).tobytes()


def test_vmap_lanes_that_decide_apart_each_equal_the_per_example_result():
    xs = np.array([1.5, -1.5, 2.0, -0.5])
    batched, batched_grad = xform.vmap(kink), xform.vmap(xform.grad(kink))
    for lanes in alternately([xs, -xs, np.abs(xs)]):
        np.testing.assert_array_equal(batched(lanes), [kink_np(x) for x in lanes])
        np.testing.assert_allclose(batched_grad(lanes),
                                   [central_difference(kink_np, x) for x in lanes])


def test_called_twice_inside_a_function_that_branches_too():
    def outer(a, b):
        y = kink(a) + 10.0 * kink(b)
        if y > 0:
            return y ** 2
        return -y

    def outer_np(a, b):
        y = kink_np(a) + 10.0 * kink_np(b)
        return y ** 2 if y > 0 else -y

    grad = xform.grad(outer, argnums=(0, 1))
    points = [(1.0, -1.0), (-1.0, 1.0), (-1.0, -1.0), (1.0, 1.0)]
    for a, b in alternately(points):
        ga, gb = grad(a, b)
        assert ga == pytest.approx(central_difference(lambda t: outer_np(t, b), a))
        assert gb == pytest.approx(central_difference(lambda t: outer_np(a, t), b))
    # One path per pattern of decisions: the two calls' questions are told apart (a frozen
    # or confused path would have been staged again on every call, past the bound).
    assert list(xform.cache_info()["paths"].values()) == [len(points)]


@pytest.mark.parametrize("wrap", [lambda f: kink, xform.checkpoint], ids=["custom_vjp",
                                                                         "checkpoint"])
def test_a_function_staged_apart_called_twice_keeps_one_path_per_pattern(wrap):
    inner = wrap(kink_np)

    def twice(a, b):
        return inner(a) + 10.0 * inner(b)

    def nested(a, b):
        return inner(inner(a) + b)

    grad_twice = xform.grad(twice, argnums=(0, 1))
    grad_nested = xform.grad(nested, argnums=(0, 1))
    slope = {True: 3.0, False: 2.0}
    for a, b in alternately([(1.0, -10.0), (-1.0, 10.0)]):
        assert grad_twice(a, b) == (slope[a > 0], 10.0 * slope[b > 0])
        outer_slope = slope[kink_np(a) + b > 0]
        assert grad_nested(a, b) == (outer_slope * slope[a > 0], outer_slope)
    # the two calls' questions are told apart: two paths each, not one staged per call
    assert sorted(xform.cache_info()["paths"].values()) == [2, 2]


@xform.custom_vjp
def cubic_or_square(x):
    if x > 0:
        return x ** 3
    return -x ** 2


def _cubic_bwd(x, ct):
    if x > 0:
        return (ct * 3.0 * x ** 2,)
    return (ct * -2.0 * x,)


cubic_or_square.defvjp(lambda x: (cubic_or_square(x), x), _cubic_bwd)


def cubic_or_square_np(x):
    return x ** 3 if x > 0 else -x ** 2


def test_second_derivatives_differentiate_the_branching_fwd_and_bwd():
    hessian = xform.hessian(cubic_or_square)
    grad_grad = xform.grad(xform.grad(cubic_or_square))
    for x in alternately([2.0, -3.0, 1.0, -1.0]):
        curvature = central_difference(
            lambda y: central_difference(cubic_or_square_np, y, 1e-4), x, 1e-4)
        assert hessian(x) == pytest.approx(curvature, rel=1e-5)
        assert grad_grad(x) == pytest.approx(curvature, rel=1e-5)
        slope, second = xform.jvp(xform.grad(cubic_or_square), (x,), (1.0,))
        assert (slope, second) == (pytest.approx(central_difference(cubic_or_square_np, x)),
                                   pytest.approx(curvature, rel=1e-5))
    lanes = np.array([2.0, -3.0, 1.0, -1.0])
    np.testing.assert_allclose(xform.vmap(grad_grad)(lanes), [12.0, -2.0, 6.0, -2.0])


def test_a_custom_function_asking_nothing_is_staged_once_per_signature(monkeypatch):
    staged_on_values = []
    stage = custom_rules.stage_function
    monkeypatch.setattr(custom_rules, "stage_function",
                        lambda *args: staged_on_values.append(args) or stage(*args))
    @xform.custom_vjp
    def soft_clip(x):
        return 2.0 * np.tanh(x)
    soft_clip.defvjp(lambda x: (soft_clip(x), x),
                     lambda x, ct: (ct * 2.0 * (1.0 - np.tanh(x) ** 2),))

    def loss(w):
        for _ in range(10):
            w = soft_clip(0.9 * w + 0.1)
        return np.sum(w ** 2)

    def loss_np(w):
        for _ in range(10):
            w = 2.0 * np.tanh(0.9 * w + 0.1)
        return np.sum(w ** 2)

    grad = xform.grad(loss)
    for w in alternately([np.linspace(-1.0, 1.0, 4), np.linspace(-2.0, 0.0, 4)]):
        np.testing.assert_allclose(grad(w), central_difference(loss_np, w), atol=1e-8)
    callee, = soft_clip._callees.values()     # (one per static arguments)
    assert (callee.primal.stage_count, callee._fwd_ref().stage_count) == (1, 1)
    assert staged_on_values == []   # no call's own staging: each call shares these


# -- a clipped gradient: the rule's derivative differs from the function's on purpose --------

def test_bwd_asking_a_cotangents_value_names_the_line():
    @xform.custom_vjp
    def clipped(x):
        return x

    def bwd(x, ct):
        if ct > 1.0:  # line: ct-question
            return (1.0 * ct / ct,)
        return (ct,)
    clipped.defvjp(lambda x: (x, x), bwd)
    with pytest.raises(ConcretizationError) as info:
        xform.grad(lambda x: 5.0 * clipped(x))(2.0)
    assert_points_at(info.value, __file__, "ct-question", "bwd")


@xform.custom_vjp
def clipped_scale(x, bound):
    return x


def _clipped_fwd(x, bound):
    return x, bound


def _clipped_bwd(bound, ct):
    limit = float(bound)     # a value no derivative flows through: answered, guarded
    if limit > 1.0:
        return (np.clip(ct, -limit, limit), None)
    return (np.clip(ct, -1.0, 1.0) * limit, None)


clipped_scale.defvjp(_clipped_fwd, _clipped_bwd)


def test_a_clipped_gradient_whose_bwd_branches_on_a_nondifferentiated_argument():
    grad = xform.grad(lambda x, bound: 5.0 * clipped_scale(x, bound))
    for bound in alternately([2.0, 0.5, 10.0]):
        expected = min(5.0, bound) if bound > 1.0 else 1.0 * bound   # the rule's, not FD's 5
        assert grad(3.0, np.array(bound)) == pytest.approx(expected)


# -- only bwd branches: the primal asks nothing -------------------------------------------------

@xform.custom_vjp
def leaky(x):
    return np.maximum(x, 0.0)


def _leaky_bwd(x, ct):
    if x > 0:
        return (ct,)
    return (0.1 * ct,)


leaky.defvjp(lambda x: (leaky(x), x), _leaky_bwd)


def test_a_bwd_that_branches_on_its_residual_under_grad_jvp_and_vmap():
    grad = xform.grad(leaky)
    for x in alternately([1.0, -1.0, 2.0, -2.0]):
        rule = 1.0 if x > 0 else 0.1    # the rule's derivative (0 below zero by FD)
        assert grad(x) == rule
        assert xform.jvp(leaky, (x,), (1.0,)) == (max(x, 0.0), pytest.approx(rule))
    lanes = np.array([1.0, -1.0, 2.0, -2.0])
    np.testing.assert_allclose(xform.vmap(grad)(lanes), [1.0, 0.1, 1.0, 0.1])
    np.testing.assert_allclose(xform.vmap(grad)(-lanes), [0.1, 1.0, 0.1, 1.0])


# -- a `while` loop: Newton's square root with its implicit derivative --------------------------

@xform.custom_jvp
def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


@newton_sqrt.defjvp
def _newton_sqrt_jvp(primals, tangents):
    (a,), (t,) = primals, tangents
    root = newton_sqrt(a)
    return root, t / (2.0 * root)


def hypot_or_gap(a):
    root = newton_sqrt(a)
    if root > 2.0:
        return root * a
    return root - a


def hypot_or_gap_np(a):
    root = np.sqrt(a)
    return root * a if root > 2.0 else root - a


SQRT_POINTS = [9.0, 2.0, 16.0, 1.0]     # different trip counts, both sides of the `if`


def test_custom_jvp_with_a_while_loop_first_and_second_order():
    grad, hessian = xform.grad(hypot_or_gap), xform.hessian(hypot_or_gap)
    grad_grad = xform.grad(xform.grad(hypot_or_gap))
    jit = xform.jit(hypot_or_gap)
    for a in alternately(SQRT_POINTS):
        assert jit(a) == pytest.approx(hypot_or_gap_np(a), rel=1e-12)
        slope = central_difference(hypot_or_gap_np, a)
        assert grad(a) == pytest.approx(slope, rel=1e-7)
        curvature = central_difference(lambda b: central_difference(hypot_or_gap_np, b, 1e-4),
                                       a, 1e-4)
        assert hessian(a) == pytest.approx(curvature, rel=1e-5)
        assert grad_grad(a) == pytest.approx(curvature, rel=1e-5)
        value, second = xform.jvp(xform.grad(hypot_or_gap), (a,), (1.0,))
        assert (value, second) == (pytest.approx(slope, rel=1e-7),
                                   pytest.approx(curvature, rel=1e-5))


def test_vmap_of_a_gradient_through_a_while_loop_with_disagreeing_trip_counts():
    lanes = np.array(SQRT_POINTS)
    vmapped = xform.vmap(xform.grad(hypot_or_gap))
    for batch in alternately([lanes, lanes[::-1] * 3.0]):
        np.testing.assert_allclose(vmapped(batch),
                                   [central_difference(hypot_or_gap_np, a) for a in batch],
                                   rtol=1e-7)


# -- int(), max(), a boolean mask -------------------------------------------------------------

@xform.custom_vjp
def top_positive_sum(x, n):
    count = int(n)
    return max(0.5, np.sum(x[x > 0][:count]))


def _top_fwd(x, n):
    return top_positive_sum(x, n), (x, n)


def _top_bwd(residuals, ct):
    x, n = residuals
    grads = np.zeros_like(x)
    grads[np.flatnonzero(x > 0)[:int(n)]] = ct
    return (np.clip(grads, -0.5, 0.5), None)    # clipped on purpose


top_positive_sum.defvjp(_top_fwd, _top_bwd)


def top_positive_sum_np(x, n):
    return max(0.5, np.sum(x[x > 0][:int(n)]))


def test_int_max_and_a_boolean_mask_inside_a_custom_vjp_function():
    grad, jit = xform.grad(top_positive_sum), xform.jit(top_positive_sum)
    cases = [(np.array([1.0, -2.0, 3.0]), 2.0), (np.array([-1.0, 2.0, 3.0]), 1.0),
             (np.array([4.0, 2.0, 3.0]), 2.0), (np.array([-0.1, -0.2, 0.1]), 2.0)]
    for x, n in alternately(cases):
        assert jit(x, np.array(n)) == top_positive_sum_np(x, n)
        expected = np.zeros(3)      # the rule's: 0.5 where max() picked the constant too
        expected[np.flatnonzero(x > 0)[:int(n)]] = 0.5
        np.testing.assert_array_equal(grad(x, np.array(n)), expected)


# -- float(): of a value no derivative flows through it works; of one it would cut, it raises -

@xform.custom_jvp
def scaled_by_float(x, scale):
    return x * float(scale)


@scaled_by_float.defjvp
def _scaled_by_float_jvp(primals, tangents):
    x, scale = primals
    tx, tscale = tangents
    return scaled_by_float(x, scale), tx * float(scale) + tscale * x


def test_float_of_a_value_no_derivative_flows_through():
    grad = xform.grad(scaled_by_float)
    for scale in alternately([2.0, -3.0]):
        assert grad(1.5, np.array(scale)) == scale
        assert xform.jit(scaled_by_float)(1.5, np.array(scale)) == 1.5 * scale


def test_float_of_a_differentiated_value_names_the_line():
    @xform.custom_jvp
    def squared(x):
        c = float(x)  # line: float-cut
        return x * c

    @squared.defjvp
    def _(primals, tangents):
        (x,), (t,) = primals, tangents
        return squared(x), 2.0 * x * t

    with pytest.raises(ConcretizationError, match="derivative would be cut") as info:
        xform.grad(squared)(3.0)
    assert_points_at(info.value, __file__, "float-cut", "squared")
    assert xform.jit(squared)(3.0) == 9.0   # under jit nothing is differentiated


def test_inside_a_staging_without_values_it_still_names_the_line():
    @xform.custom_vjp
    def branchy(x):
        if x > 0:  # line: no-values
            return x
        return -x
    branchy.defvjp(lambda x: (branchy(x), None), lambda _, ct: (ct,))
    with pytest.raises(ConcretizationError) as info:
        xform.make_graph(branchy)(xform.ShapedArray((), np.dtype("float64")))
    assert_points_at(info.value, __file__, "no-values", "branchy")


# -- results holding strings, None and Python numbers next to arrays ---------------------------

def halve_until_small(w):
    """A solver's loss with a report: the report's entries are decided by the loop."""
    n = 0
    err = np.sum(w ** 2)
    while err > 1e-3 and n < 50:
        w = w * 0.5
        err = np.sum(w ** 2)
        n += 1
    status = "converged" if n < 10 else "slow"
    return err, {"status": status, "iters": n, "note": None, "tag": b"v1", "first": w[0]}


REPORT_POINTS = [np.array([1.0, 2.0]), np.array([0.01, -0.02]), np.array([100.0, 0.0])]


def assert_same_report(got, expected):
    assert got.keys() == expected.keys()
    for name, value in expected.items():
        if isinstance(value, np.ndarray) or type(value) is np.float64:
            assert got[name] == pytest.approx(value)
        else:   # strings, None, Python ints: as eager numpy's, of the same type
            assert (type(got[name]), got[name]) == (type(value), value)


def test_strings_none_and_python_ints_in_has_aux_and_jit_results():
    value_and_grad = xform.value_and_grad(halve_until_small, has_aux=True)
    grad = xform.grad(halve_until_small, has_aux=True)
    jit = xform.jit(halve_until_small)
    for w in alternately(REPORT_POINTS):
        err, report = halve_until_small(w)
        expected_grad = central_difference(lambda v: halve_until_small(v)[0], w)
        (got_err, got_report), got_grad = value_and_grad(w)
        assert got_err == pytest.approx(err)
        assert_same_report(got_report, report)
        np.testing.assert_allclose(got_grad, expected_grad, rtol=1e-6)
        got_grad, got_report = grad(w)
        assert_same_report(got_report, report)
        got_err, got_report = jit(w)
        assert_same_report(got_report, report)
        _, _, got_report = xform.vjp(halve_until_small, w, has_aux=True)
        assert_same_report(got_report, report)
    assert xform.jit(lambda x: "a name")(1.0) == "a name"


def test_a_string_holding_a_traced_floats_text_is_each_calls():
    def loss(x):
        value = np.sum(x ** 2)
        print(f"staging at {value}")     # shown only: no guard, no path per value
        return value, f"loss {value:.3f}"

    grad = xform.grad(loss, has_aux=True)
    for x in alternately([1.0, 2.0, 3.0]):
        got_grad, message = grad(x)
        assert (got_grad, message) == (2.0 * x, f"loss {x ** 2:.3f}")


def test_a_string_formatted_with_percent_from_a_traced_float_is_each_calls():
    grad = xform.grad(lambda x: (x ** 2, "loss %.2f" % (x ** 2)), has_aux=True)
    for x in alternately([1.0, 2.0]):
        assert grad(x) == (2.0 * x, "loss %.2f" % (x ** 2))


def test_shown_text_alone_stages_no_path_per_value():
    def loss(x):
        value = np.sum(x ** 2)
        print(f"loss {value:.3f}")
        return value, "done"

    grad = xform.grad(loss, has_aux=True)
    for x in [1.0, 2.0, 3.0]:
        assert grad(x) == (2.0 * x, "done")
    assert xform.cache_info()["paths"] == {}


def test_a_string_holding_a_traced_arrays_text_names_the_line():
    def report(x):
        return np.sum(x), "x = " + str(x)  # line: array-text
    with pytest.raises(ConcretizationError, match="text of a traced array") as info:
        xform.jit(report)(np.array([1.0, 2.0]))
    assert_points_at(info.value, __file__, "array-text", "report")


def test_vmap_returns_a_string_every_element_shares_and_refuses_one_they_do_not():
    mapped = xform.vmap(halve_until_small)
    errs, report = mapped(np.array([[1.0, 2.0], [2.0, 1.0]]))
    assert (report["status"], report["note"], report["tag"]) == ("converged", None, b"v1")
    np.testing.assert_array_equal(report["iters"], [7, 7])
    with pytest.raises(xform.errors.TypeCheckError, match="same for every element"):
        mapped(np.array([[1.0, 2.0], [100.0, 0.0]]))


def test_vmap_out_axes_skip_a_string_among_the_results():
    mapped = xform.vmap(lambda x: ("tag", x * 2.0, np.sum(x)), out_axes=(None, 1, 0))
    tag, doubled, sums = mapped(np.arange(6.0).reshape(3, 2))
    assert tag == "tag"
    np.testing.assert_array_equal(doubled, 2.0 * np.arange(6.0).reshape(3, 2).T)
    np.testing.assert_array_equal(sums, [1.0, 5.0, 9.0])
