"""fold_constants: evaluation of known equations, Rules.fold hooks, algebraic peepholes."""
import importlib
from collections import namedtuple

import numpy as np
import pytest
from hypothesis import given

import xform
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.passes import eliminate_dead_code, fold_constants
from xform.ir.registry import UNKNOWN
from xform.passes.fold import MAX_FOLDED_SIZE
from xform.rules.binary import add_p, divide_p, multiply_p, power_p, subtract_p
from xform.rules.reduce import sum_p
from xform.ir.registry import RULES, Hooks, register
from xform.rules.shape import broadcast_to_p, reshape_p, transpose_p
from xform.rules.unary import cos_p, log_p, negative_p, sin_p
from xform.testing import strategies as xst

from tests.passes.support import F64, Builder, lit, primitives, run_pass, specialize

F32 = ShapedArray((), np.float32)
M23 = ShapedArray((2, 3), np.float64)
V3 = ShapedArray((3,), np.float64)
I32 = ShapedArray((), np.int32)
WEAK = ShapedArray((), np.float64, True)
C128 = ShapedArray((), np.complex128)

# name, input avals, build(b, *inputs) -> outputs, primitives left after folding (and dce,
# which removes what a rewrite leaves unread)
FoldCase = namedtuple("FoldCase", "name avals build left")

CASES = [
    FoldCase("x*1", [F64], lambda b, x: b(multiply_p, x, lit(1.0)), []),
    FoldCase("1*x", [F64], lambda b, x: b(multiply_p, lit(1.0), x), []),
    FoldCase("x*ones", [V3], lambda b, x: b(multiply_p, x, b.const(np.ones(3))), []),
    FoldCase("x+(-0.0)", [F64], lambda b, x: b(add_p, x, lit(-0.0)), []),
    FoldCase("(-0.0)+x", [F32], lambda b, x: b(add_p, lit(-0.0), x), []),
    # x + 0.0 turns x = -0.0 into +0.0, so it is not x bit for bit.
    FoldCase("x+0.0 stays", [F64], lambda b, x: b(add_p, x, lit(0.0)), ["add"]),
    FoldCase("x-0", [V3], lambda b, x: b(subtract_p, x, lit(0)), []),
    FoldCase("0-x stays", [F64], lambda b, x: b(subtract_p, lit(0.0), x), ["subtract"]),
    FoldCase("x**1", [V3], lambda b, x: b(power_p, x, lit(1)), []),
    FoldCase("1**x stays", [F64], lambda b, x: b(power_p, lit(1.0), x), ["power"]),
    FoldCase("x*2 stays", [F64], lambda b, x: b(multiply_p, x, lit(2.0)), ["multiply"]),
    # The result's type differs from x's, so x cannot stand for it.
    FoldCase("int*1.0 stays", [I32], lambda b, x: b(multiply_p, x, lit(1.0)), ["multiply"]),
    FoldCase("f32*f64 one stays", [F32],
             lambda b, x: b(multiply_p, x, b.const(np.float64(1.0))), ["multiply"]),
    FoldCase("x+zeros broadcasts: stays", [F64],
             lambda b, x: b(add_p, x, b.const(np.zeros(3))), ["add"]),
    FoldCase("x+0 for ints", [I32], lambda b, x: b(add_p, x, lit(0)), []),
    FoldCase("reshape to same shape", [M23], lambda b, x: b(reshape_p, x, shape=(2, 3)), []),
    FoldCase("reshape of reshape", [M23],
             lambda b, x: b(reshape_p, b(reshape_p, x, shape=(6,)), shape=(3, 2)),
             ["reshape"]),
    FoldCase("reshape back", [M23],
             lambda b, x: b(reshape_p, b(reshape_p, x, shape=(6,)), shape=(2, 3)), []),
    FoldCase("identity transpose", [M23], lambda b, x: b(transpose_p, x, axes=(0, 1)), []),
    FoldCase("transpose back", [M23],
             lambda b, x: b(transpose_p, b(transpose_p, x, axes=(1, 0)), axes=(1, 0)), []),
    FoldCase("transposes compose", [ShapedArray((2, 3, 4), np.float64)],
             lambda b, x: b(transpose_p, b(transpose_p, x, axes=(1, 2, 0)), axes=(1, 0, 2)),
             ["transpose"]),
    FoldCase("known sin", [F64], lambda b, x: b(multiply_p, x, b(sin_p, lit(2.0))),
             ["multiply"]),
    FoldCase("known array chain", [V3],
             lambda b, x: b(add_p, x, b(cos_p, b(sin_p, b.const(np.arange(3.0))))), ["add"]),
    FoldCase("known sum to literal", [F64],
             lambda b, x: b(multiply_p, x, b(sum_p, b.const(np.arange(4.0)), axes=(0,),
                                             dtype=None)), ["multiply"]),
    FoldCase("folded product of a known 1", [F64],
             lambda b, x: b(multiply_p, x, b(divide_p, lit(3.0), lit(3.0))), []),
    # A weak x times a strong 1 only changes x's type; where the other operand is strong,
    # x stands for the product (reverse mode's cotangent 1.0 times a Python float).
    *[FoldCase(f"(weak*strong 1) {prim}", [WEAK, F64],
               lambda b, x, y, prim=prim: b(prim, b(multiply_p, x, lit(np.float64(1.0))), y),
               [prim.name]) for prim in (multiply_p, add_p, subtract_p, divide_p)],
    FoldCase("y - (strong 1*weak)", [WEAK, F64],
             lambda b, x, y: b(subtract_p, y, b(multiply_p, lit(np.float64(1.0)), x)),
             ["subtract"]),
    FoldCase("(weak*strong 1) * weak stays", [WEAK, WEAK],
             lambda b, x, y: b(multiply_p, b(multiply_p, x, lit(np.float64(1.0))), y),
             ["multiply", "multiply"]),
    FoldCase("(weak*strong 2) * y stays", [WEAK, F64],
             lambda b, x, y: b(multiply_p, b(multiply_p, x, lit(np.float64(2.0))), y),
             ["multiply", "multiply"]),
    # (a + bj) * (1 + 0j) is not a + bj bit for bit (an infinite b gives a nan real part)
    FoldCase("complex (weak*strong 1) * y stays", [ShapedArray((), np.complex128, True), C128],
             lambda b, x, y: b(multiply_p, b(multiply_p, x, lit(np.complex128(1.0))), y),
             ["multiply", "multiply"]),
]


