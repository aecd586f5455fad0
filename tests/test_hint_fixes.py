"""Hints that fix the program, for every row of docs/ERRORS.md: the catalogue's errors (the
failing programs of tests/test_bad_inputs.py) and its warnings (the programs below). Each case
checks that the program fails (or warns) as the catalogue says, at the user's line; then
applies the fix the hint states, literally, as an edit of the program's source text (the
hint must contain the words the edit follows); and checks that the fixed program runs and
matches finite differences (eager numpy where nothing is differentiable). A row of the
catalogue without a case here fails `test_every_row_of_the_catalogue_has_a_fix`."""
import functools
import inspect
import sys
import textwrap
import warnings

import attrs
import numpy as np
import pytest
import scipy.signal

import xform
from tests import test_bad_inputs as bad
from tests.source_lines import assert_points_at, line_of
from xform.extend import remove_overlay
from xform.numpy import UFUNCS

X = bad.X


@attrs.frozen
class Fix:
    """`edits` (old, new) applied to the source `of` (a function, or the lines from one text
    to another of tests/test_bad_inputs.py); `quotes`: what the hint says that they follow;
    `check(namespace)`: runs the fixed program (exec'd into `namespace`) and compares."""

    of: object
    edits: tuple
    quotes: tuple
    check: object


def _source(of, module) -> str:
    if callable(of):
        return textwrap.dedent(inspect.getsource(of))
    first, last = of                   # a passage of the module's source
    text = inspect.getsource(module)
    start = text.index(first)
    return text[start:text.index(last, start) + len(last)] + "\n"


def _apply(fix: Fix, module=bad) -> dict:
    """The fixed program, exec'd into a copy of `module`'s namespace."""
    source = _source(fix.of, module)
    for old, new in fix.edits:
        assert old in source, (old, source)
        source = source.replace(old, new)
    namespace = dict(vars(module))
    exec(compile(source, module.__file__, "exec"), namespace)
    return namespace


def _tagged(tag: str) -> str:
    """The tagged line of tests/test_bad_inputs.py (in a top-level function: as its dedented
    source has it)."""
    with open(bad.__file__) as f:
        return f.readlines()[line_of(bad.__file__, tag) - 1].rstrip("\n")


def _central(f, x, h=1e-6):
    """Central differences of `f` at `x`: a scalar's derivative, or an array's gradient
    (f scalar) or Jacobian (f array-valued), indexed output first."""
    x = np.asarray(x, dtype=float)
    if x.ndim == 0:
        return (np.asarray(f(x + h)) - np.asarray(f(x - h))) / (2 * h)
    columns = []
    for e in np.eye(x.size).reshape(x.size, *x.shape):
        columns.append((np.asarray(f(x + h * e)) - np.asarray(f(x - h * e))) / (2 * h))
    out = np.stack(columns, axis=-1)
    return out.reshape(out.shape[:-1] + x.shape)


def _grad_matches(f, *points):
    for x in points:
        np.testing.assert_allclose(xform.grad(f)(x), _central(f, x), rtol=1e-6, atol=1e-8)


# -- the checks of the fixed programs ------------------------------------------------------

def _sum_gradient(name):
    def check(ns):
        np.testing.assert_allclose(ns[name](), _central(bad.square_sum, X), rtol=1e-7)
    return check


def _check_argnums_tuple(ns):
    (gradient,) = ns["argnums_not_an_int"]()
    np.testing.assert_allclose(gradient, _central(bad.square_sum, X), rtol=1e-7)


def _check_jacobian(ns):
    np.testing.assert_allclose(ns["grad_of_an_array_output"](), _central(lambda x: x * 2.0, X),
                               rtol=1e-7)


def _check_float_inputs(ns):
    np.testing.assert_allclose(ns["grad_of_integers"](),
                               _central(bad.square_sum, np.arange(3.0)), atol=1e-7)


