"""accumulate_pads: trees of `add` over zero-valued pads become one `pad_sum`, with the
results of the unrewritten graph (interpreted), on loop gradients and on hand-built trees."""
import time

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Var
from xform.codegen import compile_graph
from xform.passes import accumulate_pads, eliminate_dead_code, optimize
from xform.rules.binary import add_p, multiply_p
from xform.rules.shape import pad_p, reshape_p
from xform.rules.unary import sin_p
from xform.testing import strategies as xst

from tests.passes.support import Builder, lit, primitives, run_pass

V4 = ShapedArray((4,), np.float64)
V1 = ShapedArray((1,), np.float64)


def _grad_graph(f, x):
    """The gradient graph of `f` as reverse mode emits it, made ready for this pass the way
    PIPELINE does (inline, fold, cse)."""
    graph = xform.make_graph(xform.grad(f))(x)
    return optimize(graph, xform.passes.PIPELINE[:3])


def _sum_sin(x):
    y = 0.0
    for i in range(x.shape[0]):
        y = y + np.sin(x[i])
    return y


def _power_chain(x):
    y = x[0]
    for _ in range(40):
        y = y * x[1]
    return y


def _map_sin_cos_exp(x):
    flat = np.reshape(x, (-1,))
    return np.sum(np.stack([np.sin(np.cos(np.exp(flat[i]))) for i in range(flat.shape[0])]))


LOOPS = [
    ("sum_sin", _sum_sin, np.linspace(-1.0, 1.0, 30), lambda x: np.cos(x)),
    ("power_chain", _power_chain, np.array([0.9, 1.01]),
     lambda x: np.array([x[1] ** 40, 40 * x[0] * x[1] ** 39])),
    ("map_sin_cos_exp", _map_sin_cos_exp, np.linspace(-1.0, 1.0, 12).reshape(3, 4),
     lambda x: np.cos(np.cos(np.exp(x))) * -np.sin(np.exp(x)) * np.exp(x)),
]


@pytest.mark.parametrize("name, f, x, derivative", LOOPS, ids=[loop[0] for loop in LOOPS])
def test_loop_gradients_become_one_pad_sum(name, f, x, derivative):
    graph = _grad_graph(f, x)
    assert primitives(graph).count("pad") >= 2
    after = eliminate_dead_code(run_pass(accumulate_pads, graph, x))
    assert primitives(after).count("pad_sum") == 1
    assert "pad" not in primitives(after)
    # a whole array per use before, one array after (several terms of one element are
    # added up as scalars first: _scalar_chains)
    assert all(not eqn.outputs[0].aval.shape for eqn in after.equations
               if eqn.primitive is add_p)
    np.testing.assert_allclose(xform.eval_graph(after, x)[0], derivative(x), rtol=1e-12)


def test_grad_through_the_pipeline_is_numpys_cos_bit_for_bit():
    x = np.random.default_rng(1).standard_normal(200)
    graph = optimize(xform.make_graph(xform.grad(_sum_sin))(x))
    assert primitives(graph).count("pad_sum") == 1 and "pad" not in primitives(graph)
    got = xform.grad(_sum_sin)(x)
    assert np.array_equal(got, np.cos(x))


# -- random loops: results equal the unrewritten graph's --------------------------------------

_UNARY = {
    "sin": np.sin,
    "square": lambda v: v * v,
    "scaled": lambda v: 3.0 * v,
    "exp_sum": lambda v: np.exp(v) * 0.5,
}


