"""Rewrites keyed by the algebraic traits of xform.ir.registry.Hooks: a primitive registered
here, declaring a trait, gets the rewrite a built-in one declaring it gets; and what the
prefilter spares."""
import contextlib

import attrs
import numpy as np
import pytest

import xform
from xform.ir.registry import RULES, Hooks, register
from xform.passes import dce, fold_constants
from xform.passes.simplify import REWRITES, simplify
from xform.rules.helpers import elementwise_abstract_eval

from tests.passes.support import Builder, lit, run_pass


@contextlib.contextmanager
def primitive_of(ufunc, name, **hooks):
    """A new element-wise primitive computing `ufunc`, declaring `hooks`, while the block runs
    (the table is global)."""
    prim = xform.Primitive(name)
    register(prim, impl=ufunc, abstract_eval=elementwise_abstract_eval(ufunc),
             elementwise=True, hooks=Hooks(**hooks))
    try:
        yield prim
    finally:
        del RULES[prim]


def names(graph) -> list:
    return [eqn.primitive.name for eqn in graph.equations]


X = np.array([3, -7, 12, 0])


def test_a_declared_identity_is_folded_on_either_side_of_a_commutative_op():
    with primitive_of(np.bitwise_or, "my_or", identity=0, commutative=True) as my_or:
        graph = xform.make_graph(lambda x: my_or.bind(my_or.bind(x, 0), np.sin(x) > 0))(X)
        assert names(graph) == ["my_or", "sin", "greater", "my_or"]
        after = run_pass(fold_constants, graph, X)
        assert names(dce(after)) == ["sin", "greater", "my_or"]
        assert after.equations[-1].inputs[0] is graph.inputs[0]
        swapped = xform.make_graph(lambda x: my_or.bind(0, x) + 1)(X)
        assert names(run_pass(fold_constants, swapped, X)) == ["add"]


def test_an_identity_of_a_non_commutative_op_is_folded_on_its_right_only():
    with primitive_of(np.right_shift, "my_shift", identity=0) as shift:
        right = xform.make_graph(lambda x: shift.bind(x, 0) + 1)(X)
        assert names(run_pass(fold_constants, right, X)) == ["add"]
        left = xform.make_graph(lambda x: shift.bind(0, x) + 1)(X)
        assert names(run_pass(fold_constants, left, X)) == ["my_shift", "add"]


def compiled(fun, *args):
    """What `jit(fun)` computes once its code is compiled (the second call)."""
    jitted = xform.jit(fun)
    jitted(*args)
    return jitted(*args)


def test_a_signed_zero_identity_is_matched_with_its_sign():
    """x - 0.0 is x bit for bit; x - (-0.0) turns -0.0 into +0.0, so it stays (it was folded,
    and compiled code returned -0.0)."""
    x = np.array([-0.0, 2.0])
    kept = xform.make_graph(lambda x: (x - (-0.0)) * 2.0)(x)
    assert names(run_pass(fold_constants, kept, x)) == ["subtract", "multiply"]
    got = compiled(lambda x: (x - (-0.0)) * 2.0, x)
    np.testing.assert_array_equal(np.signbit(got), np.signbit((x - (-0.0)) * 2.0))
    dropped = xform.make_graph(lambda x: (x - 0.0) * 2.0)(x)
    assert names(run_pass(fold_constants, dropped, x)) == ["multiply"]


def test_one_is_no_identity_of_complex_products():
    """(a + bj) * (1 + 0j) has a nan real part for an infinite b: it stays (it was folded, and
    compiled code returned b's real part as it was)."""
    x = np.array([complex(0.0, np.inf), 1 + 2j])

    def scaled(x):
        return (x * np.complex128(1 + 0j)) * 2.0
    with np.errstate(invalid="ignore"):
        got, want = compiled(scaled, x), scaled(x)
    np.testing.assert_array_equal(got, want)
    assert names(fold_constants(xform.make_graph(scaled)(x))) == ["multiply", "multiply"]


def test_a_declared_equal_operands_value_replaces_the_op_on_one_operand_twice():
    with primitive_of(np.bitwise_xor, "my_xor", equal_operands=0) as xor:
        graph = xform.make_graph(lambda x: xor.bind(x, x) + x)(X)
        after = dce(simplify(graph, exact=True))
        assert names(after) == ["broadcast_to", "add"]
        np.testing.assert_array_equal(xform.eval_graph(after, X)[0], (X ^ X) + X)
        unequal = xform.make_graph(lambda x: xor.bind(x, x + 1))(X)
        assert simplify(unequal, exact=True) is unequal


