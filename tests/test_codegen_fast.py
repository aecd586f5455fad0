"""Fast generated code: 0-d float64 values as Python floats, `x[i]` as plain indexing, and ufuncs
writing into dead buffers. Every result must be the numpy interpreter's, bit for bit, with the
same types and the same warnings, and no user array may ever be written.

Which operations run on Python floats (xform.codegen.scalar) is pinned by the tests, never
left to this machine: `admitted` runs a test under no admitted operation, the "exact" set,
and every candidate, whose `math` functions are replaced by numpy-backed stand-ins (numpy's
values, math's habit of raising where numpy warns), so every outcome is the same on any CPU.
What this machine's `math` really gives is checked on its own, against the documented bound."""
import ast
import contextlib
import math
import re
import threading
import time
import warnings
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

import xform
from xform.codegen import compile_graph, graph_source
from xform.codegen import emit as codegen_emit
from xform.codegen import scalar
from xform.codegen.scalar import (FAST_MAX_ULPS, agrees, bits, sample_values,
                                  scalar_operations, ulp_distance)
from xform.ir.avals import ShapedArray
from xform.ir.core import Equation, Graph, Primitive, Var
from xform.ir.registry import register
from xform.runtime.cache import CACHE
from xform.rules.unary import UNARY_PRIMITIVES, log_p, sin_p

SPECIAL = [0.0, -0.0, math.inf, -math.inf, math.nan, -math.nan, 1e308, -1e308, 5e-324,
           -5e-324, 1e-300, 709.0, 710.0, 1.0, -1.0, math.pi]
scalars = st.one_of(st.sampled_from(SPECIAL), st.floats(allow_nan=True, allow_infinity=True),
                    st.floats(-10.0, 10.0))
wrappers = st.sampled_from([float, np.float64, np.array])


# -- pinning what is admitted ---------------------------------------------------------------------

def numpy_backed(ufunc):
    """A stand-in for a `math` function: numpy's value, and ValueError wherever numpy warns."""
    def function(x):
        with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
            try:
                return float(ufunc(x))
            except FloatingPointError:
                raise ValueError(f"{ufunc.__name__}({x})") from None
    function.__name__ = f"numpy_backed_{ufunc.__name__}"
    return function


ADMISSIONS = ("none", "exact", "all")


def admitted_table(name):
    if name == "none":
        return {}
    table = {}
    for prim, candidate in scalar.candidates().items():
        if candidate.exact:
            table[prim] = candidate.op
        elif name == "all":
            table[prim] = candidate.op._replace(function=numpy_backed(candidate.ufunc))
    return table


@contextlib.contextmanager
def admission(name):
    xform.clear_cache()                  # compiled code keeps the choice it was made with
    try:
        with scalar.pinned(admitted_table(name)):
            yield name
    finally:
        xform.clear_cache()


@pytest.fixture(params=ADMISSIONS)
def admitted(request):
    with admission(request.param):
        yield request.param


def is_stand_in(value):
    return getattr(value, "__name__", "").startswith("numpy_backed_")


# -- helpers ---------------------------------------------------------------------------------------

def assert_same(got, want):
    """Same type and dtype, same bits. The nan a sum of two nans keeps is the one exception:
    which one survives differs between numpy's ufuncs and scalar operators, and between
    CPython's own paths, before and after this change alike."""
    assert type(got) is type(want)
    got_array, want_array = np.asarray(got), np.asarray(want)
    assert got_array.dtype == want_array.dtype and got_array.shape == want_array.shape
    for g, w in zip(got_array.ravel().tolist(), want_array.ravel().tolist()):
        assert bits(float(g)) == bits(float(w)) or (math.isnan(g) and math.isnan(w)), (g, w)


def reference(graph, *args):
    with np.errstate(all="ignore"):
        return xform.eval_graph(graph, *args)


def compiled_quietly(graph, *args):
    with np.errstate(all="ignore"):
        return compile_graph(graph)(*args)


def takes_scalar_path(source):
    return ("to_float(" in source and "except ScalarFallback:" in source
            and "if fallback:" in source)


def scalar_code(source):
    """The statements inside the scalar path's `try` blocks, as source."""
    return [ast.unparse(statement) for node in ast.walk(ast.parse(source))
            if isinstance(node, ast.Try) for statement in node.body]


