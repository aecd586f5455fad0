"""The catalogue of user mistakes (docs/ERRORS.md): each raises an xform error naming the
user's line (tagged `# line: <tag>` below) with a hint, never a raw numpy or Python error from
inside xform. The doc's table is rendered from CASES and compared, so it cannot go stale."""
import gc
import os
import re
import warnings

import numpy as np
import pytest
import scipy.integrate
import scipy.signal

import xform
from xform import Primitive
from xform.errors import (OutOfMemoryError, RegistrationError, SideEffectError,
                          StagingRecursionError)
from xform.extend import register
from tests.source_lines import assert_points_at, line_of

DOC = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                   "docs", "ERRORS.md")
X = np.array([0.5, 1.5, 2.5])


def square_sum(x):
    return np.sum(x * x)


# -- the user's code, one function per mistake; the offending line is tagged ------------------

def argnums_out_of_range():
    return xform.grad(square_sum, argnums=2)(X)                               # line: argnums


def argnums_not_an_int():
    return xform.grad(square_sum, argnums="x")(X)                             # line: argnums-type


def transform_of_a_value():
    return xform.grad(square_sum(X))                                          # line: not-callable


def grad_of_an_array_output():
    return xform.grad(lambda x: x * 2.0)(X)                                   # line: nonscalar


def grad_of_integers():
    return xform.grad(square_sum)(np.arange(3))                               # line: int-grad


def tangents_of_another_structure():
    return xform.jvp(np.multiply, (1.0, 2.0), (1.0,))                         # line: t-tree


def tangent_of_another_shape():
    return xform.jvp(np.sin, (X,), (np.ones(4),))                             # line: t-shape


def complex_tangent_for_a_real_primal():
    return xform.jvp(np.sin, (X,), (X + 1j,))                                 # line: t-dtype


def primals_not_in_a_tuple():
    return xform.jvp(np.sin, X, np.ones(3))                                   # line: t-tuple


def cotangent_of_another_structure():
    _, vjp_fn = xform.vjp(lambda x: (x, 2.0 * x), X)
    return vjp_fn(np.ones(3))                                                 # line: ct-tree


def cotangent_of_another_shape():
    _, vjp_fn = xform.vjp(np.sin, X)
    return vjp_fn(np.ones(4))                                                 # line: ct-shape


def complex_cotangent_for_a_real_output():
    _, vjp_fn = xform.vjp(np.sin, X)
    return vjp_fn(np.ones(3) * 1j)                                            # line: ct-dtype


def branch_on_a_traced_value(x):
    if x > 0:                                                                 # line: if
        return x
    return -x


def range_of_a_traced_value(n):
    return sum(range(n))                                                      # line: range


def int_of_a_traced_value(x):
    return int(x)                                                             # line: int


def float_of_a_differentiated_value(x):
    return x * float(x)                                                       # line: float-cut


SCALAR = xform.ShapedArray((), np.float64)   # an abstract value: a staging without values


def len_of_a_traced_scalar(x):
    return len(x)                                                             # line: len


def iterate_a_traced_scalar(x):
    return sum(v * v for v in x)                                              # line: iter


def unsupported_numpy(x):
    return np.spacing(x)                                                      # line: numpy


def unsupported_scipy(x):
    return scipy.signal.medfilt(x)                                            # line: scipy


TABLE = np.zeros(3)
WEIGHTS = np.ones(3)


def write_traced_into_a_concrete_array(x):
    out = TABLE.copy()     # numpy's own method: a concrete array (np.array(TABLE) stages)
    out[0] = x                                                                # line: write
    return out


def mutate_a_captured_array(x):
    # eager numpy's write would happen once, while staging: refused at the write
    WEIGHTS[0] += 1.0                                                         # line: captured
    return x * WEIGHTS


def call_mutate_a_captured_array():
    try:
        return xform.jit(mutate_a_captured_array)(1.0)
    finally:
        WEIGHTS[:] = 1.0


def cond_branches_of_different_types(x):
    return xform.cond(x > 0, lambda v: v, lambda v: np.ones(3) * v, x)        # line: cond


