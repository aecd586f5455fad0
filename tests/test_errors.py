"""User-facing errors: the right class, a message fragment, and the user's file:line.

Messages read: the cause, then `  at file:line (function): source text`, then `  hint: ...`.
The offending lines below carry a `# line: <tag>` comment so the tests can find their numbers.
"""
import math

import numpy as np
import pytest
from numpy import asarray

import xform
from xform.ir.core import Primitive
from xform.numpy import FUNCTIONS, implements
from xform.ir.registry import register
from tests.source_lines import assert_points_at


def assert_message_shape(err):
    lines = str(err).splitlines()
    assert lines[0] == err.cause
    assert lines[1].startswith("  at ")
    if err.hint:
        assert lines[2] == f"  hint: {err.hint}"
        assert len(lines) == 3


# -- concretization ----------------------------------------------------------------------------

def branch_on_value(x):
    if x > 0:                                                     # line: if
        return x
    return -x


def to_bool(x):
    return bool(x)                                                # line: bool


def to_float(x):
    return float(x)                                               # line: float


def to_int(x):
    return int(x)                                                 # line: int


def with_math(x):
    return math.exp(x)                                            # line: math


def to_numpy(x):
    # a name bound before staging keeps numpy's own asarray (np.asarray itself stages)
    return asarray(x) * 2                                         # line: asarray


def while_loop(x):
    while x < 10:                                                 # line: while
        x = x * 2
    return x


def python_range(x):
    return sum(range(x.astype(int)))                              # line: range


def index_a_constant(x):
    # a table made by a library's function (a captured one gathers: test_captured_gather.py)
    return np.hanning(5)[x.astype(int)]                           # line: index


def python_max(x):
    return max(0.0, x)                                            # line: max


def zeros_of_traced_size(x):
    return np.zeros(x.astype(int))                                # line: zeros


ABSTRACT = ("this staging has no values (make_graph or eval_shape of shapes, a body of "
            "xform.cond, while_loop or scan, an @xform.function, the function of "
            "xform.threaded_map, a tangent or cotangent a custom rule receives): ")
CONTROL_FLOW = ABSTRACT + ("stage the choice: np.where(c, a, b), xform.cond(pred, true_fn, "
                           "false_fn, x) or xform.switch; or call the transform on arrays, "
                           "whose values decide")
LOOP = ABSTRACT + ("stage the loop: xform.while_loop(cond_fn, body_fn, init) or "
                   "xform.fori_loop; or call the transform on arrays, whose values decide")


def to_array(kind):
    return ABSTRACT + (f"keep it an array (np.asarray(x, dtype={kind}) in place of {kind}(x), "
                       "which eager numpy takes too); or call the transform on arrays, whose "
                       "values are read")
NEEDS = " needs a concrete value, but this value is traced"

# (function, tagged line, exact cause, exact hint): the table of what needs a concrete value
CONCRETIZATION_CASES = [
    (branch_on_value, "if", "a Python `if` on a traced value" + NEEDS, CONTROL_FLOW),
    (while_loop, "while", "a Python `while` on a traced value" + NEEDS, LOOP),
    (to_bool, "bool", "Python control flow (`if`, `while`, `and`, `or`, bool()) on a traced "
     "value" + NEEDS, CONTROL_FLOW),
    (to_float, "float", "float() of a traced value" + NEEDS, to_array("float")),
    (to_int, "int", "int() of a traced value" + NEEDS, to_array("int")),
    (with_math, "math", "math.exp of a traced value (Python's math module needs a float)"
     + NEEDS, "use numpy's function instead (np.sin, np.exp, ...), which stages"),
    (python_range, "range", "range() of a traced value" + NEEDS, LOOP),
    (index_a_constant, "index", "indexing a numpy array with a traced index" + NEEDS,
     "numpy indexes a concrete array itself: use np.take(A, i, axis=0) or "
     "np.take_along_axis(A, i, axis), which stage, or make A a traced value (pass it as an "
     "argument)"),
    (zeros_of_traced_size, "zeros", "numpy.zeros with a traced shape or size" + NEEDS,
     ABSTRACT + "build from a traced array of the right shape (np.zeros_like(x), "
     "np.ones_like(x), np.full_like(x, v)); or call the transform on arrays, whose values give "
     "the size"),
    (python_max, "max", "Python's max() of a traced value" + NEEDS, ABSTRACT +
     "use np.maximum(a, b), which stages; or call the transform on arrays, whose values "
     "decide"),
    (to_numpy, "asarray", "converting a traced value to a numpy array with numpy's own "
     "conversion" + NEEDS, "np.array / np.asarray / np.stack stage when called through `np.`; "
     "a name imported with `from numpy import ...` before staging, or a library's internal "
     "conversion, cannot: call it through np., or use operations xform stages"),
]


def of_shapes(fun):
    return lambda x: xform.make_graph(fun)(xform.ShapedArray((), np.float64))


def shapes_only(fun):
    return lambda x: xform.eval_shape(fun, xform.ShapedArray((), np.float64))


def in_a_cond_branch(fun):
    return lambda x: xform.jit(lambda y: xform.cond(y > 0, fun, fun, y))(x)