# -- scalar programs --------------------------------------------------------------------------

SCALAR_PROGRAMS = [
    lambda x, y: np.sin(x) * y + 2.0,
    lambda x, y: np.exp(x) - np.cos(y) * x / y,
    lambda x, y: -np.sqrt(x * x + y * y) + np.log(np.abs(x) + 1e-3) * 3,
    lambda x, y: np.arctan(x * 1e300 * y) + np.expm1(y) * np.log1p(x) - x,
    lambda x, y: np.tanh(np.sinh(x) * y) + np.cosh(y) * np.square(x - y),
    lambda x, y: (x * y, np.exp(x * y) - 1.0, x / y + y / x),
    lambda x, y: np.power(x * y, 2) + x * y * 2 - np.float32(1.5) * y,       # power stays numpy
]
# Correctly rounded operations only: on Python floats under the "exact" policy too.
ARITHMETIC_PROGRAMS = [
    lambda x, y: np.sqrt(x * x + y * y) * 0.5 - np.abs(x) / y,
    lambda x, y: (x - y) * (x + y) / (x * y + 1.0) - np.square(x) * 3.0,
]


@pytest.mark.parametrize("admitted", ADMISSIONS)
@pytest.mark.parametrize("program", SCALAR_PROGRAMS + ARITHMETIC_PROGRAMS)
@given(x=scalars, y=scalars, wrap_x=wrappers, wrap_y=wrappers)
@example(x=1e308, y=10.0, wrap_x=float, wrap_y=float)
@example(x=0.0, y=-0.0, wrap_x=np.float64, wrap_y=float)
@example(x=math.inf, y=math.nan, wrap_x=np.array, wrap_y=np.float64)
@example(x=-5e-324, y=710.0, wrap_x=float, wrap_y=np.array)
def test_scalar_programs_compute_what_numpy_computes(admitted, program, x, y, wrap_x, wrap_y):
    graph = xform.make_graph(program)(wrap_x(x), wrap_y(y))
    with admission(admitted):
        got = compiled_quietly(graph, wrap_x(x), wrap_y(y))
    want = reference(graph, wrap_x(x), wrap_y(y))
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert_same(g, w)


@pytest.mark.parametrize("program", SCALAR_PROGRAMS[:5] + ARITHMETIC_PROGRAMS)
def test_the_scalar_path_is_taken_where_admitted(admitted, program):
    source, namespace = graph_source(xform.make_graph(program)(0.5, 0.25))
    arithmetic = program in ARITHMETIC_PROGRAMS
    if admitted == "none":
        assert not takes_scalar_path(source)
        return
    if admitted == "all" or arithmetic:
        assert takes_scalar_path(source)
    if not takes_scalar_path(source):     # "exact" on a mixed program: worth it or not
        return
    lines = scalar_code(source)
    # Python's operators and admitted functions on Python floats only: no numpy value or impl
    assert any(re.search(r"\S [-+*/] \S", line) for line in lines)
    names = {name for line in lines for name in re.findall(r"[a-zA-Z_]\w*", line)}
    assert names and all(re.fullmatch(r"[skm]\d+|if|not|isfinite|raise|NonFiniteScalar", name)
                         for name in names), names
    functions = [namespace[name] for name in names if name.startswith("m")]
    if admitted == "exact":
        assert all(f in (math.sqrt, math.fabs) for f in functions), functions
    elif not arithmetic:
        assert any(map(is_stand_in, functions)), functions


def expression_depth(node):
    children = [expression_depth(c) for c in ast.iter_child_nodes(node) if isinstance(c, ast.expr)]
    return isinstance(node, (ast.BinOp, ast.UnaryOp, ast.Call)) + max(children, default=0)


def test_values_read_once_are_written_into_their_reader_and_literals_shared():
    def program(x):
        for _ in range(40):
            x = x * 0.5 + 0.25
        return np.cos(x)
    graph = xform.make_graph(program)(0.3)
    with admission("exact"):
        source, namespace = graph_source(graph)
    assert len(scalar_code(source)) < len(graph.equations) / 8
    depths = [expression_depth(node.value) for node in ast.walk(ast.parse(source))
              if isinstance(node, ast.Assign)]
    assert 8 < max(depths) <= 13            # bounded: at most 12 values nest
    assert sorted(v for v in namespace.values() if type(v) is float) == [0.25, 0.5]
    assert_same(compile_graph(graph)(0.3)[0], reference(graph, 0.3)[0])