def while_body_changing_shapes(x):
    return xform.while_loop(lambda c: c[0] < 9, lambda c: np.tile(c, 2), x)  # line: while


def the_text_of_an_array_in_a_result(x):
    return np.sum(x), "x = " + str(x)                                         # line: array-text


def recurse_without_base_case(x):
    return recurse_without_base_case(x * 2.0)                                 # line: recursion


@xform.custom_vjp
def scale(x):
    return 2.0 * x


def _scale_fwd(x):
    return 2.0 * x, None


def _scale_bwd(residuals, g):                                                 # line: custom-vjp
    return (np.ones(4),)


scale.defvjp(_scale_fwd, _scale_bwd)

twice_p = Primitive("test_bad_inputs_twice")
register(twice_p, impl=np.sin, abstract_eval=lambda x: x)


def register_twice():
    register(twice_p, impl=np.sin, abstract_eval=lambda x: x)                 # line: register


wrong_jvp_p = Primitive("test_bad_inputs_wrong_jvp")
register(wrong_jvp_p, impl=np.sin, abstract_eval=lambda x: x,
         jvp=lambda primals, tangents: (np.sin(primals[0]), np.ones(5)))


def use_a_rule_of_the_wrong_shape(x):
    return np.sum(wrong_jvp_p.bind(x))                                        # line: rule


def vmap_over_mismatched_sizes():
    return xform.vmap(np.add)(np.ones(3), np.ones(4))                         # line: vmap


def threaded_map_over_different_lengths():
    return xform.threaded_map(lambda a, b: a * b, np.ones(3), np.ones(4))     # line: tmap


def pass_a_generator():
    return xform.jit(square_sum)(v for v in X)                                # line: generator


def huge_intermediate(x):
    return np.zeros((10 ** 7, 10 ** 7)) + x                                   # line: huge


STASH = []


def escape_a_tracer():
    xform.jit(lambda x: STASH.append(x) or x)(1.0)
    return xform.jit(lambda y: y + STASH[0])(2.0)                             # line: escaped


def write_into_the_argument(x):
    x[0] = 1.0                                                                # line: setitem
    return x


def add_mismatched_shapes(x):
    return x + np.ones(4)                                                     # line: shapes


def numpy_scalar_of_a_traced_value(x):
    return np.float64(x) * 2.0                                                # line: np-scalar


class Params:
    def __init__(self, w):
        self.w = w


def loss_of_params(params, x):
    return params.w * np.sum(x ** 2)


def plain_object_argument():
    return xform.grad(loss_of_params)(Params(1.5), X)


def decay_ivp(t, y, k):
    return -k * y


TIGHT = dict(rtol=1e-10, atol=1e-12)     # the solver's tolerances: finite differences agree


def solve_ivp_without_t_eval(k):
    sol = scipy.integrate.solve_ivp(decay_ivp, (0, 1), np.ones(1), args=(k,), **TIGHT)
    return sol.y[0, -1]


def decay(y, t, k):
    return -k * y


def odeint_end(k):
    return scipy.integrate.odeint(decay, np.ones(1), np.array([0.0, 1.0]), args=(k,), **TIGHT)[-1, 0]


def hessian_through_odeint():
    return xform.hessian(odeint_end)(0.5)


