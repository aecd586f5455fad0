"""Codegen: the generated source holds only generated identifiers, frees each value after its
last use, and computes what the reference interpreter computes."""
import ast
import re
import weakref

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.codegen import compile_graph, graph_source
from xform.codegen.emit import STATEMENT_SOURCES
from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.registry import register
from xform.rules.unary import cos_p, sin_p
from xform.testing import strategies as xst

GENERATED = re.compile(r"xform_graph|[acvkf]\d+")
F64 = ShapedArray((), np.float64)


def identifiers(source):
    """Every identifier the source mentions (names, arguments, function names, attributes)."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Name):
            found.add(node.id)
        elif isinstance(node, ast.arg):
            found.add(node.arg)
        elif isinstance(node, ast.FunctionDef):
            found.add(node.name)
        elif isinstance(node, ast.Attribute):
            found.add(node.attr)
    return found


def statements(source):
    return ast.parse(source).body[0].body


def assert_same(got, want):
    got, want = np.asarray(got), np.asarray(want)
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)


FUNCTIONS = [
    lambda x, y: np.sin(x) * y + 2.0,
    lambda x, y: (x - y, x * x, y),
    lambda x, y: np.where(x > y, np.exp(x), y / 3.0).sum(axis=0),
    lambda x, y: (np.tanh(x).T.reshape(-1), (x + y).astype(np.float32)),
    lambda x, y: np.maximum(x, 0.5) - np.clip(y, -1.0, 1.0) ** 2,
]


# -- generated identifiers only -----------------------------------------------------------------

@pytest.mark.parametrize("fun", FUNCTIONS)
def test_source_has_only_generated_identifiers(fun):
    graph = xform.make_graph(fun)(np.ones((2, 3)), np.ones((2, 3)))
    source, namespace = graph_source(graph)
    names = identifiers(source)
    assert names and all(GENERATED.fullmatch(n) for n in names), names
    # every global is used, but the line table warnings read (no code reads it)
    assert set(namespace) - {STATEMENT_SOURCES} <= names


def test_no_user_text_reaches_the_source():
    # a non-ASCII, keyword-laden function name, written with escapes to keep this file ASCII
    user_code = ("def __import__os_system_weird_NAME_\u01c5(secret_input):\n"
                 "    secret_local = np.sin(secret_input) * secret_weights\n"
                 "    return secret_local * secret_scale + np.float32(7.5)\n")
    namespace = {"np": np, "secret_weights": np.arange(3.0), "secret_scale": 1.25}
    exec(user_code, namespace)
    (fun,) = [v for k, v in namespace.items() if k.startswith("__import__")]
    graph = xform.make_graph(fun)(np.ones(3))
    source, _ = graph_source(graph)
    assert source.isascii()
    for text in ("secret", "import", "weird", "\u01c5", "1.25", "7.5", "0.", "sin", "float"):
        assert text not in source
    assert all(GENERATED.fullmatch(n) for n in identifiers(source))


def test_weird_lambda_names_and_dtypes_do_not_reach_the_source():
    fun = lambda x: x.astype(np.float32).reshape(1, -1).sum(axis=1)   # noqa: E731
    fun.__name__ = "'; raise SystemExit #"
    fun.__qualname__ = fun.__name__
    source = xform.jit(fun)  # jit compiles through the same codegen
    assert source(np.ones(3)).dtype == np.float32
    text, _ = graph_source(xform.make_graph(fun)(np.ones(3)))
    assert "SystemExit" not in text and "float32" not in text and "axis" not in text


# -- del of dead values ----------------------------------------------------------------------

def test_values_are_deleted_after_their_last_use():
    # not the argument: the caller holds it until the call returns anyway
    graph = xform.make_graph(lambda x: np.cos(np.sin(x)) + x)(np.ones(3))
    source, _ = graph_source(graph)
    assert source == (
        "def xform_graph(a0):\n"
        "    v0 = f0(a0)\n"
        "    v1 = f1(v0)\n"
        "    del v0\n"
        "    v2 = v1 + a0\n"
        "    del v1\n"
        "    return [v2]\n")


def test_zero_d_values_are_deleted_only_when_they_may_hold_an_array():
    """A 0-d value made by a ufunc holds no other memory; one made by another primitive may be
    a view that keeps a large array alive."""
    graph = xform.make_graph(lambda x, y: (np.cos(np.sin(x)) * 2.0, np.sum(y * 3.0) * 2.0))(
        np.float32(0.5), np.ones(3))
    source, namespace = graph_source(graph)
    body = statements(source)
    deleted = {name.id for stmt in body if isinstance(stmt, ast.Delete)
               for name in stmt.targets}
    made_by = {stmt.targets[0].id: namespace[stmt.value.func.id] for stmt in body
               if isinstance(stmt, ast.Assign) and isinstance(stmt.value, ast.Call)}
    by_ufunc = {name for name, fn in made_by.items() if isinstance(fn, np.ufunc)}
    by_other = set(made_by) - by_ufunc
    assert len(by_ufunc) == 2 and not deleted & by_ufunc
    assert len(by_other) == 1 and by_other <= deleted          # sum's 0-d result
    got = compile_graph(graph)(np.float32(0.5), np.ones(3))
    assert_same(got[0], np.cos(np.sin(np.float32(0.5))) * 2.0)
    assert_same(got[1], np.float64(18.0))


def test_arithmetic_is_inline_only_when_an_operand_is_surely_a_numpy_value():
    # Two Python scalars would use Python's arithmetic (1.0 / 0.0 raises, True + True is 2),
    # so such equations keep the ufunc.
    weak = xform.make_graph(lambda x, y: x / y)(1.0, 0.0)
    assert "f0(a0, a1)" in graph_source(weak)[0]
    assert xform.jit(lambda x, y: x / y)(1.0, 2.0) == 0.5
    bools = xform.make_graph(lambda x, y: x + y)(True, True)
    assert "f0(a0, a1)" in graph_source(bools)[0]
    assert xform.jit(lambda x, y: x + y)(True, True) == np.add(True, True)
    strong = xform.make_graph(lambda x, y: x / y)(np.float64(1.0), 2.0)
    assert "a0 / a1" in graph_source(strong)[0]
    for x, y in [(np.float64(1.0), 0.0), (np.float32(3.0), 2.0), (np.ones(2), 2)]:
        with np.errstate(all="ignore"):
            got, want = xform.jit(lambda a, b: a / b - a * b + a)(x, y), x / y - x * y + x
        assert type(got) is type(want) and np.array_equal(got, want)


def test_unused_outputs_are_deleted_at_once():
    pair_p = Primitive("codegen_pair", multiple_results=True)
    register(pair_p, impl=lambda x: [x + 1.0, x + 2.0])
    x, y, z, w = Var(F64), Var(F64), Var(F64), Var(F64)
    graph = Graph([x], [], [Equation(pair_p, [x], [y, z]), Equation(sin_p, [z], [w])], [w])
    source, _ = graph_source(graph)
    body = source.splitlines()[1:]
    assert body[0] == "    v0, v1 = f0(a0)"
    assert body[1] == "    del v0"
    assert compile_graph(graph)(0.5) == [np.sin(2.5)]


def test_outputs_and_consts_are_never_deleted():
    table = np.arange(3.0)
    graph = xform.make_graph(lambda x: (np.sin(x), np.sin(x) * table, x))(np.ones(3))
    source, _ = graph_source(graph)
    deleted = {name.id for stmt in statements(source) if isinstance(stmt, ast.Delete)
               for name in stmt.targets}
    assert not deleted & {"a0", "c0"}
    returned = statements(source)[-1].value.elts
    assert not deleted & {r.id for r in returned}


@pytest.mark.parametrize("fun", FUNCTIONS)
def test_every_deleted_name_is_dead(fun):
    graph = xform.make_graph(fun)(np.ones((2, 3)), np.ones((2, 3)))
    source, _ = graph_source(graph)
    body = statements(source)
    for index, stmt in enumerate(body):
        if not isinstance(stmt, ast.Delete):
            continue
        for target in stmt.targets:
            later = {n.id for s in body[index + 1:] for n in ast.walk(s)
                     if isinstance(n, ast.Name)}
            assert target.id not in later
            earlier = [n.id for s in body[:index] for n in ast.walk(s)
                       if isinstance(n, ast.Name)]
            assert target.id in earlier


def test_intermediates_are_freed_while_running():
    """A probe primitive sees whether the previous intermediate is still alive."""
    refs = []
    keep_p, probe_p = Primitive("codegen_keep"), Primitive("codegen_probe")
    register(keep_p, impl=lambda x: refs.append(weakref.ref(x)) or x.copy())
    register(probe_p, impl=lambda x: np.array(refs[0]() is None))
    big = ShapedArray((1000,), np.float64)
    x, kept, y, alive = Var(big), Var(big), Var(big), Var(ShapedArray((), bool))
    graph = Graph([x], [], [Equation(sin_p, [x], [kept]),
                            Equation(keep_p, [kept], [y]),
                            Equation(probe_p, [y], [alive])], [alive])
    (freed,) = compile_graph(graph)(np.ones(1000))
    assert freed                                  # sin's result died after keep used it


# -- compiled equals interpreted ------------------------------------------------------------------

def drawn_graph(fun, data):
    """The graph of `fun` on two arrays of a drawn float dtype and shape, and the arrays."""
    dtype = data.draw(xst.float_dtypes)
    shape = data.draw(st.sampled_from([(2, 3), (1, 4), (3, 1)]))
    x, y = data.draw(xst.arrays(shape, dtype)), data.draw(xst.arrays(shape, dtype))
    return xform.make_graph(fun)(x, y), x, y


@pytest.mark.parametrize("fun", FUNCTIONS)
@given(data=st.data())
def test_compiled_equals_eval_graph(fun, data):
    graph, x, y = drawn_graph(fun, data)
    compiled = compile_graph(graph)
    got, want = compiled(x, y), xform.eval_graph(graph, x, y)
    assert len(got) == len(want) == len(graph.outputs)
    for g, w in zip(got, want):
        assert_same(g, w)


def test_compiled_graph_keeps_source_and_does_not_own_the_graph():
    graph = xform.make_graph(lambda x: np.sin(x))(1.0)
    compiled = compile_graph(graph)
    assert compiled.graph is graph
    assert compiled.source.startswith("def xform_graph(a0):")
    ref = weakref.ref(graph)
    del graph
    assert ref() is None and compiled.graph is None   # no cycle through the cache
    assert compiled(0.0) == [0.0]


def test_compiled_code_shows_in_tracebacks():
    fail_p = Primitive("codegen_fail")

    def impl(x):
        raise RuntimeError("boom")
    register(fail_p, impl=impl)
    x, y = Var(F64), Var(F64)
    compiled = compile_graph(Graph([x], [], [Equation(fail_p, [x], [y])], [y]))
    with pytest.raises(RuntimeError) as info:
        compiled(1.0)
    entry = [e for e in info.traceback if str(e.path).startswith("<xform-generated")]
    assert entry and "f0(a0)" in str(entry[0].statement)


def test_graph_with_literal_and_const_outputs():
    table = np.arange(2.0)
    graph = xform.make_graph(lambda x: (1.5, table, x))(np.ones(2))
    got = compile_graph(graph)(np.zeros(2))
    assert got[0] == 1.5 and got[1] is table
    assert_same(got[2], np.zeros(2))


def test_each_equation_runs_once():
    calls = []
    count_p = Primitive("codegen_count")
    register(count_p, impl=lambda x: calls.append(1) or x)
    x, y, z = Var(F64), Var(F64), Var(F64)
    graph = Graph([x], [], [Equation(count_p, [x], [y]), Equation(cos_p, [y], [z])], [z, y])
    compiled = compile_graph(graph)
    compiled(1.0)
    compiled(2.0)
    assert len(calls) == 2


def test_dead_generated_code_leaves_linecache_at_the_next_definition():
    # Not inside the finalizer, which can run inside linecache.checkcache's loop over its keys
    # (pdb, doctest): a key removed there raised KeyError in that loop.
    import gc
    import linecache
    before = set(linecache.cache)
    f = xform.jit(lambda x: np.sin(x) + 1.5)
    f(1.0)
    f(1.0)      # (the second call compiles: xform.runtime.tiers)
    ours = {k for k in set(linecache.cache) - before if k.startswith("<xform-generated")}
    assert ours
    xform.clear_cache()
    del f
    gc.collect()
    assert ours <= set(linecache.cache)          # still there: nothing removed by the collector
    linecache.checkcache()
    g = xform.jit(lambda x: x * 3.5)
    g(1.0), g(1.0)                               # the next definition (compiled) drops them
    assert not ours & set(linecache.cache)
