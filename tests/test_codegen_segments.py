"""Generated code in segments: the function of a graph of over `SEGMENTED_ABOVE` equations is
cut into functions of about `SEGMENT_LINES` lines (CPython compiles one huge function ever
slower per statement), which must compute the single function's bits, with its warnings, and
free each value where it would. Here both are made tiny, so that small graphs are cut
everywhere they can be."""
import ast
import contextlib
import re
import weakref

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import xform
from xform.codegen import compile_graph, graph_source
from xform.codegen import emit as codegen_emit
from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.registry import register
from xform.rules.unary import sin_p

from tests.test_codegen import FUNCTIONS, drawn_graph
from tests.test_codegen_fast import (ADMISSIONS, FALLBACKS, _warnings_of, admission, assert_same,
                                     check_scalar_dag, scalar_dags, scalars, wrappers)

GENERATED = re.compile(r"xform_graph(_\d+)?|env|fallback|[acvkfms]\d+|numpy\d+"
                       r"|to_float|to_f64|isfinite|ScalarFallback|NonFiniteScalar|map")


@pytest.fixture(params=[1, 3])
def segment_lines(request, monkeypatch):
    """Every graph in segments of a few lines for the test (compiled code cached before is
    dropped)."""
    xform.clear_cache()
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", 0)
    monkeypatch.setattr(codegen_emit, "SEGMENT_LINES", request.param)
    yield request.param
    xform.clear_cache()


def functions_of(source):
    return {node.name: node for node in ast.parse(source).body}


@contextlib.contextmanager
def segments_of(lines, above=0):
    saved = codegen_emit.SEGMENT_LINES, codegen_emit.SEGMENTED_ABOVE
    codegen_emit.SEGMENT_LINES, codegen_emit.SEGMENTED_ABOVE = lines, above
    try:
        yield
    finally:
        codegen_emit.SEGMENT_LINES, codegen_emit.SEGMENTED_ABOVE = saved


def unsegmented(graph):
    """`graph` compiled as one function, whatever the settings."""
    with segments_of(10 ** 9, 10 ** 9):
        return compile_graph(graph)