def test_a_lone_operation_keeps_numpy(admitted):
    # converting in and out would cost more than the one operation saves
    for program in (lambda x: x * 2.0, lambda x: np.sin(x), lambda x, y: x / y):
        args = (np.float64(1.5),) * program.__code__.co_argcount
        source, _ = graph_source(xform.make_graph(program)(*args))
        assert not takes_scalar_path(source)


def test_outputs_keep_their_types(admitted):
    # np.float64 for computed 0-d values; arguments and constants pass through as they are
    fun = xform.jit(lambda x, y: (np.sin(x) * y + 1.0, np.cos(x) - y * y, x))
    for x in (0.5, np.float64(0.5), np.array(0.5)):
        outs = fun(x, 2.0)
        assert type(outs[0]) is np.float64 and type(outs[1]) is np.float64
        assert outs[2] is x
        want = (np.sin(x) * 2.0 + 1.0, np.cos(x) - 2.0 * 2.0)
        assert_same(outs[0], np.float64(want[0]))
        assert_same(outs[1], np.float64(want[1]))


# -- what each policy admits -------------------------------------------------------------------

def test_the_exact_policy_admits_correctly_rounded_operations_only():
    assert scalar.EXACT == xform.config.scalar_math           # the default
    admitted = scalar_operations(scalar.EXACT)
    names = {prim.name for prim in admitted}
    assert {"add", "subtract", "multiply", "divide", "negative", "square", "sqrt",
            "absolute"} <= names
    assert not names & {p.name for p, c in scalar.candidates().items() if not c.exact}


def fake_candidates(functions):
    """A candidate table of tanh computed by each of `functions` in turn (under new prims)."""
    table = {}
    for index, function in enumerate(functions):
        prim = Primitive(f"codegen_fast_fake_{index}")
        table[prim] = scalar.Candidate(np.tanh, function, False,
                                       scalar.ScalarOp("{f}({0})", function, watched=(0,)))
    return table


def test_the_fast_policy_admits_within_the_bound_and_raising_where_numpy_warns(monkeypatch):
    def off_by(ulps):
        def function(x):
            value = float(np.tanh(x))
            for _ in range(ulps):
                value = math.nextafter(value, math.inf)
            return value
        return function
    quiet_on_overflow = lambda x: math.inf if x > 1e300 else float(np.tanh(x))  # noqa: E731
    table = fake_candidates([off_by(0), off_by(FAST_MAX_ULPS), off_by(FAST_MAX_ULPS + 1),
                             math.tanh, quiet_on_overflow])
    monkeypatch.setattr(scalar, "candidates", lambda: table)
    monkeypatch.setattr(scalar, "_verdicts", {})
    prims = list(table)
    fast = scalar_operations(scalar.FAST)
    assert [prim in fast for prim in prims[:3]] == [True, True, False]
    assert prims[4] not in fast
    assert not scalar_operations(scalar.EXACT)
    # math.tanh itself: admitted exactly when it is within the bound on the sample
    singles = scalar.operand_sets(1)
    assert (prims[3] in fast) == agrees(np.tanh, math.tanh, singles, flags_may_hide=False,
                                        max_ulps=FAST_MAX_ULPS)


def test_config_chooses_the_policy_of_compiled_code(monkeypatch):
    """The fast policy's `math.sin` is taken only under scalar_math="fast" (its verdict forced:
    whether this machine's math.sin passes is checked on its own, below)."""
    monkeypatch.setattr(scalar, "_verdicts", {(scalar.FAST, sin_p): scalar.candidates()[sin_p].op})
    graph = xform.make_graph(SCALAR_PROGRAMS[0])(0.5, 0.25)
    exact = CACHE.compiled(graph)            # compiled under xform.config's policy
    assert math.sin not in exact.fn.__globals__.values()
    xform.config.update("scalar_math", "fast")
    try:
        fast = CACHE.compiled(graph)
        assert math.sin in fast.fn.__globals__.values() and takes_scalar_path(fast.source)
        got, want = fast(0.5, 0.25)[0], reference(graph, 0.5, 0.25)[0]
        assert ulp_distance(float(got), float(want)) <= 2 * FAST_MAX_ULPS
    finally:
        xform.config.update("scalar_math", "exact")
    with pytest.raises(ValueError, match="'exact', 'fast'"):
        xform.config.update("scalar_math", "approximate")