def _jvp_check(name, f, primals, tangents):
    def check(ns):
        out, tangent_out = ns[name]()
        np.testing.assert_allclose(out, f(*primals))
        along = _central(lambda s: f(*(p + s * t for p, t in zip(primals, tangents))), 0.0)
        np.testing.assert_allclose(tangent_out, along, rtol=1e-7, atol=1e-9)
    return check


def _vjp_check(name, f):
    """vjp_fn(cotangent) against the gradient of <cotangent, f(x)> (ones as cotangents)."""
    def check(ns):
        (x_bar,) = ns[name]()
        def pairing(x):
            return sum(np.sum(out) for out in xform.tree.tree_leaves(f(x)))
        np.testing.assert_allclose(x_bar, _central(pairing, X), rtol=1e-7)
    return check


def _check_complex_cotangent(ns):
    # sin is holomorphic: the cotangent 1j times its complex derivative, cos
    (x_bar,) = ns["complex_cotangent_for_a_real_output"]()
    np.testing.assert_allclose(x_bar, 1j * np.diag(_central(np.sin, X)), rtol=1e-7)


def _check_staged_choice(ns):
    fixed = ns["branch_on_a_traced_value"]
    xform.make_graph(fixed)(bad.SCALAR)          # the staging without values now works
    _grad_matches(fixed, 1.3, -0.7)


def _check_staged_loop(ns):
    fixed = ns["range_of_a_traced_value"]
    xform.make_graph(fixed)(xform.ShapedArray((), np.int64))
    assert xform.jit(fixed)(5) == fixed(5) == sum(range(5))


def _check_int_as_array(ns):
    fixed = ns["int_of_a_traced_value"]
    xform.make_graph(fixed)(bad.SCALAR)
    assert xform.jit(fixed)(2.7) == fixed(2.7) == int(2.7)


def _check_float_dropped(ns):
    _grad_matches(ns["float_of_a_differentiated_value"], 1.3)


def _check_size(ns):
    fixed = ns["len_of_a_traced_scalar"]
    assert xform.jit(fixed)(1.0) == fixed(1.0) == 1


def _check_iterated(ns):
    _grad_matches(ns["iterate_a_traced_scalar"], 1.5)


def _own_primitive(function, name, decorator):
    """The hint's recipe, as the user copies it: a primitive that `decorator` binds."""
    return (f"p = xform.Primitive(\"{name.rsplit('.', 1)[-1]}\")\n"
            f"p.def_impl({name})\n"
            f"p.def_abstract_eval(lambda x: x)\n\n\n"
            f"@{decorator}({name})\n"
            f"def _(x):\n"
            f"    return p.bind(x)\n\n\n"
            f"def {function}(x):")


def _own_primitive_quotes(name, decorator):
    return (f"p = xform.Primitive(\"{name.rsplit('.', 1)[-1]}\")", f"p.def_impl({name})",
            "p.def_abstract_eval(lambda x: x)", f"@{decorator}({name})",
            "def _(x): return p.bind(x)")


def _own_primitive_check(name, target, undo):
    def check(ns):
        try:
            np.testing.assert_array_equal(xform.jit(ns[name])(X), target(X))
        finally:
            undo(target)        # the tables are global: later tests see xform's own again
    return check


WEIGHTS_OF_THE_SUM = np.array([1.0, -2.0, 0.5])


def _check_array_made_inside(ns):
    fixed = ns["write_traced_into_a_concrete_array"]
    np.testing.assert_array_equal(xform.jit(fixed)(1.3), fixed(1.3))
    _grad_matches(lambda x: np.sum(fixed(x) * WEIGHTS_OF_THE_SUM), 1.3)


def _check_write_outside(ns):
    # each call writes first, then calls the staged function: eager numpy's [2, 1, 1]
    for _ in range(2):
        np.testing.assert_array_equal(ns["call_mutate_a_captured_array"](), [2.0, 1.0, 1.0])
    np.testing.assert_array_equal(bad.WEIGHTS, np.ones(3))


def _check_branches(ns):
    fixed = ns["cond_branches_of_different_types"]
    _grad_matches(lambda x: np.sum(fixed(x) * WEIGHTS_OF_THE_SUM), 1.3, -0.7)


