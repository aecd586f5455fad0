"""The builders of xform.transforms.derived, which the public transforms and the rules share:
their default forms are the plain transforms' graphs, and their options (adopted forward
pass, seeds of one, kept outputs, captured inputs last) change layout, not values."""
import numpy as np

import xform
from xform.ir.interpret import eval_graph
from xform.transforms import batch_graph, jvp_graph, vjp_graph
from xform.transforms.derived import jvp_split, tangent_graph, vjp_split


def f(x, y):
    return np.sin(x) * y, np.sum(x * y)


X, Y = np.linspace(0.1, 1.0, 3), np.full(3, 2.0)
GRAPH = xform.make_graph(f)(X, Y)


def as_lists(values):
    return [np.asarray(v).tolist() for v in values]


def test_default_forms_are_the_plain_transforms():
    assert str(tangent_graph(GRAPH, (True, True))) == str(jvp_graph(GRAPH, (True, True)))


def test_kept_outputs_change_layout_not_values():
    cts = (np.full(3, 0.5), 2.0)
    whole = eval_graph(vjp_graph(GRAPH), X, Y, *cts)
    assert as_lists(eval_graph(vjp_graph(GRAPH, kept=()), X, Y, *cts)) == as_lists(whole[2:])
    assert as_lists(eval_graph(vjp_graph(GRAPH, kept=(1,), wanted=(1,)), X, Y, *cts)) == \
        as_lists([whole[1], whole[3]])


def test_batched_outputs_go_to_their_out_axes():
    xs, ys = np.linspace(0.0, 1.0, 15).reshape(5, 3), np.ones((5, 3))
    front = eval_graph(batch_graph(GRAPH, (0, 0), 5), xs, ys)
    moved = eval_graph(batch_graph(GRAPH, (0, 0), 5, out_axes=(1, 0)), xs, ys)
    assert as_lists([np.moveaxis(front[0], 0, 1), front[1]]) == as_lists(moved)


def test_adopted_gradient_equals_the_seeded_cotangent_graph():
    scalar = xform.make_graph(lambda x, y: np.sum(np.sin(x) * y))(X, Y)
    adopted = vjp_graph(scalar, (True,), kept=(0,), seed_ones=True, adopt=True)
    seeded = vjp_graph(scalar, (True,), kept=(0,))
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