# (category, tag, call, error class, the start of the message's cause)
CASES = [
    ("argnums out of range", "argnums", argnums_out_of_range, xform.TypeCheckError,
     "argnums 2 out of range for 1 arguments"),
    ("argnums not an int", "argnums-type", argnums_not_an_int, xform.TypeCheckError,
     "argnums must be ints"),
    ("a transform of a value, not a function", "not-callable", transform_of_a_value,
     xform.TypeCheckError, "grad needs a function, got float64"),
    ("grad of a non-scalar output", "nonscalar", grad_of_an_array_output,
     xform.TypeCheckError, "grad needs a scalar float output, got f64[3]"),
    ("grad of integer inputs", "int-grad", grad_of_integers, xform.TypeCheckError,
     "grad needs float or complex inputs to differentiate"),
    ("jvp tangents of another structure", "t-tree", tangents_of_another_structure,
     xform.TreeMismatchError, "tangents have structure"),
    ("jvp tangent of another shape", "t-shape", tangent_of_another_shape, xform.ShapeError,
     "tangent of shape (4,) for a primal of shape (3,)"),
    ("jvp tangent of another dtype", "t-dtype", complex_tangent_for_a_real_primal,
     xform.TypeCheckError, "a complex tangent (complex128) for a real value"),
    ("jvp primals not in a tuple", "t-tuple", primals_not_in_a_tuple, xform.TypeCheckError,
     "jvp takes primals as a tuple or list"),
    ("vjp cotangent of another structure", "ct-tree", cotangent_of_another_structure,
     xform.TreeMismatchError, "vjp_fn got a cotangent of structure"),
    ("vjp cotangent of another shape", "ct-shape", cotangent_of_another_shape,
     xform.ShapeError, "vjp_fn got a cotangent of shape (4,)"),
    ("vjp cotangent of another dtype", "ct-dtype", complex_cotangent_for_a_real_output,
     xform.TypeCheckError, "a complex cotangent (complex128) for a real value"),
    ("Python control flow on a value staged without values", "if",
     lambda: xform.make_graph(branch_on_a_traced_value)(SCALAR), xform.ConcretizationError,
     "a Python `if` on a traced value"),
    ("range() of a value staged without values", "range",
     lambda: xform.make_graph(range_of_a_traced_value)(xform.ShapedArray((), np.int64)),
     xform.ConcretizationError, "range() of a traced value"),
    ("int() of a value staged without values", "int",
     lambda: xform.make_graph(int_of_a_traced_value)(SCALAR), xform.ConcretizationError,
     "int() of a traced value"),
    ("float() of a value being differentiated", "float-cut",
     lambda: xform.grad(float_of_a_differentiated_value)(1.0), xform.ConcretizationError,
     "float() of a value that is being differentiated"),
    ("a traced array's text in a string among the results", "array-text",
     lambda: xform.jit(the_text_of_an_array_in_a_result)(X), xform.ConcretizationError,
     "the text of a traced array in a string among the results"),
    ("len() of a traced scalar", "len", lambda: xform.jit(len_of_a_traced_scalar)(1.0),
     xform.TypeCheckError, "len() of a 0-d traced value"),
    ("iteration over a traced scalar", "iter",
     lambda: xform.grad(iterate_a_traced_scalar)(1.5), xform.TypeCheckError,
     "iteration over a 0-d traced value"),
    ("unsupported numpy function", "numpy", lambda: xform.jit(unsupported_numpy)(X),
     xform.UnsupportedError, "numpy.spacing is not supported on traced values"),
    ("unsupported SciPy function", "scipy", lambda: xform.jit(unsupported_scipy)(X),
     xform.UnsupportedError, "scipy.signal.medfilt"),
    ("a concrete array written with a traced value", "write",
     lambda: xform.jit(write_traced_into_a_concrete_array)(1.0), xform.ConcretizationError,
     "writing a traced value or index into a concrete numpy array"),
    ("a captured numpy array mutated while staging", "captured",
     call_mutate_a_captured_array, SideEffectError,
     "the staged function wrote into a numpy array it captured, 'WEIGHTS'"),
    ("cond branches of different types", "cond",
     lambda: xform.jit(cond_branches_of_different_types)(1.0), xform.ShapeError,
     "switch branches return different types"),
    ("while_loop body changing shapes", "while",
     lambda: xform.jit(while_body_changing_shapes)(np.ones(2)), xform.ShapeError,
     "while_loop body_fun changes the carry"),
    ("recursion without a base case", "recursion",
     lambda: xform.jit(recurse_without_base_case)(1.0), StagingRecursionError,
     "staging recursed past Python's recursion limit"),
    ("custom_vjp bwd of a wrong shape", "custom-vjp",
     lambda: xform.grad(lambda x: np.sum(scale(x)))(X), xform.ShapeError,
     "the bwd of 'scale' returned a cotangent of shape (4,)"),
    ("a primitive registered twice", "register", register_twice, RegistrationError,
     "primitive 'test_bad_inputs_twice' is already registered"),
    ("a rule returning the wrong shape", "rule",
     lambda: xform.grad(use_a_rule_of_the_wrong_shape)(X), xform.RuleError,
     "the jvp rule of 'test_bad_inputs_wrong_jvp' returned a tangent f64[5]"),
    ("vmap over mismatched axis sizes", "vmap", vmap_over_mismatched_sizes, xform.ShapeError,
     "vmap got inconsistent sizes along the mapped axes: 3 and 4"),
    ("threaded_map over arrays of different lengths", "tmap",
     threaded_map_over_different_lengths, xform.ShapeError,
     "threaded_map: inputs must have equal shapes"),
    ("a generator or iterator argument", "generator", pass_a_generator,
     xform.TypeCheckError, "argument args[0] of type generator is not an array"),
    ("a huge shape (out of memory)", "huge", lambda: xform.jit(huge_intermediate)(1.0),
     OutOfMemoryError, "out of memory"),
    ("a traced value kept after staging", "escaped", escape_a_tracer, xform.XformError,
     "a traced value escaped the function that staged it"),
    ("writing into an argument", "setitem", lambda: xform.jit(write_into_the_argument)(X),
     xform.TypeCheckError, "writing into an argument of the staged function"),
    ("shapes that do not broadcast", "shapes", lambda: xform.jit(add_mismatched_shapes)(X),
     xform.ShapeError, "add: shape mismatch"),
    ("a numpy scalar type of a traced value", "np-scalar",
     lambda: xform.grad(numpy_scalar_of_a_traced_value)(1.0), xform.ConcretizationError,
     "np.float64() of a traced value"),
]