def _check_carry(ns):
    fixed = ns["while_body_changing_shapes"]
    x = np.array([1.0, 1.5])
    np.testing.assert_array_equal(xform.jit(fixed)(x), fixed(x))
    _grad_matches(lambda v: np.sum(fixed(v) * WEIGHTS_OF_THE_SUM[:2]), x)


def _check_base_case(ns):
    fixed = ns["recurse_without_base_case"]
    assert xform.jit(fixed)(1.0) == fixed(1.0) == 128.0
    _grad_matches(fixed, 1.3, 30.0)


def _check_custom_vjp(ns):
    _grad_matches(lambda x: np.sum(ns["scale"](x) * WEIGHTS_OF_THE_SUM), X)


def _check_replaced(ns):
    ns["register_twice"]()
    np.testing.assert_array_equal(xform.jit(lambda x: bad.twice_p.bind(x))(X), np.sin(X))


def _check_rule(ns):
    _grad_matches(ns["use_a_rule_of_the_wrong_shape"], X)


def _check_unmapped(ns):
    expected = np.stack([np.add(a, np.ones(4)) for a in np.ones(3)])
    np.testing.assert_array_equal(ns["vmap_over_mismatched_sizes"](), expected)


def _check_one_shape(ns):
    np.testing.assert_array_equal(ns["threaded_map_over_different_lengths"](), np.ones(3))


def _check_fromiter(ns):
    assert ns["pass_a_generator"]() == bad.square_sum(X)


def _check_smaller(ns):
    _grad_matches(lambda x: np.sum(ns["huge_intermediate"](x)), 1.3)


def _check_returned(ns):
    assert ns["escape_a_tracer"]() == 3.0


def _check_copy(ns):
    fixed, x = ns["write_into_the_argument"], X.copy()
    np.testing.assert_array_equal(xform.jit(fixed)(x), fixed(x.copy()))
    np.testing.assert_array_equal(x, X)                      # the caller's array unchanged
    _grad_matches(lambda v: np.sum(fixed(v) * WEIGHTS_OF_THE_SUM), X)


def _check_reshaped(ns):
    _grad_matches(lambda x: np.sum(ns["add_mismatched_shapes"](x) * np.arange(4.0)), X)


def _check_asarray(ns):
    fixed = ns["numpy_scalar_of_a_traced_value"]
    _grad_matches(fixed, 1.3)
    assert fixed(1.3) == 2.6                 # eagerly, on a plain float, too


# -- tag of the catalogue's row -> the fix its hint states ---------------------------------