@st.composite
def _loop(draw):
    """A function reading its argument piece by piece in a Python loop: single elements,
    rows, strided slices, repeated indices, and sometimes the whole array once more."""
    shape = draw(st.sampled_from([(5,), (3, 4), (6,)]))
    uses = []
    for _ in range(draw(st.integers(1, 12))):
        kind = draw(st.sampled_from(["element", "slice", "row"]))
        if kind == "element":
            index = tuple(draw(st.integers(0, n - 1)) for n in shape)
        elif kind == "slice":
            start = draw(st.integers(0, shape[0] - 1))
            index = (slice(start, None, draw(st.integers(1, 3))),)
        else:
            index = (draw(st.integers(0, shape[0] - 1)),)
        uses.append((index, draw(st.sampled_from(sorted(_UNARY)))))
    whole = draw(st.booleans())

    def f(x):
        y = np.sum(x * x) if whole else 0.0
        for index, op in uses:
            y = y + np.sum(_UNARY[op](x[index]))
        return y
    x = draw(xst.arrays(shape, np.float64))
    return f, x, len(uses) + whole


@given(_loop())
def test_random_loop_gradients_keep_their_values(loop):
    f, x, terms = loop
    graph = _grad_graph(f, x)
    after = run_pass(accumulate_pads, graph, x)   # results checked against `graph`, bit for bit
    if terms >= 2 and "pad" in primitives(graph):
        # one pad_sum, or, for the whole array plus one window's terms, a window update
        assert {"pad_sum", "scatter"} & set(primitives(after))
        assert "pad" not in primitives(eliminate_dead_code(after))


_EDGES = st.sampled_from([0.0, -0.0, 1.0, -2.5, 1e308, -1e308, np.inf, np.nan, 5e-324])


@given(pairs=st.lists(st.tuples(st.integers(0, 2), st.integers(0, 2)), min_size=2, max_size=12),
       values=st.lists(st.one_of(_EDGES, st.floats(-10, 10)), min_size=3, max_size=3))
def test_the_terms_of_one_element_are_added_first_with_the_same_bits(pairs, values):
    """An element read several times gets one chain of scalar adds (_scalar_chains), in the
    terms' order: the interpreted and compiled gradients are the unrewritten graph's, signed
    zeros included."""
    def f(x):
        y = 0.0
        for i, j in pairs:
            y = y + x[i] * x[j]
        return y
    x = np.array(values)
    graph = _grad_graph(f, x)
    with np.errstate(all="ignore"):
        after = run_pass(accumulate_pads, graph, x)
        want = xform.eval_graph(graph, x)[0]
        for got in (xform.eval_graph(after, x)[0], compile_graph(after)(x)[0]):
            assert np.array_equal(np.signbit(got), np.signbit(want))
    sum_eqn = [eqn for eqn in after.equations if eqn.primitive.name == "pad_sum"]
    if sum_eqn:
        windows = sum_eqn[0].params["windows"]
        assert len(set(windows)) == len(windows)     # one operand per element


# -- hand-built trees ---------------------------------------------------------------------------

def _pad(b, x, lo, hi, value=0.0):
    return b(pad_p, x, lit(value), widths=((lo, hi, 0),))


def _scalar_pad(b, s, at):
    return _pad(b, b(reshape_p, s, shape=(1,)), at, 3 - at)


def test_intermediate_sum_read_elsewhere_starts_its_own_tree():
    b = Builder()
    s, t, u = b.input(), b.input(), b.input()
    first = b(add_p, _scalar_pad(b, s, 0), _scalar_pad(b, t, 1))
    second = b(add_p, first, _scalar_pad(b, u, 1))
    graph = b.graph(first, second)
    after = eliminate_dead_code(run_pass(accumulate_pads, graph, 1.0, 2.0, 4.0))
    # the second tree, `first` and a term of one element, updates that element of `first`
    assert primitives(after) == ["pad_sum", "slice", "reshape", "add", "scatter"]
    update = after.equations[-1]
    assert update.inputs[0] is after.outputs[0] and update.params["index"] == (1,)
    assert after.equations[3].inputs[1] is graph.inputs[2]
    np.testing.assert_array_equal(xform.eval_graph(after, 1.0, 2.0, 4.0)[1], [1, 6, 0, 0])