# -- falling back to numpy ------------------------------------------------------------------------

def _warnings_of(call):
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = call()
    # numpy's scalar operators say "in scalar multiply" where its ufuncs say "in multiply"
    messages = sorted(str(w.message).replace("scalar ", "") for w in caught)
    assert all(w.category is RuntimeWarning for w in caught)
    return result, messages


FALLBACKS = [
    ("x / 0.0", lambda x, y: np.sin(x) * y / (x - x) + np.cos(y), (1.5, 2.0)),
    ("exp(1000)", lambda x, y: np.exp(x * y) * y - np.sin(y), (500.0, 2.0)),
    ("log(0)", lambda x, y: np.log(x - x) * y + np.sin(y) * x, (1.5, 2.0)),
    ("sin(inf)", lambda x, y: np.sin(x * y) * y + np.cos(y) * x, (1e200, 1e200)),
    ("overflow", lambda x, y: np.arctan(x * y * y) + np.sin(x) * y, (1e200, 1e200)),
    ("inf - inf", lambda x, y: np.exp(-(x * y - x * y)) + np.sin(x) * y, (1e200, 1e200)),
    ("sqrt(-1)", lambda x, y: np.sqrt(x - y) * y + np.cos(x) * y, (1.0, 2.0)),
    ("exact: x / 0.0", lambda x, y: (x * y + y) / (x - x) * 2.0, (1.5, 2.0)),
    ("exact: overflow", lambda x, y: np.sqrt(x * y * y) - x * 3.0, (1e200, 1e200)),
]


@pytest.mark.parametrize("name, program, args", FALLBACKS, ids=[f[0] for f in FALLBACKS])
def test_fallback_gives_numpys_values_and_warnings(admitted, name, program, args):
    graph = xform.make_graph(program)(*args)
    compiled = compile_graph(graph)
    if admitted == "none":
        assert not takes_scalar_path(compiled.source)
    elif admitted == "all" or name.startswith("exact"):
        assert takes_scalar_path(compiled.source)
    got, got_warnings = _warnings_of(lambda: compiled(*args))
    want, want_warnings = _warnings_of(lambda: xform.eval_graph(graph, *args))
    assert want_warnings and got_warnings == want_warnings
    for g, w in zip(got, want):
        assert_same(g, w)
    with np.errstate(all="raise"), pytest.raises(FloatingPointError) as info:
        compiled(*args)
    assert info.value.__context__ is None       # not raised while handling the scalar path's


def counting_graph():
    """cos(exp(log(y))) and sin(y) of y = count(x), where count counts its calls."""
    calls = []
    count_p = Primitive("codegen_fast_count")
    register(count_p, impl=lambda x: calls.append(1) or np.float64(x))
    f64 = ShapedArray((), np.float64)
    x, y, z, w, u, out = (Var(f64) for _ in range(6))
    graph = Graph([x], [], [Equation(count_p, [x], [y]),
                            Equation(log_p, [y], [z]),
                            Equation(UNARY_PRIMITIVES["sin"], [y], [w]),
                            Equation(UNARY_PRIMITIVES["exp"], [z], [u]),
                            Equation(UNARY_PRIMITIVES["cos"], [u], [out])], [out, w])
    return graph, calls