FIXES = {
    "argnums": Fix(bad.argnums_out_of_range, [("argnums=2", "argnums=0")],
                   ["argnums counts the positional arguments of the call from 0"],
                   _sum_gradient("argnums_out_of_range")),
    "argnums-type": Fix(bad.argnums_not_an_int, [('argnums="x"', "argnums=(0,)")],
                        ["positions are ints or tuples of ints"], _check_argnums_tuple),
    "not-callable": Fix(bad.transform_of_a_value,
                        [("xform.grad(square_sum(X))", "xform.grad(square_sum)(X)")],
                        ["grad(f)(x)"], _sum_gradient("transform_of_a_value")),
    "nonscalar": Fix(bad.grad_of_an_array_output, [("xform.grad(", "xform.jacrev(")],
                     ["xform.jacrev for non-scalar outputs"], _check_jacobian),
    "int-grad": Fix(bad.grad_of_integers, [("np.arange(3)", "np.arange(3.0)")],
                    ["np.arange(3.0) for np.arange(3)"], _check_float_inputs),
    "t-tree": Fix(bad.tangents_of_another_structure,
                  [("(1.0,))", "(1.0, np.zeros_like(2.0)))")],
                  ["one tangent per primal", "np.zeros_like(x)"],
                  _jvp_check("tangents_of_another_structure", np.multiply, (1.0, 2.0),
                             (1.0, 0.0))),
    "t-shape": Fix(bad.tangent_of_another_shape, [("np.ones(4)", "np.ones(3)")],
                   ["each tangent has its primal's shape"],
                   _jvp_check("tangent_of_another_shape", np.sin, (X,), (np.ones(3),))),
    "t-dtype": Fix(bad.complex_tangent_for_a_real_primal,
                   [("(X + 1j,)", "(np.real(X + 1j),)")], ["np.real(t)"],
                   _jvp_check("complex_tangent_for_a_real_primal", np.sin, (X,), (X,))),
    "t-tuple": Fix(bad.primals_not_in_a_tuple,
                   [("xform.jvp(np.sin, X, np.ones(3))",
                     "xform.jvp(np.sin, (X,), (np.ones(3),))")],
                   ["xform.jvp(f, (x,), (t,))"],
                   _jvp_check("primals_not_in_a_tuple", np.sin, (X,), (np.ones(3),))),
    "ct-tree": Fix(bad.cotangent_of_another_structure,
                   [("vjp_fn(np.ones(3))", "vjp_fn((np.ones(3), np.ones(3)))")],
                   ["a pair for a function returning a pair"],
                   _vjp_check("cotangent_of_another_structure", lambda x: (x, 2.0 * x))),
    "ct-shape": Fix(bad.cotangent_of_another_shape, [("np.ones(4)", "np.ones(3)")],
                    ["each cotangent has its output's shape"],
                    _vjp_check("cotangent_of_another_shape", np.sin)),
    "ct-dtype": Fix(bad.complex_cotangent_for_a_real_output,
                    [("xform.vjp(np.sin, X)", "xform.vjp(np.sin, X.astype(complex))")],
                    ["make the value it belongs to complex (x.astype(complex))"],
                    _check_complex_cotangent),
    "if": Fix(bad.branch_on_a_traced_value,
              [(_tagged("if") + "\n        return x\n    return -x",
                "    return np.where(x > 0, x, -x)")],
              ["stage the choice: np.where(c, a, b)"], _check_staged_choice),
    "range": Fix(bad.range_of_a_traced_value,
                 [("sum(range(n))", "xform.fori_loop(0, n, lambda i, total: total + i, 0)")],
                 ["stage the loop", "xform.fori_loop"], _check_staged_loop),
    "int": Fix(bad.int_of_a_traced_value, [("int(x)", "np.asarray(x, dtype=int)")],
               ["np.asarray(x, dtype=int) in place of int(x)"], _check_int_as_array),
    "float-cut": Fix(bad.float_of_a_differentiated_value, [("float(x)", "x")],
                     ["drop the float()"], _check_float_dropped),
    "len": Fix(bad.len_of_a_traced_scalar, [("len(x)", "np.size(x)")], ["np.size(x)"],
               _check_size),
    "iter": Fix(bad.iterate_a_traced_scalar, [("for v in x", "for v in np.atleast_1d(x)")],
                ["iterate over np.atleast_1d(x)"], _check_iterated),
    "numpy": Fix(bad.unsupported_numpy,
                 [("def unsupported_numpy(x):",
                   _own_primitive("unsupported_numpy", "np.spacing", "xform.implements"))],
                 _own_primitive_quotes("np.spacing", "xform.implements"),
                 _own_primitive_check("unsupported_numpy", np.spacing, UFUNCS.pop)),
    "scipy": Fix(bad.unsupported_scipy,
                 [("def unsupported_scipy(x):",
                   _own_primitive("unsupported_scipy", "scipy.signal.medfilt",
                                  "xform.overlay"))],
                 _own_primitive_quotes("scipy.signal.medfilt", "xform.overlay"),
                 _own_primitive_check("unsupported_scipy", scipy.signal.medfilt,
                                      remove_overlay)),
    "write": Fix(bad.write_traced_into_a_concrete_array,
                 [("out = TABLE.copy()", "out = np.array(TABLE)")],
                 ["make y inside the function", "np.array(A)"], _check_array_made_inside),
    "captured": Fix(("def mutate_a_captured_array(x):", "WEIGHTS[:] = 1.0"),
                    [("    WEIGHTS[0] += 1.0                                                         "
                      "# line: captured\n", ""),
                     ("    try:\n", "    try:\n        WEIGHTS[0] += 1.0\n")],
                    ["do the write outside the staged function"], _check_write_outside),
    "cond": Fix(bad.cond_branches_of_different_types,
                [("lambda v: v,", "lambda v: np.broadcast_to(v, (3,)),")],
                ["return the same shapes and dtypes", "broadcast explicitly"],
                _check_branches),
    "while": Fix(bad.while_body_changing_shapes, [("np.tile(c, 2)", "c * 2.0")],
                 ["the carry must keep its shapes"], _check_carry),
    "recursion": Fix(bad.recurse_without_base_case,
                     [(_tagged("recursion"),
                       "    if x > 100.0:\n        return x\n" + _tagged("recursion"))],
                     ["give the recursion a base case it reaches",
                      "`if` on the arguments' values"], _check_base_case),
    "custom-vjp": Fix(("@xform.custom_vjp", "scale.defvjp(_scale_fwd, _scale_bwd)"),
                      [("return (np.ones(4),)", "return (2.0 * g,)")],
                      ["one cotangent per argument, each of its argument's shape"],
                      _check_custom_vjp),
    "register": Fix(bad.register_twice,
                    [("abstract_eval=lambda x: x)", "abstract_eval=lambda x: x, replace=True)")],
                    ["pass replace=True"], _check_replaced),
    # (a primitive of another name: the catalogue's own keeps its wrong rule for its test)
    "rule": Fix(('wrong_jvp_p = Primitive("test_bad_inputs_wrong_jvp")', "# line: rule"),
                [('"test_bad_inputs_wrong_jvp"', '"test_hint_fixes_right_jvp"'),
                 ("np.ones(5)", "np.cos(primals[0]) * tangents[0]")],
                ["fix the jvp rule of 'test_bad_inputs_wrong_jvp'"], _check_rule),
    "vmap": Fix(bad.vmap_over_mismatched_sizes,
                [("xform.vmap(np.add)", "xform.vmap(np.add, in_axes=(0, None))")],
                ["in_axes=None at its position"], _check_unmapped),
    "tmap": Fix(bad.threaded_map_over_different_lengths, [("np.ones(4)", "np.ones(3)")],
                ["pass inputs of one shape"], _check_one_shape),
    "generator": Fix(bad.pass_a_generator,
                     [("(v for v in X)", "(np.fromiter((v for v in X), dtype=float))")],
                     ["np.fromiter(xs, dtype=float)"], _check_fromiter),
    "huge": Fix(bad.huge_intermediate, [("np.zeros((10 ** 7, 10 ** 7))", "np.zeros((10, 10))")],
                ["reduce the sizes"], _check_smaller),
    "escaped": Fix(bad.escape_a_tracer,
                   [("xform.jit(lambda x: STASH.append(x) or x)(1.0)",
                     "first = xform.jit(lambda x: x)(1.0)"),
                    ("STASH[0]", "first")],
                   ["return values from staged functions instead of storing them"],
                   _check_returned),
    "setitem": Fix(bad.write_into_the_argument,
                   [(_tagged("setitem"), "    x = x.copy()\n" + _tagged("setitem"))],
                   ["x = x.copy()"], _check_copy),
    "shapes": Fix(bad.add_mismatched_shapes, [("x + np.ones(4)", "x.reshape(3, 1) + np.ones(4)")],
                  ["make the operands' shapes fit", "reshape"], _check_reshaped),
    "np-scalar": Fix(bad.numpy_scalar_of_a_traced_value,
                     [("np.float64(x)", "np.asarray(x, dtype=np.float64)")],
                     ["np.asarray(x, dtype=np.float64)"], _check_asarray),
}