def assert_bits(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert type(g) is type(w)
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape and g.tobytes() == w.tobytes()


def chain(n):
    """A graph of n dependent sin equations, every value also summed at the end, so values
    cross segments."""
    def fun(x):
        values = [x]
        for _ in range(n):
            values.append(np.sin(values[-1]))
        return sum(values[::7]) * 2.0
    return xform.make_graph(fun)(np.linspace(0.0, 1.0, 6))


# -- the cut ---------------------------------------------------------------------------------------

def test_a_graph_up_to_segmented_above_keeps_one_function(monkeypatch):
    monkeypatch.setattr(codegen_emit, "SEGMENT_LINES", 5)
    graph = chain(40)
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", len(graph.equations))
    source, _ = graph_source(graph)
    assert list(functions_of(source)) == ["xform_graph"]
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", len(graph.equations) - 1)
    assert len(functions_of(graph_source(graph)[0])) > 2


def is_transport(statement):
    """A load from, a store into or a clear of `env`."""
    return isinstance(statement, ast.Assign) and "env[" in ast.unparse(statement)


def test_each_function_holds_about_segment_lines_statements(monkeypatch):
    """Compile work per function is bounded whatever the graph's size: counted in statements
    besides those passing values between segments (each crossing value adds a store, a load
    and a clear, so these are linear in the graph's size too)."""
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", 0)
    monkeypatch.setattr(codegen_emit, "SEGMENT_LINES", 50)
    for n in (100, 400, 1600):
        graph = chain(n)
        source, _ = graph_source(graph)
        functions = functions_of(source)
        assert len(functions) > n // 50                    # cut, and the driver
        transport = 0
        for name, node in functions.items():
            # a segment ends at the first item boundary past 50 lines
            statements = [s for s in node.body if not is_transport(s)]
            transport += len(node.body) - len(statements)
            assert len(statements) <= 2 * 50, (name, len(statements))
        assert transport <= 3 * len(graph.equations)
        assert len(source.splitlines()) < 8 * len(graph.equations)
        x = np.linspace(0.0, 1.0, 6)
        assert_bits(compile_graph(graph)(x), unsegmented(graph)(x))


@pytest.mark.parametrize("fun", FUNCTIONS)
def test_segmented_source_has_only_generated_identifiers(segment_lines, fun):
    graph = xform.make_graph(fun)(np.ones((2, 3)), np.ones((2, 3)))
    source, namespace = graph_source(graph)
    assert len(functions_of(source)) > 2 or segment_lines > 1
    names = {node.id for node in ast.walk(ast.parse(source)) if isinstance(node, ast.Name)}
    names |= {node.arg for node in ast.walk(ast.parse(source)) if isinstance(node, ast.arg)}
    assert all(GENERATED.fullmatch(n) for n in names), names
    assert set(namespace) - {codegen_emit.STATEMENT_SOURCES} <= names


# -- the same bits ---------------------------------------------------------------------------------

@pytest.mark.parametrize("fun", FUNCTIONS)
@given(data=st.data())
def test_segmented_code_computes_the_single_functions_bits(fun, data):
    graph, x, y = drawn_graph(fun, data)
    want = unsegmented(graph)(x, y)
    for lines in (1, 2, 5):
        with segments_of(lines):
            compiled = compile_graph(graph)
        assert compiled.source.count("\ndef ") > 0 or lines > 1
        with np.errstate(all="ignore"):
            assert_bits(compiled(x, y), want)


@pytest.mark.parametrize("admitted", ADMISSIONS)
@given(program=scalar_dags(), x=scalars, y=scalars, wrap_x=wrappers, wrap_y=wrappers)
def test_segmented_scalar_programs_compute_what_numpy_computes(admitted, program, x, y, wrap_x,
                                                               wrap_y):
    """Runs of Python floats cut into pieces and spread over functions: values, types and
    warnings are still the interpreter's."""
    with segments_of(1):
        check_scalar_dag(admitted, program, x, y, wrap_x, wrap_y)


@pytest.mark.parametrize("name, program, args", FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_segmented_fallback_gives_numpys_values_and_warnings(segment_lines, name, program,
                                                             args):
    graph = xform.make_graph(program)(*args)
    with admission("all"):
        compiled = compile_graph(graph)
        got, got_warnings = _warnings_of(lambda: compiled(*args))
    want, want_warnings = _warnings_of(lambda: xform.eval_graph(graph, *args))
    assert want_warnings and got_warnings == want_warnings
    for g, w in zip(got, want):
        assert_same(g, w)


def test_a_long_run_is_cut_into_runs(monkeypatch):
    """In segments, a run longer than SEGMENT_LINES becomes several runs, each falling back on
    its own: an overflow in the middle gives numpy's warning and values."""
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", 0)
    monkeypatch.setattr(codegen_emit, "SEGMENT_LINES", 10)

    def fun(x):
        for i in range(60):
            x = x * 1.5 if i != 30 else x * 1e300
        return x - 1.0
    graph = xform.make_graph(fun)(1.0)
    with admission("exact"):
        compiled = compile_graph(graph)
        tries = [node for node in ast.walk(ast.parse(compiled.source))
                 if isinstance(node, ast.Try)]
        assert len(tries) >= 6
        assert all(len(node.body) <= 10 + 1 for node in tries)     # statements and the check
        for x in (1.0, 1e200, -0.0):
            got, got_warnings = _warnings_of(lambda: compiled(x))
            want, want_warnings = _warnings_of(lambda: xform.eval_graph(graph, x))
            assert got_warnings == want_warnings
            assert_same(got[0], want[0])


def test_first_and_later_gradient_calls_agree_in_segments(segment_lines):
    def f(x):
        for i in range(6):
            x = np.where(x > 0.5, np.tanh(x), x * 1.1) + x[i % 2] * 0.01
        return np.sum(x ** 2)
    grad = xform.grad(f)
    x = np.linspace(0.1, 0.9, 4)
    first, second = grad(x), grad(x)
    assert first.tobytes() == second.tobytes()


# -- memory and tracebacks -------------------------------------------------------------------------

def test_values_taken_by_a_later_segment_are_freed_at_their_last_use(monkeypatch):
    """A value made in the first segment and last read in a later one is deleted there, its slot
    cleared: a probe two segments on sees it gone."""
    monkeypatch.setattr(codegen_emit, "SEGMENTED_ABOVE", 0)
    monkeypatch.setattr(codegen_emit, "SEGMENT_LINES", 1)
    refs = []
    keep_p, probe_p = Primitive("segments_keep"), Primitive("segments_probe")
    register(keep_p, impl=lambda x, y: refs.append(weakref.ref(x)) or x + y)
    register(probe_p, impl=lambda x: np.array(refs[0]() is None))
    big = ShapedArray((1000,), np.float64)
    x, kept, a, b, y, z, alive = (Var(big), Var(big), Var(big), Var(big), Var(big), Var(big),
                                  Var(ShapedArray((), bool)))
    graph = Graph([x], [], [Equation(sin_p, [x], [kept]),
                            Equation(sin_p, [x], [a]),
                            Equation(sin_p, [a], [b]),
                            Equation(keep_p, [kept, b], [y]),
                            Equation(sin_p, [y], [z]),
                            Equation(probe_p, [z], [alive])], [alive])
    compiled = compile_graph(graph)
    assert len(functions_of(compiled.source)) >= 5
    (freed,) = compiled(np.ones(1000))
    assert freed


def test_every_slot_is_cleared_where_its_name_is_deleted(segment_lines):
    graph = chain(40)
    source, _ = graph_source(graph)
    for node in functions_of(source).values():
        taken = {s.targets[0].id for s in node.body if isinstance(s, ast.Assign)
                 and ast.unparse(s.value).startswith("env[")}
        deleted = {t.id for s in node.body if isinstance(s, ast.Delete) for t in s.targets}
        clears = [s for s in node.body if isinstance(s, ast.Assign)
                  and isinstance(s.value, ast.Constant) and s.value.value is None]
        assert len([t for s in clears for t in s.targets]) == len(deleted & taken)


def test_segmented_code_shows_in_tracebacks(segment_lines):
    fail_p = Primitive("segments_fail")

    def impl(x):
        raise RuntimeError("boom")
    register(fail_p, impl=impl)
    f64 = ShapedArray((), np.float64)
    x, a, b, c, y = (Var(f64) for _ in range(5))
    compiled = compile_graph(Graph([x], [], [Equation(sin_p, [x], [a]),
                                             Equation(sin_p, [a], [b]),
                                             Equation(sin_p, [b], [c]),
                                             Equation(fail_p, [c], [y])], [y]))
    assert compiled.source.count("\ndef ") >= 2
    with pytest.raises(RuntimeError) as info:
        compiled(1.0)
    entry = [e for e in info.traceback if str(e.path).startswith("<xform-generated")]
    assert entry and re.fullmatch(r"v\d+ = f\d+\(v\d+\)", str(entry[-1].statement).strip())
    assert "f1(" in str(entry[-1].statement)