def test_a_declared_inverse_is_undone_where_it_is_defined():
    with primitive_of(np.exp2, "my_exp2") as exp2, \
            primitive_of(np.log2, "my_log2", inverted_by=exp2) as log2:
        graph = xform.make_graph(lambda x: exp2.bind(log2.bind(x)))(np.ones(3))
        after = dce(simplify(graph))
        assert names(after) == ["less", "where", "add"]
        x = np.array([0.0, -0.0, 0.3, 5.0, -1.0])
        with np.errstate(all="ignore"):
            want = np.exp2(np.log2(x))
        got = xform.eval_graph(after, x)[0]
        np.testing.assert_allclose(got, want, rtol=1e-15)
        assert not np.signbit(got[1])      # exp2(log2(-0.0)) is +0.0
        # not the inverse it declared: exp of my_log2 stays
        other = xform.make_graph(lambda x: np.exp(log2.bind(x)))(np.ones(3))
        assert names(dce(simplify(other))) == ["my_log2", "exp"]


def test_a_primitive_is_matched_by_its_role_not_by_its_name():
    """A library's primitive called "log" is not numpy's log: exp of it stays (patterns named
    primitives, and exp(log1p(x)) became x)."""
    with primitive_of(np.log1p, "log") as impostor:
        graph = xform.make_graph(lambda x: np.exp(impostor.bind(x)))(np.ones(3))
        after = dce(simplify(graph))
        assert names(after) == ["log", "exp"]
        np.testing.assert_array_equal(xform.eval_graph(after, np.ones(3))[0], np.full(3, 2.0))


def test_a_weak_operand_made_strong_by_an_identity_is_read_as_it_is():
    """(a op e) op2 y -> a op2 y for op2 declaring casts_operands and op's identity e."""
    with primitive_of(np.add, "my_plus", casts_operands=True) as plus:
        graph = xform.make_graph(lambda a, y: plus.bind(a * 1.0, y))(0.5, np.float64(2.0))
        after = run_pass(fold_constants, graph, 0.5, np.float64(2.0))
        assert names(dce(after)) == ["my_plus"]
        assert dce(after).equations[0].inputs[0] is graph.inputs[0]


def test_a_gradients_graph_with_no_pattern_never_reaches_a_rewrite():
    """The prefilter tests each rule's pattern at each equation: the gradient of a scalar
    function holds products of products, but none of a constant or of an array, so no
    rewrite is called (it used to try the repeated scalings on every such graph)."""
    called = []     # (a rewrite that only records its call: it never matches)
    rewrites = tuple(attrs.evolve(rule, rewrite=lambda eqn, known, name=rule.name:
                                  called.append(name))
                     for rule in REWRITES)
    graph = xform.make_graph(xform.grad(lambda x: np.sin(x) * x + 1.0))(0.7)
    assert "multiply" in names(graph)
    assert simplify(graph, rewrites=rewrites) is graph
    assert called == []


@pytest.mark.parametrize("trait", ["identity", "commutative", "casts_operands",
                                   "equal_operands", "inverted_by"])
def test_every_trait_is_declared_by_some_built_in_primitive(trait):
    declared = [getattr(rules.hooks, trait) for rules in RULES.values()]
    assert any(value is not None and value is not False for value in declared)


def test_what_a_peephole_returns_is_folded_in_the_same_walk():
    """Why fold_constants applies the peepholes itself rather than leaving them to simplify:
    c * 1 of a constant too large to fold is c, whose sum folds to a Literal."""
    from xform.ir.registry import primitive_for
    from xform.passes.fold import MAX_FOLDED_SIZE

    b = Builder()
    x = b.input()
    c = b.const(np.linspace(0.0, 1.0, MAX_FOLDED_SIZE + 1))
    total = b(primitive_for("sum"), b(primitive_for("multiply"), c, lit(1.0)), axes=(0,),
              dtype=None)
    graph = b.graph(b(primitive_for("multiply"), x, total))
    after = run_pass(fold_constants, graph, 2.0)
    assert names(after) == ["multiply"]
    assert after.equations[0].inputs[1].value == np.sum(np.linspace(0.0, 1.0, MAX_FOLDED_SIZE + 1))