CASES = {case[1]: case for case in bad.CASES}


@pytest.mark.parametrize("tag", list(CASES))
def test_the_hint_fixes_the_program(tag):
    category, _, call, cls, cause = CASES[tag]
    with pytest.raises(cls) as info:
        call()
    err = info.value
    assert err.cause.startswith(cause), err.cause
    assert_points_at(err, bad.__file__, tag)
    fix = FIXES[tag]
    for quote in fix.quotes:
        assert quote in err.hint, f"{category}: the hint no longer says {quote!r}: {err.hint}"
    with warnings.catch_warnings():
        warnings.simplefilter("error")        # the fixed program warns of nothing either
        fix.check(_apply(fix))


def test_threaded_map_of_shapes_that_broadcast_is_fixed_by_broadcasting():
    """The other branch of the threaded_map row's hint."""
    a, b = np.array([1.0, 2.0, 3.0]), np.array([[1.0], [-1.0]])
    with pytest.raises(xform.ShapeError) as info:
        xform.threaded_map(lambda u, v: u * v, a, b)
    assert "np.broadcast_arrays(*xs)" in info.value.hint
    got = xform.threaded_map(lambda u, v: u * v, *np.broadcast_arrays(a, b))
    np.testing.assert_array_equal(got, a * b)


# -- the warnings: a program that warns, at the user's line, and its fix -------------------

