"""vmap(..., axis_name=) with psum, pmean, pmax, pmin and all_gather, as JAX's under vmap:
values against numpy's reductions over the mapped axis (hypothesis over sizes and values),
nested named axes, derivatives against autograd and check_grads, and the unbound-name error."""
import autograd
import autograd.numpy as anp
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.testing import check_grads
from xform.testing import strategies as xst
from tests.source_lines import assert_points_at

batches = st.integers(1, 5).flatmap(
    lambda n: xst.arrays((n, 3), np.float64, -2.0, 2.0))

# name -> (the mapped function, numpy's value for the whole batch xs)
CASES = {
    "psum": (lambda v: v / (xform.psum(v, "i") + 10.0),
             lambda xs: xs / (xs.sum(0) + 10.0)),
    "pmean": (lambda v: v - xform.pmean(v, "i"), lambda xs: xs - xs.mean(0)),
    "pmax": (lambda v: v * xform.pmax(v, "i"), lambda xs: xs * xs.max(0)),
    "pmin": (lambda v: v + xform.pmin(v, "i"), lambda xs: xs + xs.min(0)),
    "all_gather": (lambda v: xform.all_gather(v, "i") @ v,
                   lambda xs: np.stack([xs @ x for x in xs])),
    "psum of a constant": (lambda v: v * xform.psum(1.0, "i"),
                           lambda xs: xs * len(xs)),
}


@pytest.mark.parametrize("name", CASES)
@given(xs=batches)
def test_values_equal_numpys_reductions_over_the_batch(name, xs):
    mapped, reference = CASES[name]
    np.testing.assert_allclose(xform.vmap(mapped, axis_name="i")(xs), reference(xs),
                               rtol=1e-13, atol=1e-13)


def test_nested_named_axes_reduce_over_their_own_axis():
    xs = np.arange(12.0).reshape(3, 4) + 1.0
    inner = xform.vmap(lambda v: v / xform.psum(v, "j") + xform.pmax(v, "i"), axis_name="j")
    got = xform.vmap(inner, axis_name="i")(xs)
    np.testing.assert_allclose(got, xs / xs.sum(1, keepdims=True) + xs.max(0, keepdims=True))


def _distinct(xs):
    """Lanes with distinct values, so pmax/pmin are differentiable."""
    return xs + np.arange(xs.size).reshape(xs.shape) * 0.01


@pytest.mark.parametrize("name", CASES)
@given(xs=batches)
def test_derivatives(name, xs):
    mapped, _ = CASES[name]
    check_grads(lambda xs: xform.vmap(mapped, axis_name="i")(xs), (_distinct(xs),), order=2)


def test_gradients_agree_with_autograd():
    xs = _distinct(np.linspace(-1.0, 2.0, 12).reshape(4, 3))

    def loss(xs):
        normalised = xform.vmap(lambda v: v / (xform.psum(v, "i") + 10.0) * xform.pmax(v, "i"),
                                axis_name="i")(xs)
        return np.sum(normalised ** 2)

    def reference(xs):
        return anp.sum((xs / (anp.sum(xs, 0) + 10.0) * anp.max(xs, 0)) ** 2)
    np.testing.assert_allclose(xform.grad(loss)(xs), autograd.grad(reference)(xs), rtol=1e-12)


def test_a_collective_outside_its_vmap_names_the_line():
    with pytest.raises(xform.TypeCheckError, match="unbound axis name 'k'") as info:
        xform.vmap(lambda v: xform.psum(v, "k"), axis_name="i")(np.ones(3))  # line: unbound
    assert_points_at(info.value, __file__, "unbound")
    assert "axis_name='k'" in info.value.hint


@pytest.mark.parametrize("name", ["psum", "pmean", "pmax", "all_gather"])
def test_grad_inside_the_mapped_function_transposes_the_collective(name):
    """Per lane, the gradient of a collective is that of the sum over lanes: a collective's
    transpose gathers the cotangents of every lane (psum's is psum)."""
    mapped, _ = CASES[name]

    def lane_loss(v):
        return np.sum(np.sin(mapped(v)))

    xs = _distinct(np.linspace(-1.0, 1.5, 12).reshape(4, 3))
    per_lane = xform.vmap(xform.grad(lane_loss), axis_name="i")(xs)
    total = xform.grad(lambda xs: np.sum(xform.vmap(lane_loss, axis_name="i")(xs)))(xs)
    np.testing.assert_allclose(per_lane, total, rtol=1e-12, atol=1e-12)