# Transforms called on arrays answer these questions from the values (tests/test_values.py);
# stagings without values still cannot.
@pytest.mark.parametrize("fun, tag, cause, hint", CONCRETIZATION_CASES,
                         ids=[case[1] for case in CONCRETIZATION_CASES])
@pytest.mark.parametrize("transform", [of_shapes, shapes_only, in_a_cond_branch],
                         ids=lambda t: t.__name__)
def test_concretization_names_the_construct_and_its_fix(fun, tag, cause, hint, transform):
    with pytest.raises(xform.ConcretizationError) as info:
        transform(fun)(1.5)
    assert_points_at(info.value, __file__, tag, fun.__name__)
    assert (info.value.cause, info.value.hint) == (cause, hint)
    assert_message_shape(info.value)
    assert isinstance(info.value, TypeError)      # also catchable as the Python error


def test_static_argument_can_be_branched_on():
    fun = xform.jit(lambda x, n: x * 2 if n > 0 else x, static_argnums=1)
    assert fun(3.0, 1) == 6.0 and fun(3.0, -1) == 3.0


# -- shapes --------------------------------------------------------------------------------------

def add_mismatched(x, y):
    return x + y                                                  # line: add


@pytest.mark.parametrize("transform", [xform.jit, xform.make_graph, xform.grad],
                         ids=lambda t: t.__name__)
def test_shape_mismatch_names_the_line(transform):
    with pytest.raises(xform.ShapeError) as info:
        transform(add_mismatched)(np.ones(3), np.ones(4))
    assert_points_at(info.value, __file__, "add", "add_mismatched")
    assert "(3,)" in str(info.value) and "(4,)" in str(info.value)
    assert isinstance(info.value, ValueError)


def test_reshape_to_a_wrong_size():
    with pytest.raises(xform.ShapeError) as info:
        xform.jit(lambda x: x.reshape(4))(np.ones(3))             # line: reshape
    assert_points_at(info.value, __file__, "reshape")


# -- unsupported numpy -------------------------------------------------------------------------

def call_fft(x):
    return np.spacing(x)                                          # line: fft


def test_unsupported_function_is_named_in_full():
    with pytest.raises(xform.UnsupportedError) as info:
        xform.jit(call_fft)(np.ones(4))
    assert "numpy.spacing" in info.value.cause


def test_unsupported_function_names_the_line_and_how_to_register():
    with pytest.raises(xform.UnsupportedError) as info:
        xform.jit(call_fft)(np.ones(4))
    assert_points_at(info.value, __file__, "fft", "call_fft")
    assert_message_shape(info.value)
    assert "not supported" in info.value.cause
    assert "xform.implements" in info.value.hint and "xform.Primitive" in info.value.hint
    assert isinstance(info.value, NotImplementedError)


def test_unsupported_ufunc_and_options():
    with pytest.raises(xform.UnsupportedError, match="numpy.gcd"):
        xform.jit(lambda x: np.gcd(x, 2))(np.arange(3))
    with pytest.raises(xform.UnsupportedError, match="where="):
        xform.jit(lambda x: np.sin(x, where=x > 0))(np.ones(3))
    buffer = np.empty(3)    # the caller's array: staged code never writes into it
    with pytest.raises(xform.UnsupportedError, match="out="):
        xform.jit(lambda x: np.sin(x, out=buffer))(np.ones(3))
    # an array the function makes itself is written as eager numpy writes it
    np.testing.assert_array_equal(
        xform.jit(lambda x: np.sin(x, out=np.empty(3)))(np.ones(3)), np.sin(np.ones(3)))


def test_registering_makes_an_unsupported_function_work():
    roll_p = Primitive("test_errors_fftshift")
    register(roll_p, impl=np.fft.fftshift, abstract_eval=lambda x: x)
    previous = FUNCTIONS.get(np.fft.fftshift)
    implements(np.fft.fftshift)(roll_p.bind)
    try:
        x = np.arange(5.0)
        np.testing.assert_array_equal(xform.jit(np.fft.fftshift)(x), np.fft.fftshift(x))
    finally:
        if previous is None:
            del FUNCTIONS[np.fft.fftshift]
        else:
            FUNCTIONS[np.fft.fftshift] = previous


def test_missing_rule_names_the_line():
    noderiv_p = Primitive("test_errors_noderiv")
    register(noderiv_p, impl=np.cos, abstract_eval=lambda x: x)

    def fun(x):
        return noderiv_p.bind(x) * 2.0                            # line: noderiv
    assert xform.jit(fun)(0.0) == 2.0
    with pytest.raises(xform.MissingRuleError) as info:
        xform.grad(fun)(0.0)
    assert_points_at(info.value, __file__, "noderiv", "fun")
    assert "test_errors_noderiv" in info.value.cause and "jvp" in str(info.value)