def _build(case):
    # The case's result feeds one more equation: a rewrite never makes a graph output alias
    # an input (tested in test_api.py), and that would hide the rewrites tested here.
    b = Builder()
    inputs = [b.input(a) for a in case.avals]
    return b.graph(b(negative_p, case.build(b, *inputs)))


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
@given(data=xst.st.data())
def test_fold_case(case, data):
    graph = _build(case)
    args = [data.draw(xst.arrays(a.shape, a.dtype)) for a in case.avals]
    after = run_pass(fold_constants, graph, *args)
    assert primitives(eliminate_dead_code(after)) == case.left + ["negative"]


def test_folded_scalar_becomes_a_literal_and_array_a_const():
    b = Builder()
    x = b.input(V3)
    scale = b(sum_p, b.const(np.ones(2)), axes=(0,), dtype=None)
    shift = b(sin_p, b.const(np.arange(3.0)))
    graph = b.graph(b(add_p, b(multiply_p, x, scale), shift))
    after = run_pass(fold_constants, graph, np.ones(3))
    assert primitives(after) == ["multiply", "add"]
    assert after.equations[0].inputs[1].value == 2.0
    (var, value), = after.consts
    np.testing.assert_array_equal(value, np.sin(np.arange(3.0)))
    assert after.equations[1].inputs[1] is var


