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
    grad = xform.grad(loss)
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
    grad = xform.grad(loss)
    first = grad(x)
    [graph] = first_call_regions
    assert "tanh" not in {eqn.primitive.name for eqn in graph.equations}
    compiled = grad(x)
    np.testing.assert_array_equal(first, compiled)
    np.testing.assert_allclose(first, scale * (1 - np.tanh(x + BIAS) ** 2), rtol=1e-14)