def test_fallback_recomputes_the_run_only(monkeypatch):
    """An impl before a failing run runs once: the run, not the graph, is recomputed, by
    numpy statements generated and compiled the first time they are needed (the fast code
    holds no numpy copy of its scalar equations)."""
    graph, calls = counting_graph()
    generated = []
    original = graph_source
    monkeypatch.setattr(codegen_emit, "graph_source", lambda *a, **k: generated.append(k)
                        or original(*a, **k))
    with admission("all"):
        compiled = compile_graph(graph)
    assert takes_scalar_path(compiled.source)
    impls = [v for v in compiled.fn.__globals__.values() if isinstance(v, np.ufunc)]
    assert impls == [np.sin]                 # alone, sin is not worth converting for
    assert_same(compiled(1.0)[0], np.cos(np.exp(np.log(np.float64(1.0)))))
    assert len(calls) == 1 and len(generated) == 1
    for expected_calls in (2, 3):
        with np.errstate(all="ignore"):
            got = compiled(0.0)              # log(0.0): math raises, numpy gives -inf
        assert len(calls) == expected_calls
        with np.errstate(all="ignore"):
            assert_same(got[0], np.cos(np.exp(np.log(np.float64(0.0)))))
        assert_same(got[1], np.sin(np.float64(0.0)))
    assert generated == [{}, {"scalar_math": None}]       # the run's numpy code, once


def test_the_numpy_run_is_compiled_once_under_concurrent_fallbacks(monkeypatch):
    graph, _ = counting_graph()
    with admission("all"):
        compiled = compile_graph(graph)
    generated = []
    original = graph_source

    def slow_source(*args, **kwargs):
        generated.append(kwargs)
        time.sleep(0.05)                     # let the other threads arrive meanwhile
        return original(*args, **kwargs)
    monkeypatch.setattr(codegen_emit, "graph_source", slow_source)
    start = threading.Barrier(6)

    def fall_back():
        start.wait()
        with np.errstate(all="ignore"):
            return compiled(0.0)
    with ThreadPoolExecutor(6) as pool:
        results = list(pool.map(lambda _: fall_back(), range(6)))
    assert generated == [{"scalar_math": None}]
    with np.errstate(all="ignore"):
        want = np.cos(np.exp(np.log(np.float64(0.0))))
    for got in results:
        assert_same(got[0], want)
        assert_same(got[1], np.sin(np.float64(0.0)))


UNARY_SCALAR = [np.sin, np.cos, np.exp, np.log, np.sqrt, np.arctan, np.tanh, np.negative,
                np.square, np.expm1, np.abs]
BINARY_SCALAR = [np.add, np.subtract, np.multiply, np.divide]


@st.composite
def scalar_dags(draw):
    """Straight-line programs over two 0-d values: each step applies an operation to earlier
    values or literals, so values are read once, many times, or never, and expressions nest."""
    steps = []
    for index in range(draw(st.integers(1, 24))):
        live = index + 2
        if draw(st.booleans()):
            steps.append((draw(st.sampled_from(UNARY_SCALAR)), draw(st.integers(0, live - 1))))
        else:
            second = draw(st.one_of(st.integers(0, live - 1), st.sampled_from(
                [("literal", 2.0), ("literal", -0.5), ("literal", 3)])))
            steps.append((draw(st.sampled_from(BINARY_SCALAR)), draw(st.integers(0, live - 1)),
                          second))
    count = len(steps) + 2
    outputs = draw(st.lists(st.integers(0, count - 1), min_size=0, max_size=3))
    return steps, sorted(set(outputs) | {count - 1})


def evaluate_scalar_dag(program, x, y):
    steps, outputs = program
    values = [x, y]
    for fn, *operands in steps:
        values.append(fn(*[o[1] if type(o) is tuple else values[o] for o in operands]))
    return tuple(values[i] for i in outputs)


@pytest.mark.parametrize("admitted", ADMISSIONS)
@given(program=scalar_dags(), x=scalars, y=scalars, wrap_x=wrappers, wrap_y=wrappers)
@example(program=([(np.exp, 0), (np.multiply, 2, 2), (np.sin, 3)], [4]), x=800.0, y=1.0,
         wrap_x=float, wrap_y=np.float64)
@example(program=([(np.divide, 0, 1), (np.arctan, 2)], [3]), x=1.0, y=0.0,
         wrap_x=np.float64, wrap_y=np.array)
def test_random_scalar_programs_compute_what_numpy_computes(admitted, program, x, y, wrap_x,
                                                            wrap_y):
    """Nested expressions, values read twice, unused values, checks and fallbacks: the
    compiled function's values and warnings are the interpreter's."""
    check_scalar_dag(admitted, program, x, y, wrap_x, wrap_y)