def scaled(x, k):
    return x * k


def restaged_for_every_int():
    slope = xform.grad(scaled)
    return [slope(1.5, i) for i in range(40)]                                # line: restaging


def halvings(x):
    while x > 1.0:
        x = x / 2.0
    return x


def halve_many():
    g = xform.jit(halvings)
    return [g(2.0 ** i + 0.5) for i in range(1, 20)]                         # line: path-limit


LARGE_TABLE = np.arange(512.0)


def lookup(x):
    return x * LARGE_TABLE[3]


def call_lookup():
    return xform.jit(lookup)(2.0)                                             # line: captured


HIDDEN_RNG = np.random.default_rng(0)


def _draw(x):
    return x + HIDDEN_RNG.standard_normal()


def _calling(f):
    return lambda x: f(x)


def draw_deep():
    # five calls deep, past the walk that looks for draws
    deep = functools.reduce(lambda f, _: _calling(f), range(5), _draw)
    jitted = xform.jit(deep)
    return [jitted(0.0) for _ in range(4)]                                    # line: unstaged


this = sys.modules[__name__]


def _check_traced_ints(ns):
    slopes = [_central(lambda x: scaled(x, i), 1.5) for i in range(40)]
    np.testing.assert_allclose(ns["restaged_for_every_int"](), slopes, rtol=1e-7, atol=1e-9)


def _check_staged_while(ns):
    fixed = ns["halvings"]
    assert ns["halve_many"]() == [halvings(2.0 ** i + 0.5) for i in range(1, 20)]
    _grad_matches(fixed, 5.0, 0.7)


def _check_argument(ns):
    assert ns["call_lookup"]() == 6.0
    _grad_matches(lambda x: ns["lookup"](x, LARGE_TABLE), 2.0)


def _check_generator_argument(ns):
    ns["HIDDEN_RNG"] = np.random.default_rng(5)      # each call draws anew, as eagerly
    eager = np.random.default_rng(5)
    assert ns["draw_deep"]() == [ns["_draw"](0.0, eager) for _ in range(4)]