def test_folded_literal_keeps_the_promotion_of_the_unfolded_graph():
    # np.add(2.0, 3.0) is a strong np.float64, so float32 x is promoted to float64, folded
    # or not: folding must not change the result type.
    b = Builder()
    x = b.input(ShapedArray((3,), np.float32))
    graph = b.graph(b(multiply_p, x, b(add_p, lit(2.0), lit(3.0))))
    after = fold_constants(graph).check()
    assert type(after.equations[0].inputs[1].value) is np.float64
    out = xform.eval_graph(after, np.ones(3, np.float32))[0]
    unfolded = xform.eval_graph(graph, np.ones(3, np.float32))[0]
    assert out.dtype == unfolded.dtype == graph.out_avals[0].dtype == np.float64
    np.testing.assert_array_equal(out, 5.0)


def test_large_results_stay_staged():
    b = Builder()
    x = b.input(F64)
    big = b(broadcast_to_p, lit(1.0), shape=(MAX_FOLDED_SIZE + 1,))
    small = b(broadcast_to_p, lit(1.0), shape=(10, 10))
    out = b(add_p, b(sum_p, big, axes=(0,), dtype=None), b(sum_p, small, axes=(0, 1),
                                                              dtype=None))
    graph = b.graph(b(multiply_p, x, out))
    after = run_pass(fold_constants, graph, 2.0)
    assert primitives(after) == ["broadcast_to", "sum", "add", "multiply"]


def test_array_outputs_are_not_folded_into_shared_constants():
    b = Builder()
    x = b.input(F64)
    graph = b.graph(b(sin_p, b.const(np.arange(3.0))), b(cos_p, lit(0.0)), x)
    after = run_pass(fold_constants, graph, 1.0)
    assert primitives(after) == ["sin"]
    assert type(after.outputs[1].value) is np.float64  # the impl's type, not a Python float


@pytest.mark.parametrize("prim, value", [(log_p, -1.0), (log_p, 0.0)])
def test_equations_that_warn_stay_staged(prim, value):
    b = Builder()
    x = b.input(F64)
    graph = b.graph(b(add_p, x, b(prim, lit(value))))
    after = fold_constants(graph)
    assert primitives(after) == [prim.name, "add"]
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(xform.eval_graph(after, 1.0), xform.eval_graph(graph, 1.0))


def test_division_by_zero_stays_staged():
    b = Builder()
    x = b.input(F64)
    graph = b.graph(b(add_p, x, b(divide_p, lit(1.0), lit(0.0))))
    assert primitives(fold_constants(graph)) == ["divide", "add"]


def test_dead_equations_are_not_evaluated():
    evaluated = []
    probe_p = Primitive("test_fold_probe")
    register(probe_p, impl=lambda x: evaluated.append(x) or x, abstract_eval=lambda x: x)
    b = Builder()
    x = b.input()
    b(probe_p, lit(1.0))
    graph = b.graph(b(multiply_p, x, b(probe_p, lit(2.0))))
    after = fold_constants(graph).check()
    assert evaluated == [2.0]
    assert primitives(after) == ["test_fold_probe", "multiply"]


def test_unchanged_graph_is_returned_as_is():
    graph = xform.make_graph(lambda x: np.sin(x) * 2.0)(1.0)
    assert fold_constants(graph) is graph


# -- Rules.fold hooks ---------------------------------------------------------------------------

pick_p = Primitive("test_fold_pick", multiple_results=True)
_hook_calls = []


def _pick_impl(index, *args, branches):
    return xform.eval_graph(branches[int(index)], *args)


def _pick_fold(eqn, known):
    _hook_calls.append([k is UNKNOWN for k in known])
    if known[0] is UNKNOWN:
        return None
    return eqn.params["branches"][int(known[0])], list(eqn.inputs[1:])


register(pick_p, impl=_pick_impl,
         abstract_eval=lambda index, *avals, branches: list(branches[0].out_avals),
         hooks=Hooks(fold=_pick_fold))


def _branches():
    doubled = xform.make_graph(lambda x, y: (np.sin(x) * 2.0, y))(1.0, 1.0)
    swapped = xform.make_graph(lambda x, y: (np.sin(y), x))(1.0, 1.0)
    constant = xform.make_graph(lambda x, y: (np.float64(7.0) + 0 * x, 3.0 * np.ones(()) + y))(
        1.0, 1.0)
    return doubled, swapped, constant