def test_pad_read_twice_joins_the_sum_and_stays_for_its_other_reader():
    b = Builder()
    s, y = b.input(), b.input(V4)
    shared = _scalar_pad(b, s, 2)
    total = b(add_p, b(add_p, shared, y), shared)
    graph = b.graph(total, b(sin_p, shared))
    after = eliminate_dead_code(run_pass(accumulate_pads, graph, 3.0, np.arange(4.0)))
    assert sorted(primitives(after)) == ["pad", "pad_sum", "reshape", "sin"]
    pad_sum_eqn = after.equations[primitives(after).index("pad_sum")]
    assert pad_sum_eqn.inputs == (s, y, s)


def test_one_element_operand_without_a_reshape_gets_one():
    b = Builder()
    p, q = b.input(V1), b.input(V1)
    graph = b.graph(b(add_p, _pad(b, p, 0, 3), _pad(b, q, 3, 0)))
    after = run_pass(accumulate_pads, graph, np.array([1.5]), np.array([2.5]))
    assert primitives(after) == ["reshape", "reshape", "pad_sum"]


@pytest.mark.parametrize("value", [1.0, -0.0], ids=["one", "negative_zero"])
def test_pads_with_other_values_are_left_alone(value):
    b = Builder()
    p, q = b.input(V1), b.input(V1)
    graph = b.graph(b(add_p, _pad(b, p, 0, 3, value), _pad(b, q, 3, 0, value)))
    assert accumulate_pads(graph) is graph


def test_broadcasting_add_is_not_a_sum_node():
    b = Builder()
    s, t = b.input(), b.input()
    graph = b.graph(b(add_p, _scalar_pad(b, s, 0), t))
    assert accumulate_pads(graph) is graph


def test_graphs_without_pads_are_returned_unchanged():
    for f, x in [(lambda x: np.sum(np.sin(x)), np.ones(5)),
                 (lambda x: np.sum(x * x + x), np.ones((2, 3))),
                 (lambda x: x[0] * 2.0, np.ones(3))]:   # one pad, no sum
        graph = _grad_graph(f, x)
        assert accumulate_pads(graph) is graph


def test_a_hundred_thousand_equations_in_one_sweep():
    n, uses = 1000, 25_001
    scalar, piece, full = ShapedArray((), np.float64), V1, ShapedArray((n,), np.float64)
    s = Var(scalar)
    equations, products, total = [], [], None
    for i in range(uses):   # built by hand: the checked Builder would take longer than the pass
        product, column, padded = Var(scalar), Var(piece), Var(full)
        equations += [Equation(multiply_p, (s, lit(float(i))), (product,)),
                      Equation(reshape_p, (product,), (column,), {"shape": (1,)}),
                      Equation(pad_p, (column, lit(0.0)), (padded,),
                               {"widths": ((i % n, n - 1 - i % n, 0),)})]
        if total is not None:
            added = Var(full)
            equations.append(Equation(add_p, (total, padded), (added,)))
            padded = added
        products.append(product)
        total = padded
    graph = Graph((s,), (), equations, (total,))
    assert len(graph.equations) >= 100_000
    start = time.perf_counter()
    after = accumulate_pads(graph)
    elapsed = time.perf_counter() - start
    # linear: about a second here; a scan per tree would take hours
    assert elapsed < 20, elapsed
    pad_sum_eqn = after.equations[-1]
    assert primitives(after).count("pad_sum") == 1 and pad_sum_eqn.outputs == (total,)
    # each element's terms added up in order by a chain of scalar adds (_scalar_chains)
    assert pad_sum_eqn.params["windows"] == tuple(((i, i + 1, 1),) for i in range(n))
    made_by = {eqn.outputs[0]: eqn for eqn in after.equations if eqn.primitive is add_p}
    assert len(made_by) == uses - n
    for element in (0, 1, n - 1):
        chain, atom = [], pad_sum_eqn.inputs[element]
        while atom in made_by:
            atom, term = made_by[atom].inputs
            chain.append(term)
        assert [atom] + chain[::-1] == products[element::n]
