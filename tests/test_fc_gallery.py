"""A first call's reverse pass over a fused region does not compute the region's values again
(issue 30, part 5: "nothing is evaluated twice"): its NDual partials start from the values
the forward pass computed (the region's outputs, and the values inside it that staging
computed), and its gradient has the bits of the compiled calls that follow."""
import attrs
import numpy as np
import pytest

import xform
import xform.rules.elementwise as elementwise
from xform.ir.builder import current_builder
from xform.ir.registry import RULES
from xform.rules import binary
from xform.rules.unary import tanh_p

BIAS = np.linspace(-0.5, 0.5, 16)


def layer(x):
    return np.sum(np.tanh(x + BIAS))


def scaled_layer(x):    # tanh's value is inside the region, not one of its outputs
    return np.sum(np.tanh(x + BIAS) * 0.5)


LOSSES = [(layer, 1.0), (scaled_layer, 0.5)]


@pytest.fixture
def tanh_runs(monkeypatch):
    """The arrays tanh's impl runs on outside staging (staging's own runs are not counted)."""
    ran = []
    rules = RULES[tanh_p]

    def impl(x):
        if current_builder() is None:
            ran.append(np.shape(x))
        return rules.impl(x)
    monkeypatch.setitem(RULES, tanh_p, attrs.evolve(rules, impl=impl))
    return ran


@pytest.fixture
def first_call_regions(monkeypatch):
    """The NDual graphs a gradient on values (a first call's) builds for large regions."""
    built = []
    ndual_region = elementwise._ndual_region

    def recording(region, live, directions, given=()):
        graph, partials = ndual_region(region, live, directions, given)
        if given:
            built.append(graph)
        return graph, partials
    monkeypatch.setattr(elementwise, "_ndual_region", recording)
    return built


# Rows of 16: fused (fusion pays); past INTERPRETED_FIRST_RUN elements, but its two
# equations' tangents alone are computed at once all the same
SMALL_ROWS = [64, elementwise.INTERPRETED_FIRST_RUN // 16 + 1]


@pytest.mark.parametrize("rows", SMALL_ROWS)
@pytest.mark.parametrize("loss, scale", LOSSES)
def test_a_small_regions_first_gradient_takes_its_values_as_computed(
        tanh_runs, first_call_regions, loss, scale, rows):
    x = np.linspace(-1.0, 1.0, rows * 16).reshape(rows, 16)
    grad = xform.grad(lambda x: loss(x))   # (a function of its own: nothing cached)
    first = grad(x)
    assert tanh_runs == [] and first_call_regions == []
    compiled = grad(x)
    np.testing.assert_array_equal(first, compiled)
    np.testing.assert_allclose(first, scale * (1 - np.tanh(x + BIAS) ** 2), rtol=1e-14)


@pytest.mark.parametrize("loss, scale", LOSSES)
def test_a_large_regions_first_gradient_compiles_no_value_again(first_call_regions, loss,
                                                                scale):
    rows = elementwise.INTERPRETED_FIRST_PARTIALS // 16 + 1
    x = np.linspace(-1.0, 1.0, rows * 16).reshape(rows, 16)
    grad = xform.grad(lambda x: loss(x))   # (a function of its own: nothing cached)
    first = grad(x)
    [graph] = first_call_regions
    assert "tanh" not in {eqn.primitive.name for eqn in graph.equations}
    compiled = grad(x)
    np.testing.assert_array_equal(first, compiled)
    np.testing.assert_allclose(first, scale * (1 - np.tanh(x + BIAS) ** 2), rtol=1e-14)


@pytest.fixture
def masks_on_values(monkeypatch):
    """The calls of logaddexp's mask for infinite sums on values (not while staging)."""
    calls = []
    select_mask = binary._select_mask

    def recording(x, y, ans):
        if current_builder() is None:
            calls.append(np.shape(ans))
        return select_mask(x, y, ans)
    monkeypatch.setattr(binary, "_select_mask", recording)
    return calls


def log_space_loss(z, w):
    return np.sum(np.exp(np.logaddexp(z, w)))


@pytest.mark.parametrize("infinite", [False, True])
def test_logaddexps_first_gradient_masks_only_infinite_sums(masks_on_values, infinite):
    z = np.linspace(-3.0, 3.0, 64 * 16).reshape(64, 16)
    w = np.linspace(-1.0, 2.0, 16)[::-1] * np.ones((64, 1))
    if infinite:    # log-space padding: an infinite sum, where the mask gives the shares
        z[3, 5] = w[3, 5] = -np.inf
    grad = xform.grad(lambda z, w: log_space_loss(z, w))
    first = grad(z, w)
    assert bool(masks_on_values) == infinite   # (one call per direction)
    compiled = grad(z, w)
    np.testing.assert_array_equal(first, compiled)
    np.testing.assert_allclose(first, np.exp(z), rtol=1e-13)
