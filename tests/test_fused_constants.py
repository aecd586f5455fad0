"""A fused region's inputs that are constants of the graph: fusion names them in the
`elementwise` equation's `constants` param, and the region's vjp takes its NDual directions
from that param alone, so a gradient computed at once (concrete values, no tracers) and its
compiled graph decide alike without asking where a value came from."""
import numpy as np
import pytest

import xform
import xform.rules.elementwise as elementwise
from xform.passes import fuse_elementwise
from xform.testing import check_grads

WEIGHTS = np.tanh(np.linspace(0.1, 1.0, 2000))
X = np.linspace(0.0, 1.0, 2000)


def loss(x, y, z):
    return np.sum(np.sin(x) * np.cos(y) * np.exp(z) * WEIGHTS)


def regions(graph):
    return [eqn for eqn in graph.equations if eqn.primitive.name == "elementwise"]


def test_fusion_names_the_inputs_that_are_constants_of_the_graph():
    graph = fuse_elementwise(xform.make_graph(loss)(X, X + 0.5, X * 0.3))
    [region] = regions(graph)
    consts = {var for var, _ in graph.consts}
    named = region.params["constants"]
    assert [i for i, atom in enumerate(region.inputs) if atom in consts] == list(named)
    assert len(named) == 1 and region.inputs[named[0]] in consts


def test_a_region_without_constants_has_no_such_param():
    graph = fuse_elementwise(xform.make_graph(lambda x, y: np.sum(np.sin(x) * np.cos(y)))(X, X))
    assert "constants" not in regions(graph)[0].params


@pytest.fixture
def directions(monkeypatch):
    """The NDual directions each vjp of a region takes."""
    taken = []
    ndual = elementwise._ndual_run

    def recording(region, ins, live, directions, *outs):
        taken.append(directions)
        return ndual(region, ins, live, directions, *outs)
    monkeypatch.setattr(elementwise, "_ndual_run", recording)
    return taken


def test_both_tiers_take_one_direction_per_input_that_is_not_a_constant(directions):
    # Three traced inputs and one constant: three directions (with four, past
    # NDUAL_MAX_WIDTH, the per-equation rules would run instead), on the first call's
    # values as on the compiled call's tracers.
    grad = xform.grad(loss, argnums=(0, 1, 2))
    args = (X, X + 0.5, X * 0.3)
    first, second = grad(*args), grad(*args)
    assert len(directions) == 2 and directions[0] == directions[1]
    assert len(directions[0]) == 3
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b, strict=True)


def test_the_vjp_reads_its_directions_from_the_param_not_from_the_values(directions):
    graph = fuse_elementwise(xform.make_graph(loss)(X, X + 0.5, X * 0.3))
    [region] = regions(graph)
    const = region.params["constants"][0]
    values = [dict(graph.consts).get(atom, X) for atom in region.inputs]
    params = dict(region.params)
    named = elementwise._elementwise_vjp(values, None, [np.float64(1.0)], **params)
    del params["constants"]     # the same values, no constant named: four directions, past
    unnamed = elementwise._elementwise_vjp(values, None, [np.float64(1.0)], **params)
    assert [len(d) for d in directions] == [3]      # NDual once; then the per-equation rules
    assert named[const] is None and unnamed[const] is not None
    for i in set(range(4)) - {const}:
        np.testing.assert_allclose(named[i], unnamed[i], rtol=1e-14)


def test_gradients_through_a_region_with_a_constant_against_finite_differences():
    x = np.linspace(0.0, 1.0, 2000)
    check_grads(loss, (x, x + 0.5, x * 0.3), order=1)


def test_a_region_reemitted_into_another_graph_names_that_graphs_constants(directions):
    # A fused graph called with a constant of the calling function: its region, re-emitted
    # into the caller's graph, names the caller's constant, so the first call (values) takes
    # the directions the compiled call (tracers) takes.
    region_args = (X, X + 0.5, X * 0.3, WEIGHTS)
    inner = fuse_elementwise(xform.make_graph(
        lambda x, y, z, w: np.sin(x) * np.cos(y) * np.exp(z) * w)(*region_args))
    assert "constants" not in regions(inner)[0].params     # w is an input there

    def outer(x, y, z):
        return np.sum(xform.eval_graph(inner, x, y, z, WEIGHTS)[0])
    graph = fuse_elementwise(xform.make_graph(outer)(*region_args[:3]))
    [region] = regions(graph)
    assert region.inputs[region.params["constants"][0]] in {v for v, _ in graph.consts}
    grad = xform.grad(outer, argnums=(0, 1, 2))
    first, second = grad(*region_args[:3]), grad(*region_args[:3])
    assert [len(d) for d in directions] == [3, 3]
    for a, b in zip(first, second, strict=True):
        np.testing.assert_array_equal(a, b, strict=True)


def test_directions_with_alike_tangents_share_them():
    # tanh(a + b), b broadcast along a's rows: both directions carry a scalar seed of one
    # into tanh, whose tangent (an array of a's shape) is computed once for both
    a, b = np.linspace(-1.0, 1.0, 48).reshape(6, 8), np.linspace(0.0, 0.5, 8)
    [region] = regions(fuse_elementwise(xform.make_graph(lambda a, b: np.tanh(a + b) * 2.0)(
        np.ones((300, 8)), np.ones(8))))
    graph = region.params["region"]
    _, partials = elementwise._ndual_run(graph, [a, b], (0,), (0, 1))
    assert partials[(0, 0)] is partials[(0, 1)]
    np.testing.assert_allclose(partials[(0, 0)], 2.0 * (1.0 - np.tanh(a + b) ** 2), rtol=1e-14)
    check_grads(lambda a, b: np.tanh(a + b) * 2.0, (a, b), order=1)