def check_scalar_dag(admitted, program, x, y, wrap_x, wrap_y):
    fun = lambda a, b: evaluate_scalar_dag(program, a, b)        # noqa: E731
    graph = xform.make_graph(fun)(wrap_x(x), wrap_y(y))
    with admission(admitted):
        compiled = compile_graph(graph)
    got, got_warnings = _warnings_of(lambda: compiled(wrap_x(x), wrap_y(y)))
    want, want_warnings = _warnings_of(lambda: xform.eval_graph(graph, wrap_x(x), wrap_y(y)))
    assert got_warnings == want_warnings
    for g, w in zip(got, want, strict=True):
        assert_same(g, w)


# -- what this machine's functions give ---------------------------------------------------------

def broad_sample():
    """20,000 values over every magnitude and sign, and the self-check's own edge values."""
    rng = np.random.default_rng(7)
    values = np.concatenate([rng.uniform(-10.0, 10.0, 5000), rng.uniform(-1.0, 1.0, 3000),
                             10.0 ** rng.uniform(-300.0, 300.0, 4000),
                             -(10.0 ** rng.uniform(-300.0, 300.0, 4000)),
                             1.0 + rng.uniform(-1e-3, 1e-3, 2000), rng.uniform(-800, 800, 2000)])
    return sample_values() + values.tolist()


def operand_sets(values, nin):
    if nin == 1:
        return [((x,), (np.float64(x),)) for x in values]
    pairs = list(zip(values, reversed(values)))
    return [(xy, tuple(map(np.float64, xy))) for xy in pairs] + scalar.operand_sets(2)


def test_exact_operations_agree_bit_for_bit_on_a_broad_sample():
    values = broad_sample()
    for prim, candidate in scalar.candidates().items():
        if candidate.exact:
            assert agrees(candidate.ufunc, candidate.python,
                          operand_sets(values, candidate.nin),
                          flags_may_hide=candidate.op.tracked), prim


def test_what_this_machine_admits_as_fast_is_within_the_bound_on_a_broad_sample():
    """The fast policy's promise, for whatever this machine's `math` and numpy admit."""
    values = broad_sample()
    for prim, op in scalar_operations(scalar.FAST).items():
        candidate = scalar.candidates()[prim]
        assert agrees(candidate.ufunc, candidate.python,
                      operand_sets(values, candidate.nin),
                      flags_may_hide=candidate.op.tracked, max_ulps=FAST_MAX_ULPS), prim


@given(x=scalars)
@example(x=math.pi / 2)
@example(x=-0.0)
def test_what_this_machine_admits_as_fast_is_within_the_bound_beyond_the_sample(x):
    for prim, op in scalar_operations(scalar.FAST).items():
        if op.function is None:
            continue
        try:
            got = op.function(x)
        except (ValueError, OverflowError):
            continue                          # the generated code falls back to numpy
        with np.errstate(divide="raise", over="raise", invalid="raise", under="ignore"):
            want = getattr(np, prim.name)(np.float64(x))   # numpy would not warn
        limit = 0 if scalar.candidates()[prim].exact else FAST_MAX_ULPS
        assert ulp_distance(got, float(want)) <= limit, (prim, x)


def test_the_self_check_rejects_disagreeing_functions():
    singles = [((x,), (np.float64(x),)) for x in sample_values()]
    sin = numpy_backed(np.sin)
    off_by_an_ulp = lambda x: math.nextafter(sin(x), math.inf)    # noqa: E731
    assert not agrees(np.sin, off_by_an_ulp, singles, flags_may_hide=False)
    assert agrees(np.sin, off_by_an_ulp, singles, flags_may_hide=False, max_ulps=1)
    # math.degrees(1e308) is inf without raising, where numpy warns of the overflow
    assert not agrees(np.rad2deg, math.degrees, singles, flags_may_hide=False)
    assert UNARY_PRIMITIVES["rad2deg"] not in scalar_operations(scalar.FAST)


def test_ulp_distance():
    assert ulp_distance(1.0, math.nextafter(1.0, 2.0)) == 1
    assert ulp_distance(-0.0, 0.0) == 0 and ulp_distance(5e-324, -5e-324) == 2
    assert ulp_distance(math.nan, math.nan) == 0 and ulp_distance(math.nan, 1.0) > 2 ** 60