def _pick_graph():
    b = Builder()
    index, x, y = b.input(ShapedArray((), np.int64)), b.input(), b.input()
    first, second = b(pick_p, index, x, y, branches=_branches())
    return b.graph(b(add_p, first, lit(1.0)), b(multiply_p, second, second))


@pytest.mark.parametrize("index", [0, 1, 2])
@given(x=xst.arrays((), np.float64), y=xst.arrays((), np.float64))
def test_fold_hook_inlines_the_taken_branch(index, x, y):
    graph = specialize(_pick_graph(), 0, index)
    after = run_pass(fold_constants, graph, x, y)
    assert "test_fold_pick" not in primitives(after)


def test_fold_hook_sees_unknown_inputs_and_may_decline():
    _hook_calls.clear()
    graph = _pick_graph()
    assert fold_constants(graph) is graph
    assert _hook_calls == [[True, True, True]]


def test_spliced_body_is_folded_in_turn_and_vars_stay_unique():
    # The same branch spliced twice must get fresh variables each time (check() would fail).
    b = Builder()
    x = b.input()
    branches = _branches()
    first, _ = b(pick_p, lit(0), x, lit(2.0), branches=branches)
    second, _ = b(pick_p, lit(0), first, lit(2.0), branches=branches)
    third, fourth = b(pick_p, lit(1), lit(0.0), second, branches=branches)
    graph = b.graph(third, fourth)
    after = run_pass(fold_constants, graph, 1.5)
    assert primitives(after) == ["sin", "multiply", "sin", "multiply", "sin"]
    assert after.outputs[1].value == 0.0


def test_hook_that_recreates_itself_stops(monkeypatch):
    loop_p = Primitive("test_fold_loop")
    b = Builder()
    x = b.input()
    register(loop_p, impl=lambda x: x, abstract_eval=lambda x: x)
    body = b.graph(b(loop_p, x))
    RULES[loop_p] = RULES[loop_p].__class__(impl=lambda x: x, abstract_eval=lambda x: x,
                                            hooks=Hooks(fold=lambda eqn, known: (body, eqn.inputs)))
    # (xform.passes.fold is the short alias of fold_constants; the module is reached by name.)
    monkeypatch.setattr(importlib.import_module("xform.passes.fold"), "_MAX_SPLICES", 5)
    after = fold_constants(body)
    after.check()
    assert primitives(after) == ["test_fold_loop"]


# -- staged graphs ------------------------------------------------------------------------------

def test_cond_with_a_known_predicate_becomes_its_branch():
    graph = xform.make_graph(
        lambda p, x: xform.cond(p > 0, lambda: np.sin(x) * 1.0, lambda: np.cos(x)))(1.0, 1.0)
    for p, taken in [(1.0, "sin"), (-1.0, "cos")]:
        after = run_pass(fold_constants, specialize(graph, 0, p), 0.5)
        assert primitives(after) == [taken]


@given(x=xst.arrays((2, 3), np.float64), w=xst.arrays((3,), np.float64))
def test_gradient_graph_folds_and_agrees(x, w):
    def loss(x, w):
        return np.sum(np.tanh(x * w).T.T * 1.0 + 0.0)
    graph = xform.make_graph(xform.grad(loss, argnums=(0, 1)))(x, w)
    after = run_pass(fold_constants, graph, x, w)
    assert len(after.equations) < len(graph.equations)


@pytest.mark.parametrize("zero, dropped", [(complex(-0.0, -0.0), True), (0j, False),
                                           (complex(-0.0, 0.0), False)])
def test_complex_zero_is_neutral_only_with_both_signs_set(zero, dropped):
    """x + (-0-0j) is x part by part; +0 in either part turns a -0.0 of x into +0.0."""
    x = np.array([complex(-0.0, -0.0), 1 - 2j])
    graph = xform.make_graph(lambda x: x * 2 + np.complex128(zero))(x)
    after = run_pass(fold_constants, graph, x)
    assert (len(after.equations) == 1) == dropped
