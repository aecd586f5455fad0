"""check_graph: hand-built malformed graphs raise GraphCheckError naming the bad equation and
listing its neighbours; staged graphs pass."""
import numpy as np
import pytest
from hypothesis import given

import xform
from xform.ir.avals import ShapedArray
from xform.ir.check import check_graph
from xform.ir.core import Equation, Graph, Literal, Primitive, Var
from xform.source_info import SourceInfo
from xform.rules.binary import add_p
from xform.rules.unary import cos_p, sin_p
from xform.testing import strategies as xst

F3 = ShapedArray((3,), np.float64)


def sin_chain(n, bad_index=None, bad_eqn=None):
    """x0 -> sin -> x1 -> ... -> xn, with equation `bad_index` replaced by `bad_eqn(vars)`."""
    xs = [Var(F3) for _ in range(n + 1)]
    eqns = [Equation(sin_p, [xs[i]], [xs[i + 1]]) for i in range(n)]
    if bad_index is not None:
        eqns[bad_index] = bad_eqn(xs)
    return Graph([xs[0]], [], eqns, [xs[n]])


def check_error(graph):
    with pytest.raises(xform.GraphCheckError) as info:
        check_graph(graph)
    return str(info.value)


def marked_line(message):
    (line,) = [line for line in message.splitlines() if line.startswith("-->")]
    return line


def test_var_used_before_definition():
    late = Var(F3)
    graph = sin_chain(12, 7, lambda xs: Equation(cos_p, [late], [xs[8]]))
    message = check_error(graph)
    assert message.splitlines()[0] == "'cos' uses i:f64[3] before it is defined"
    assert marked_line(message) == "-->     h:f64[3] = cos i"
    lines = message.splitlines()
    mark = lines.index(marked_line(message))
    # five equations each side, elided beyond
    assert lines[mark - 5].strip() == "d:f64[3] = sin c"
    assert lines[mark - 6].strip() == "..."
    assert lines[mark + 4].strip() == "m:f64[3] = sin l"
    assert lines[mark + 5].strip() == "in (m) }"


def test_var_used_later_than_its_definition_order():
    x, y, z = Var(F3), Var(F3), Var(F3)
    graph = Graph([x], [], [Equation(sin_p, [y], [z]), Equation(sin_p, [x], [y])], [z])
    message = check_error(graph)
    assert marked_line(message) == "-->     b:f64[3] = sin c"


def test_var_defined_twice_by_equations():
    graph = sin_chain(4, 2, lambda xs: Equation(sin_p, [xs[2]], [xs[1]]))
    message = check_error(graph)
    assert message.splitlines()[0] == "variable b:f64[3] is defined twice"
    assert marked_line(message) == "-->     b:f64[3] = sin c"


def test_input_listed_twice():
    x, y = Var(F3), Var(F3)
    message = check_error(Graph([x, x], [], [Equation(sin_p, [x], [y])], [y]))
    assert "defined twice" in message
    assert marked_line(message).startswith("--> { lambda a:f64[3] a:f64[3]")


def test_equation_redefining_an_input():
    x, y = Var(F3), Var(F3)
    message = check_error(Graph([x, y], [], [Equation(sin_p, [x], [y])], [y]))
    assert "variable b:f64[3] is defined twice" in message


@pytest.mark.parametrize("out_aval", [ShapedArray((4,), np.float64),
                                      ShapedArray((3,), np.float32),
                                      ShapedArray((), np.float64)])
def test_aval_mismatch(out_aval):
    x, y = Var(F3), Var(out_aval)
    message = check_error(Graph([x], [], [Equation(sin_p, [x], [y])], [y]))
    assert "'sin' outputs" in message and "abstract eval gives [f64[3]]" in message
    assert out_aval.str_short() in message


def test_weak_type_difference_is_allowed():
    x, y = Var(F3), Var(ShapedArray((3,), np.float64, weak_type=True))
    check_graph(Graph([x], [], [Equation(sin_p, [x], [y])], [y]))


def test_wrong_number_of_outputs():
    x, y, z = Var(F3), Var(F3), Var(F3)
    message = check_error(Graph([x], [], [Equation(sin_p, [x], [y, z])], [y]))
    assert "'sin' outputs" in message