# -- x[i] ---------------------------------------------------------------------------------------

def test_indexing_is_plain_and_agrees():
    program = lambda x: np.sin(x[1, 2]) * x[0, 0] + x[1, 0] * x[0, 1]     # noqa: E731
    x = np.arange(6.0).reshape(2, 3) / 7
    graph = xform.make_graph(program)(x)
    source, _ = graph_source(graph)
    assert re.search(r"= a0\[k\d+\]", source) and "a0[k" in source
    before = x.copy()
    got, want = compile_graph(graph)(x), reference(graph, x)
    assert_same(got[0], want[0])
    np.testing.assert_array_equal(x, before)


def test_an_indexed_output_keeps_its_type():
    x = np.arange(4.0)
    graph = xform.make_graph(lambda x: (x[1], x[2] * 2.0))(x)
    got, want = compile_graph(graph)(x), reference(graph, x)
    for g, w in zip(got, want):
        assert_same(g, w)


# -- buffer reuse ---------------------------------------------------------------------------------

SHAPE = (32, 48)   # large enough for buffer reuse

UNARY = [np.sin, np.cos, np.exp, np.negative, np.tanh, np.abs]
BINARY = [np.add, np.multiply, np.subtract, np.maximum]
VIEWS = [lambda v: v.T.T, lambda v: v.reshape(-1).reshape(SHAPE), lambda v: v[::-1],
         lambda v: np.broadcast_to(v[:1], SHAPE), lambda v: v]


@st.composite
def programs(draw):
    """Straight-line programs over arrays of one shape: ufuncs, views, and outputs anywhere."""
    steps = []
    for index in range(draw(st.integers(2, 9))):
        live = index + 2                       # two arguments, then one value per step
        kind = draw(st.sampled_from(["unary", "binary", "view", "scalar"]))
        first = draw(st.integers(0, live - 1))
        if kind == "unary":
            steps.append((kind, draw(st.sampled_from(UNARY)), first))
        elif kind == "binary":
            steps.append((kind, draw(st.sampled_from(BINARY)), first,
                          draw(st.integers(0, live - 1))))
        elif kind == "view":
            steps.append((kind, draw(st.sampled_from(VIEWS)), first))
        else:
            steps.append((kind, draw(st.sampled_from(BINARY)), first))
    count = len(steps) + 2
    outputs = draw(st.lists(st.integers(0, count - 1), min_size=1, max_size=3))
    return steps, sorted(set(outputs) | {count - 1})


def run_program(program, x, y):
    steps, outputs = program
    values = [x, y]
    for step in steps:
        kind, fn, first = step[:3]
        if kind == "binary":
            values.append(fn(values[first], values[step[3]]))
        elif kind == "scalar":
            values.append(fn(values[first], 0.5))
        else:
            values.append(fn(values[first]))
    return tuple(values[i] for i in outputs)


@given(program=programs(), seed=st.integers(0, 2 ** 16))
def test_buffer_reuse_never_writes_user_arrays_and_agrees(program, seed):
    rng = np.random.default_rng(seed)
    x, y = rng.standard_normal(SHAPE), rng.standard_normal(SHAPE)
    x_before, y_before = x.copy(), y.copy()
    graph = xform.make_graph(lambda a, b: run_program(program, a, b))(x, y)
    got = compiled_quietly(graph, x, y)
    np.testing.assert_array_equal(x, x_before)
    np.testing.assert_array_equal(y, y_before)
    want = reference(graph, x_before, y_before)
    for g, w in zip(got, want):
        assert_same(g, w)
    # jit runs the passes first, then the same codegen
    for g, w in zip(xform.jit(lambda a, b: run_program(program, a, b))(x, y), want):
        np.testing.assert_array_equal(g, w)
    np.testing.assert_array_equal(x, x_before)


def test_a_chain_of_ufuncs_writes_in_place():
    graph = xform.make_graph(lambda x: np.sin(np.cos(np.exp(x))) * x)(np.ones(SHAPE))
    source, _ = graph_source(graph)
    assert source.count("out=") == 3 and "out=a0" not in source