@pytest.mark.parametrize("category, tag, call, cls, cause", CASES,
                         ids=[case[1] for case in CASES])
def test_a_mistake_raises_an_xform_error_at_the_users_line_with_a_hint(category, tag, call,
                                                                       cls, cause):
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # no numpy warning escapes on the way either
        with pytest.raises(cls) as info:
            call()
    err = info.value
    assert isinstance(err, xform.XformError)
    assert err.cause.startswith(cause), err.cause
    assert_points_at(err, __file__, tag)
    assert err.hint and len(err.hint) > 20, f"no hint for {category}"


def test_the_catalogue_is_large_enough():
    assert len(CASES) >= 20
    assert len({case[0] for case in CASES}) == len({case[1] for case in CASES}) == len(CASES)


# -- the doc table -----------------------------------------------------------------------------

def example_of(tag):
    """The tagged line of this file, as the doc shows it."""
    with open(__file__) as f:
        text = f.readlines()[line_of(__file__, tag) - 1]
    return text.split("# line:")[0].strip()


def render_table():
    rows = ["| Mistake | Example (the line the error names) | Error | Message starts with |",
            "|---|---|---|---|"]
    for category, tag, _, cls, cause in CASES:
        message = cause.replace("|", "\\|").replace("`", "'")
        rows.append(f"| {category} | `{example_of(tag)}` | `{cls.__name__}` | {message} |")
    return "\n".join(rows)


def doc_table():
    with open(DOC) as f:
        text = f.read()
    match = re.search(r"<!-- catalogue start -->\n(.*?)\n<!-- catalogue end -->", text, re.S)
    assert match, "docs/ERRORS.md lost its catalogue markers"
    return match.group(1)


def test_the_doc_table_is_the_catalogue():
    """Regenerate with: python -c "from tests.test_bad_inputs import render_table as r;
    print(r())" and paste between the markers of docs/ERRORS.md."""
    assert doc_table() == render_table()


# -- not errors: numpy's semantics, and a clean interrupt --------------------------------------

def log_and_sqrt(x):
    return np.log(x) + np.sqrt(x)