# class name -> (the program's call, its tag, a fragment of the message, the fix)
WARNING_FIXES = {
    "RestagingWarning": (restaged_for_every_int, "restaging", "different values of its "
                         "static arguments",
                         Fix(restaged_for_every_int,
                             [("slope(1.5, i)", "slope(1.5, np.asarray(i))")],
                             ["pass a varying number as an array (np.asarray(i))"],
                             _check_traced_ints)),
    "PathLimitWarning": (halve_many, "path-limit", "took more than",
                         Fix(("def halvings(x):", "for i in range(1, 20)]"),
                             [("    while x > 1.0:\n        x = x / 2.0\n    return x\n",
                               "    return xform.while_loop(lambda x: x > 1.0, "
                               "lambda x: x / 2.0, x)\n")],
                             ["xform.while_loop", "for a loop whose trip count changes"],
                             _check_staged_while)),
    "CapturedArrayWarning": (call_lookup, "captured", "reads a writeable array it captures",
                             Fix(("def lookup(x):", "(2.0)"),
                                 [("def lookup(x):", "def lookup(x, table):"),
                                  ("LARGE_TABLE[3]", "table[3]"),
                                  ("(2.0)", "(2.0, LARGE_TABLE)")],
                                 ["Pass it as an argument"], _check_argument)),
    "UnstagedEffectWarning": (draw_deep, "unstaged", "computed different constants on two calls",
                              Fix(("def _draw(x):", "for _ in range(4)]"),
                                  [("(x)", "(x, rng)"), ("lambda x:", "lambda x, rng:"),
                                   ("HIDDEN_RNG.standard_normal()", "rng.standard_normal()"),
                                   ("xform.jit(deep)", "xform.jit(deep, static_argnums=1)"),
                                   ("jitted(0.0)", "jitted(0.0, HIDDEN_RNG)")],
                                  ["pass the generator as an argument (static under jit: "
                                   "static_argnums)"], _check_generator_argument)),
}


@pytest.fixture
def small_large_arrays(monkeypatch):
    """A captured array of 4 kB counts as large (8 MB would make the test slow)."""
    from xform.runtime import dependencies
    monkeypatch.setattr(dependencies, "LARGE_CHECK_BYTES", 1024)
    monkeypatch.setattr(dependencies, "_warned_arrays", {})


@pytest.mark.parametrize("name", list(WARNING_FIXES))
def test_the_warnings_hint_fixes_the_program(name, small_large_arrays):
    call, tag, message, fix = WARNING_FIXES[name]
    category = getattr(xform, name)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        call()
    told = [w for w in caught if issubclass(w.category, category)]
    assert len(told) == 1, [str(w.message) for w in caught]
    assert message in str(told[0].message)
    assert (told[0].filename, told[0].lineno) == (__file__, line_of(__file__, tag))
    for quote in fix.quotes:
        assert quote in str(told[0].message), (quote, str(told[0].message))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fix.check(_apply(fix, this))


# -- every row of the catalogue has its case -------------------------------------------------

def _doc_rows(heading: str) -> list[str]:
    """The first cells of the table under `heading` in docs/ERRORS.md."""
    with open(bad.DOC) as f:
        text = f.read()
    section = text.split(f"## {heading}\n", 1)[1].split("\n## ", 1)[0]
    rows = [line for line in section.splitlines() if line.startswith("| ")]
    return [row.strip("|").split("|")[0].strip().strip("`") for row in rows[1:]]


def test_every_row_of_the_catalogue_has_a_fix():
    by_category = {case[0]: case[1] for case in bad.CASES}
    catalogue = _doc_rows("The catalogue")
    assert catalogue and set(catalogue) == set(by_category)
    assert {by_category[category] for category in catalogue} == set(FIXES)
    assert set(_doc_rows("Warnings")) == set(WARNING_FIXES)


# The programs of three rows this file once fixed by their hints now run as written: a plain
# object is a pytree (values while staging), solve_ivp picks its own output times and a Hessian
# goes through odeint (SciPy's solvers).

def test_a_plain_object_holding_parameters_now_runs():
    g = bad.plain_object_argument()
    assert isinstance(g, bad.Params)
    assert np.isclose(g.w, _central(lambda w: bad.loss_of_params(bad.Params(w), bad.X), 1.5),
                      rtol=1e-8)


def test_solve_ivp_without_t_eval_now_runs():
    g = xform.grad(bad.solve_ivp_without_t_eval)(0.5)
    assert np.isclose(g, _central(bad.solve_ivp_without_t_eval, 0.5, h=1e-5), rtol=1e-5)


def test_a_hessian_through_odeint_now_runs():
    assert np.isclose(bad.hessian_through_odeint(), np.exp(-0.5), rtol=1e-5)  # d2/dk2 exp(-k)