def test_a_viewed_buffer_is_not_written():
    def program(x):
        a = np.sin(x)
        view = a.reshape(-1)          # a view of a's buffer, alive until the end
        b = np.cos(a)                 # a's last use, but its buffer is still seen by `view`
        return b * 2.0, view
    x = np.linspace(0.0, 1.0, SHAPE[0] * SHAPE[1]).reshape(SHAPE)
    graph = xform.make_graph(program)(x)
    source, _ = graph_source(graph)
    assert "out=v0" not in source
    got = compile_graph(graph)(x)
    np.testing.assert_array_equal(got[1], np.sin(x).reshape(-1))
    np.testing.assert_array_equal(got[0], np.cos(np.sin(x)) * 2.0)


def test_outputs_and_arguments_are_not_written():
    def program(x):
        a = np.exp(x)
        return np.sin(a), a, np.cos(x)
    x = np.linspace(0.0, 1.0, SHAPE[0] * SHAPE[1]).reshape(SHAPE)
    source, _ = graph_source(xform.make_graph(program)(x))
    assert "out=" not in source


# -- debug mode -----------------------------------------------------------------------------------

def test_debug_mode_checks_every_value_and_takes_no_shortcut():
    graph = xform.make_graph(lambda x, y: (np.sin(x[0]) * y + np.cos(np.exp(x[1])) * y,
                                           np.sin(np.cos(x)) * 2.0))(np.ones(2048), 0.5)
    with admission("all"):
        fast, _ = graph_source(graph)
    assert takes_scalar_path(fast) and "out=" in fast and "a0[k" in fast
    source, _ = graph_source(graph, debug=True)
    assert "to_float" not in source and "out=" not in source and "a0[k" not in source
    assert source.count("check_values(") == len(graph.equations)


# -- transforms through the fast code ------------------------------------------------------------

def product_chain(x):
    y = x[0]
    for _ in range(30):
        y = y * x[1]
    return np.sin(y) + y * x[2]


@pytest.mark.parametrize("fun, arg", [
    (lambda x: np.sin(x) * x + 1.0, 0.7),
    (lambda x: np.exp(np.sin(x) * x) / (1.0 + x * x), -1.3),
    (product_chain, np.array([0.9, 1.01, 0.3])),
    (lambda x: np.sum(np.sin(np.cos(np.exp(x))) * x), np.linspace(0.0, 1.0, 2000)),
])
def test_grad_and_jit_results_are_the_interpreters(admitted, fun, arg):
    for transform in (xform.grad, xform.jit):
        got = transform(fun)(arg)
        want = xform.eval_graph(xform.make_graph(transform(fun))(arg), arg)[0]
        assert_same(got, want)


def _pad_sum_operands(source, namespace):
    """The operand names of the generated pad_sum call (pad_sum_impl bound as some f*)."""
    from xform.rules.accumulate import pad_sum_p
    impl = xform.ir.registry.RULES[pad_sum_p].impl
    (name,) = [k for k, v in namespace.items() if getattr(v, "func", None) is impl]
    (call,) = re.findall(rf"= {name}\((.*)\)", source)
    return call.split(", ")


def _powers_placed(a, b):
    """b, b^2, ... b^40 times a (Python floats in compiled code), each at its own element."""
    from xform.rules.accumulate import pad_sum
    terms = [a]
    for _ in range(40):
        terms.append(terms[-1] * b)
    return pad_sum(terms[1:], [((i, i + 1, 1),) for i in range(40)], (40,))


@pytest.mark.parametrize("args", [(0.9, 1.01), (1e300, 1e10), (-0.0, 0.5)])  # 2nd: falls back
def test_pad_sum_takes_python_floats_as_they_are(admitted, args):
    """pad_sum takes its 0-d operands as they are (hook "takes_floats"): terms made as Python
    floats are not converted one by one, and the result is still the interpreter's bit for
    bit, also when the run falls back."""
    graph = xform.make_graph(_powers_placed)(*args)
    source, namespace = graph_source(graph)
    operands = _pad_sum_operands(source, namespace)
    assert len(operands) == 40
    if admitted == "none":
        assert all(name.startswith("v") for name in operands)
    else:
        assert all(name.startswith("s") for name in operands)
        assert not re.findall(r"= to_f64\(", source)
    assert_same(compiled_quietly(graph, *args)[0], reference(graph, *args)[0])
