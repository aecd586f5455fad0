"""The builders of xform.transforms.derived, which the public transforms and the rules share:
their default forms are the plain transforms' graphs, and their options (adopted forward
pass, seeds of one, kept outputs, captured inputs last) change layout, not values."""
import numpy as np

import xform
from xform.ir.interpret import eval_graph
from xform.transforms import batch_graph, jvp_graph, vjp_graph
from xform.transforms.derived import (batched_graph, cotangent_graph, jvp_split,
                                      tangent_graph, vjp_split)


def f(x, y):
    return np.sin(x) * y, np.sum(x * y)


X, Y = np.linspace(0.1, 1.0, 3), np.full(3, 2.0)
GRAPH = xform.make_graph(f)(X, Y)


def test_default_forms_are_the_plain_transforms():
    every_output = range(len(GRAPH.outputs))
    assert str(cotangent_graph(GRAPH, kept=every_output)) == str(vjp_graph(GRAPH))
    assert str(tangent_graph(GRAPH, (True, True))) == str(jvp_graph(GRAPH, (True, True)))
    assert str(batched_graph(GRAPH, (0, 0), 5)) == str(batch_graph(GRAPH, (0, 0), 5))


def test_adopted_gradient_equals_the_seeded_cotangent_graph():
    scalar = xform.make_graph(lambda x, y: np.sum(np.sin(x) * y))(X, Y)
    adopted = cotangent_graph(scalar, (True,), kept=(0,), seed_ones=True, adopt=True)
    seeded = cotangent_graph(scalar, (True,), kept=(0,))
    assert adopted.inputs == scalar.inputs       # the forward pass is the graph itself
    assert [np.asarray(v).tolist() for v in eval_graph(adopted, X, Y)] == \
        [np.asarray(v).tolist() for v in eval_graph(seeded, X, Y, 1.0)]


def test_splits_agree_with_the_whole_graphs():
    forward, backward = vjp_split(GRAPH, (True, False), wanted=(0,))
    results = eval_graph(forward, X, Y)
    grads = eval_graph(backward, *results[2:], np.ones(3))
    assert len(grads) == 1 and np.allclose(grads[0], np.cos(X) * Y)
    forward, linear = jvp_split(GRAPH, (True, False))
    results = eval_graph(forward, X, Y)
    tangents = eval_graph(linear, *results[2:], np.ones(3))
    assert np.allclose(tangents[0], np.cos(X) * Y) and np.allclose(tangents[1], np.sum(Y))


def test_captured_inputs_come_after_the_tangents():
    jvp = tangent_graph(GRAPH, (True, False), n_captured=1)
    plain = jvp_graph(GRAPH, (True, False))
    tangent = np.ones(3)
    assert all(np.array_equal(a, b) for a, b in zip(eval_graph(jvp, X, tangent, Y),
                                                    eval_graph(plain, X, Y, tangent)))