def test_nan_and_inf_inputs_follow_numpy_with_its_warnings():
    x = np.array([0.0, -1.0, np.inf, np.nan, 2.0])
    with warnings.catch_warnings(record=True) as expected_warnings:
        warnings.simplefilter("always")
        expected = log_and_sqrt(x)
    with warnings.catch_warnings(record=True) as got_warnings:
        warnings.simplefilter("always")
        got = xform.jit(log_and_sqrt)(x)
    np.testing.assert_array_equal(got, expected)           # equal_nan by default
    assert {w.category for w in got_warnings} == {w.category for w in expected_warnings}
    assert {w.category for w in expected_warnings} == {RuntimeWarning}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        gradient = xform.grad(lambda v: np.sum(log_and_sqrt(v)))(x)
    assert np.isnan(gradient[1]) and np.isnan(gradient[3]) and gradient[2] == 0.0
    np.testing.assert_allclose(gradient[4], 1 / 2.0 + 0.5 / np.sqrt(2.0))


interrupt_p = Primitive("test_bad_inputs_interrupt")
_interrupt = {"now": False}


def _interruptible(x):
    if _interrupt["now"]:
        raise KeyboardInterrupt        # Ctrl-C in the middle of a long compiled call
    return np.cos(x)


register(interrupt_p, impl=_interruptible, abstract_eval=lambda x: x,
         jvp=lambda primals, tangents: (interrupt_p.bind(primals[0]),
                                        -np.sin(primals[0]) * tangents[0]))


def long_call(x):
    return np.sum(interrupt_p.bind(np.sin(x)) * 2.0)


@pytest.mark.parametrize("transform", [xform.jit, xform.value_and_grad],
                         ids=["jit", "value_and_grad"])
def test_keyboard_interrupt_mid_call_leaves_the_cache_usable(transform):
    fun = transform(long_call)
    expected = fun(X)
    gc.collect()    # entries of earlier tests' dead functions would leave during the count
    info = xform.cache_info()
    _interrupt["now"] = True
    try:
        with pytest.raises(KeyboardInterrupt):     # propagated as it is, not wrapped
            fun(X)
    finally:
        _interrupt["now"] = False
    after = xform.cache_info()
    assert (after["entries"], after["builds"]) == (info["entries"], info["builds"])
    np.testing.assert_equal(fun(X), expected)
    np.testing.assert_equal(transform(long_call)(X), expected)
    assert xform.cache_info()["builds"] == info["builds"]        # nothing was rebuilt


def test_jacobians_of_dicts_work():
    """Once a numpy reshape error from inside xform; dict inputs and outputs are pytrees."""
    def fun(d):
        return {"a": d["u"] * d["v"], "b": np.sin(d["u"])}
    point = {"u": np.array([0.3, 0.7]), "v": np.array([1.5, -2.0])}
    for jacobian in (xform.jacrev, xform.jacfwd):
        jac = jacobian(fun)(point)
        np.testing.assert_allclose(jac["a"]["u"], np.diag(point["v"]))
        np.testing.assert_allclose(jac["a"]["v"], np.diag(point["u"]))
        np.testing.assert_allclose(jac["b"]["u"], np.diag(np.cos(point["u"])))
        np.testing.assert_array_equal(jac["b"]["v"], np.zeros((2, 2)))


def test_a_failed_first_call_for_lack_of_memory_is_not_filed_on_the_fast_path():
    """The second call with the same shapes fails the same clean way."""
    fun = xform.jit(lambda x: np.outer(x, x))
    big = np.broadcast_to(1.0, (10 ** 7,))     # a view: the input itself costs nothing
    for _ in range(2):
        with pytest.raises(OutOfMemoryError):
            fun(big)
    np.testing.assert_array_equal(fun(np.ones(2)), np.ones((2, 2)))


def test_every_error_class_is_in_the_doc_with_its_python_base():
    import builtins
    import inspect

    import xform.errors as errors
    classes = {cls for _, cls in inspect.getmembers(errors, inspect.isclass)
               if issubclass(cls, xform.XformError) and cls is not xform.XformError}
    with open(DOC) as f:
        rows = [line for line in f if line.startswith("| `")]
    documented = {}
    for row in rows:
        cells = [cell.strip(" `") for cell in row.strip().strip("|").split("|")]
        documented[cells[0]] = cells[1]
    for cls in classes:
        assert cls.__name__ in documented, cls.__name__
        base = getattr(builtins, documented[cls.__name__], None)
        assert base is not None and issubclass(cls, base), cls.__name__
        assert cls.__doc__ and len(cls.__doc__.strip()) > 20