def test_abstract_eval_rejecting_inputs():
    x, y, z = Var(F3), Var(ShapedArray((4,), np.float64)), Var(F3)
    message = check_error(Graph([x, y], [], [Equation(add_p, [x, y], [z])], [z]))
    assert "'add' rejects its inputs" in message and "broadcast" in message


def test_undefined_output():
    x, y, stray = Var(F3), Var(F3), Var(F3)
    message = check_error(Graph([x], [], [Equation(sin_p, [x], [y])], [stray]))
    assert "an output uses b:f64[3] before it is defined" in message
    assert marked_line(message) == "-->   in (b) }"


def test_const_of_the_wrong_shape():
    x, c, y = Var(F3), Var(F3), Var(F3)
    graph = Graph([x], [(c, np.ones(4))], [Equation(add_p, [x, c], [y])], [y])
    message = check_error(graph)
    assert "constant of shape (4,) float64 bound to b:f64[3]" in message


def test_input_that_is_not_an_atom():
    x, y = Var(F3), Var(F3)
    message = check_error(Graph([x], [], [Equation(add_p, [x, np.ones(3)], [y])], [y]))
    assert "neither a Var nor a Literal" in message


def test_literal_with_a_lying_aval():
    x, y = Var(F3), Var(F3)
    lit = Literal(np.ones(2), ShapedArray((), np.float64))
    message = check_error(Graph([x], [], [Equation(add_p, [x, lit], [y])], [y]))
    assert "literal" in message


def test_error_carries_the_bad_equations_source():
    source = SourceInfo(__file__, 1, "model")
    x, y, z = Var(F3), Var(F3), Var(ShapedArray((2,), np.float64))
    graph = Graph([x], [], [Equation(sin_p, [x], [y]),
                            Equation(sin_p, [y], [z], source=source)], [z])
    with pytest.raises(xform.GraphCheckError) as info:
        check_graph(graph)
    assert info.value.source == source
    assert f"at {__file__}:1 (model)" in str(info.value)


def test_sub_graphs_are_checked():
    call_p = Primitive("call")       # no rules: only structure is checked
    inner_x, inner_y, stray = Var(F3), Var(F3), Var(F3)
    body = Graph([inner_x], [], [Equation(sin_p, [stray], [inner_y])], [inner_y])
    x, y = Var(F3), Var(F3)
    graph = Graph([x], [], [Equation(call_p, [x], [y], {"body": body})], [y])
    assert "uses" in check_error(graph)


def test_check_method_raises_too():
    graph = sin_chain(2, 1, lambda xs: Equation(sin_p, [Var(F3)], [xs[2]]))
    with pytest.raises(xform.GraphCheckError):
        graph.check()


# -- well-formed graphs pass -------------------------------------------------------------------

STAGED = [
    lambda x: np.sin(x) * x + 2.0,
    lambda x: (x.sum(axis=0), x.T, x.reshape(-1) > 0.5),
    lambda x: np.where(x > 0, x, -x).astype(np.float32) * np.float32(2),
    lambda x: np.exp(x) / np.exp(x).sum(),
    lambda x: (x, 1.0, np.maximum(x, 0.0) - np.clip(x, -1.0, 1.0)),
]


@pytest.mark.parametrize("fun", STAGED)
@given(x=xst.arrays(xst.shapes(min_dims=1, max_dims=2), np.float64))
def test_staged_graphs_pass(fun, x):
    graph = xform.make_graph(fun)(x)
    assert graph.check() is graph


@pytest.mark.parametrize("fun", STAGED[:4])
def test_transformed_graphs_pass(fun):
    x = np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    scalar = lambda y: np.sum(fun(y)[0] if isinstance(fun(y), tuple) else fun(y))  # noqa
    graph = xform.make_graph(xform.grad(scalar))(x)
    check_graph(graph)
    check_graph(xform.make_graph(xform.vmap(fun))(x))


def test_staged_graph_with_consts_passes():
    table = np.arange(3.0)
    check_graph(xform.make_graph(lambda x: x * table)(np.ones(3)))