def test_a_primitive_bound_in_a_numpy_callback_names_the_callbacks_line():
    # numpy calls the callback from inside its own call, whose line is not the one to name
    noderiv_p = Primitive("test_errors_noderiv_in_callback")
    register(noderiv_p, impl=np.cos, abstract_eval=lambda x: x)

    def piece(x):
        return noderiv_p.bind(x) * 2.0                            # line: piece

    def row(v):
        return noderiv_p.bind(v) * 3.0                            # line: row

    for fun, tag in [(lambda x: np.piecewise(x, [x > 0.5], [piece, 0.0]), "piece"),
                     (lambda x: np.sum(np.apply_along_axis(row, 0, x)), "row")]:
        with pytest.raises(xform.MissingRuleError) as info:
            xform.grad(lambda x: np.sum(fun(x)))(np.ones(3))
        assert_points_at(info.value, __file__, tag)


# -- transform misuse ------------------------------------------------------------------------

def test_grad_of_a_non_scalar_output():
    with pytest.raises(xform.XformError) as info:
        xform.grad(lambda x: x * 2.0)(np.ones(3))                 # line: nonscalar
    assert "scalar" in info.value.cause and "f64[3]" in info.value.cause
    assert_points_at(info.value, __file__, "nonscalar")
    assert "xform.vjp" in info.value.hint or "jacrev" in info.value.hint


def test_grad_of_a_pytree_output():
    with pytest.raises(xform.XformError, match="scalar"):
        xform.grad(lambda x: (x, x))(1.0)


@pytest.mark.parametrize("call", [
    lambda: xform.jit(lambda x: x)("text"),
    lambda: xform.grad(lambda x: x)("text"),
    lambda: xform.vmap(lambda x: x)("text"),
    lambda: xform.make_graph(lambda x: x)("text"),
    lambda: xform.jvp(lambda x: x, ("text",), ("text",)),
    lambda: xform.vjp(lambda x: x, "text"),
    lambda: xform.jit(lambda p: p["a"])({"a": 1.0, "b": "text"}),
    lambda: xform.jit(lambda x: x)(object()),
], ids=["jit", "grad", "vmap", "make_graph", "jvp", "vjp", "jit-tree", "jit-object"])
def test_string_argument_is_a_type_check_error(call):
    with pytest.raises(xform.TypeCheckError) as info:
        call()
    assert "str" in str(info.value) or "object" in str(info.value)
    assert info.value.source.filename == __file__


def test_escaped_tracer():
    stash = []

    def leak(x):
        stash.append(x)
        return x
    xform.jit(leak)(1.0)
    with pytest.raises(xform.XformError, match="escaped") as info:
        xform.jit(lambda y: y + stash[0])(2.0)                    # line: escaped
    assert_points_at(info.value, __file__, "escaped")


def test_item_assignment_into_an_argument():
    def assign(x):
        x[0] = 1.0                                                # line: setitem
        return x
    with pytest.raises(xform.TypeCheckError, match="caller's array") as info:
        xform.jit(assign)(np.ones(3))
    assert_points_at(info.value, __file__, "setitem", "assign")


# -- user arrays are never mutated -----------------------------------------------------------

def in_place_style(x, y):
    x += y            # rebinds x inside the function; the caller's array is unchanged
    x *= 2.0
    return np.sum(x * y)


@pytest.mark.parametrize("transform", [
    xform.jit, xform.grad, lambda f: xform.grad(f, argnums=(0, 1)), xform.vmap,
    lambda f: xform.jit(xform.grad(f)), lambda f: xform.vmap(xform.grad(f)),
], ids=["jit", "grad", "grad01", "vmap", "jit-grad", "vmap-grad"])
def test_user_arrays_are_not_mutated(transform):
    x, y = np.arange(6.0).reshape(2, 3), np.linspace(-1.0, 1.0, 6).reshape(2, 3)
    x_copy, y_copy = x.copy(), y.copy()
    transform(in_place_style)(x, y)
    transform(in_place_style)(x, y)                   # the cached path too
    np.testing.assert_array_equal(x, x_copy)
    np.testing.assert_array_equal(y, y_copy)
    assert x.flags.writeable and y.flags.writeable


# -- error classes ------------------------------------------------------------------------------

@pytest.mark.parametrize("cls, base", [
    (xform.ConcretizationError, TypeError), (xform.ShapeError, ValueError),
    (xform.UnsupportedError, NotImplementedError), (xform.TypeCheckError, TypeError),
    (xform.TreeMismatchError, ValueError), (xform.GraphCheckError, AssertionError),
    (xform.MissingRuleError, NotImplementedError),
])
def test_error_hierarchy(cls, base):
    assert issubclass(cls, xform.XformError) and issubclass(cls, base)
    assert cls.__doc__ and len(cls.__doc__.strip()) > 20


def test_message_without_source_or_hint():
    err = xform.XformError("plain cause")
    assert str(err) == "plain cause" and err.source is None and err.hint is None


def test_errors_pickle():
    import pickle
    try:
        xform.jit(to_float)(1.0)
    except xform.ConcretizationError as err:
        copy = pickle.loads(pickle.dumps(err))
        assert type(copy) is xform.ConcretizationError and str(copy) == str(err)
        assert copy.source == err.source and copy.hint == err.hint
    missing = xform.MissingRuleError(Primitive("p"), "vjp")
    assert str(pickle.loads(pickle.dumps(missing))) == str(missing)
