"""Derivative checks: finite differences, the jvp/vjp dot-product identity, batching against
a Python loop, abstract eval against impl.

Limitations (said honestly): finite differences need smooth functions near the test point,
so inputs at kinks (abs at 0, max at ties) must be avoided by the caller's strategy; a check
passes when any step size in the grid agrees.

Complex values: tangents and cotangents are complex, finite differences step in the complex
plane, and cotangents pair with tangents by Re(sum(ct * t)) (no conjugate: JAX's and
autograd's convention, under which `grad` of a real function is d/dx - 1j d/dy).
"""
from __future__ import annotations

import numpy as np

from xform.errors import XformError
from xform.ir.avals import aval_of, float0
from xform.tree import tree_flatten, tree_unflatten

EPS_GRID = (1e-2, 1e-3, 1e-4, 1e-5, 1e-6, 1e-7, 1e-8)


class CheckFailure(AssertionError):
    """A property checked by `check_grads` or `check_primitive` does not hold; the message
    names the property (e.g. 'jvp vs finite differences')."""


def _fail(subject: str, prop: str, detail: str):
    raise CheckFailure(f"{subject}: {prop} failed\n{detail}")


def _is_float(x) -> bool:
    """Whether `x` is differentiable: floating or complex."""
    dtype = x.dtype if hasattr(x, "dtype") else np.asarray(x).dtype
    return dtype.kind in "fc"


def _is_complex(x) -> bool:
    return np.asarray(x).dtype.kind == "c"


def _wide(x):
    """`x` in float64, or complex128 if complex: finite differences and inner products."""
    return np.asarray(x, np.complex128 if _is_complex(x) else np.float64)


def _tolerance(dtypes):
    if any(np.dtype(d) in (np.float16, np.float32, np.complex64) for d in dtypes):
        return 2e-2, 2e-2
    return 1e-5, 1e-5


def _random_like(rng, x):
    array = np.asarray(x)
    if array.dtype.kind == "c":
        return (rng.standard_normal(array.shape)
                + 1j * rng.standard_normal(array.shape)).astype(array.dtype)
    return rng.standard_normal(array.shape).astype(array.dtype)


def _flat_float(tree):
    leaves, _ = tree_flatten(tree)
    # an integer output's tangent is float0: compared as zeros
    return [np.zeros(np.shape(x)) if getattr(x, "dtype", None) == float0 else _wide(x)
            for x in leaves]


def _inner(xs, ys) -> float:
    """sum Re(x * y): the pairing of cotangents with tangents (no conjugate)."""
    return float(sum(np.real(np.sum(_wide(x) * _wide(y))) for x, y in zip(xs, ys)))


def _zero_tangent(x):
    return np.zeros(np.shape(x), float0)


def numerical_jvp(f, args, tangents, eps):
    """Central difference of `f` at `args` along `tangents`, evaluated in float64 (complex128
    for complex values: a complex tangent steps in the complex plane)."""
    def shifted(sign):
        moved = [_wide(a) + sign * eps * _wide(t) if _is_float(a) else a
                 for a, t in zip(args, tangents)]
        moved = [m if np.ndim(a) or not isinstance(a, (float, complex)) else type(a)(m)
                 for m, a in zip(moved, args)]
        return _flat_float(f(*moved))
    plus, minus = shifted(+1), shifted(-1)
    return [(p - m) / (2 * eps) for p, m in zip(plus, minus)]


def _close(xs, ys, atol, rtol) -> bool:
    return all(np.shape(x) == np.shape(y) and np.allclose(x, y, atol=atol, rtol=rtol,
                                                          equal_nan=True)
               for x, y in zip(xs, ys))


def _check_fd(subject, f, args, tangents, analytic, atol, rtol, prop):
    errors = []
    for eps in EPS_GRID:
        numeric = numerical_jvp(f, args, tangents, eps)
        if _close(analytic, numeric, atol, rtol):
            return
        errors.append((eps, max((float(np.max(np.abs(a - n))) if np.size(a) else 0.0)
                                for a, n in zip(analytic, numeric))))
    detail = "\n".join(f"  eps={eps:.0e}: max abs error {err:.3e}" for eps, err in errors)
    _fail(subject, prop, f"analytic {analytic}\n{detail}")


def check_grads(f, args, order=2, modes=("fwd", "rev"), atol=None, rtol=None, seed=0,
                subject=None):
    """Check derivatives of `f` at `args` (a tuple) up to `order`.

    fwd: jvp along random directions against central differences (any step of EPS_GRID).
    rev: the dot-product identity <ct, J t> = <J^T ct, t>, with J t from jvp (or finite
    differences when fwd is not checked). Then recurse on the derivative functions.

    >>> from xform.testing import check_grads
    >>> check_grads(lambda x: np.sin(x) * x, (np.array([0.3, 1.2]),), order=2)    # passes
    """
    from xform.api import jvp, vjp
    subject = subject or getattr(f, "__name__", "f")
    leaves, args_tree = tree_flatten(tuple(args))
    if args_tree.children and any(c.kind is not None for c in args_tree.children):
        # Pytree arguments: check the same function of the flat leaves.
        def flat_f(*xs):
            return f(*tree_unflatten(args_tree, xs))
        return check_grads(flat_f, leaves, order, modes, atol, rtol, seed, subject)
    args = tuple(args)
    rng = np.random.default_rng(seed)
    float_args = [a for a in args if _is_float(a)]
    default_atol, default_rtol = _tolerance([np.asarray(a).dtype for a in float_args])
    atol = default_atol if atol is None else atol
    rtol = default_rtol if rtol is None else rtol
    tangents = tuple(_random_like(rng, a) if _is_float(a) else _zero_tangent(a) for a in args)
    out, t_out = jvp(f, args, tangents)
    t_out_flat = _flat_float(t_out)
    if "fwd" in modes:
        _check_fd(subject, f, args, tangents, t_out_flat, atol, rtol,
                  "jvp vs finite differences")
    if "rev" in modes:
        out_leaves, out_tree = tree_flatten(out)
        cts_leaves = [_random_like(rng, o) if _is_float(o) else _zero_tangent(o)
                      for o in out_leaves]
        cts = tree_unflatten(out_tree, cts_leaves)
        _, pullback = vjp(f, *args)
        in_cts = pullback(cts)
        lhs = _inner([c for c in cts_leaves if _is_float(c)],
                     [t for t, o in zip(t_out_flat, out_leaves) if _is_float(o)])
        rhs = _inner([c for c, a in zip(in_cts, args) if _is_float(a)],
                     [t for t, a in zip(tangents, args) if _is_float(a)])
        scale = max(1.0, abs(lhs), abs(rhs))
        if not abs(lhs - rhs) <= atol * scale + rtol * scale:
            _fail(subject, "vjp vs jvp (dot-product identity)",
                  f"<ct, J t> = {lhs!r} but <J^T ct, t> = {rhs!r}")
        if "fwd" not in modes:
            _check_fd(subject, f, args, tangents, t_out_flat, atol, rtol,
                      "jvp vs finite differences")
    if order > 1:
        if "fwd" in modes:
            def f_jvp(*primals):
                return jvp(f, primals, tangents)[1]
            check_grads(f_jvp, args, order - 1, modes, atol * 10, rtol * 10, seed + 1,
                        f"jvp({subject})")
        if "rev" in modes:
            def f_vjp(*primals):
                results = vjp(f, *primals)[1](cts)
                return tuple(r for r, a in zip(results, primals) if _is_float(a))
            check_grads(f_vjp, args, order - 1, modes, atol * 10, rtol * 10, seed + 2,
                        f"vjp({subject})")


def check_primitive(prim, *args, params=None, order=1, linear_argnums=None, atol=None,
                    rtol=None, batch=True, seed=0):
    """Run the fixed battery on primitive `prim` at `args`; each failure names its property.

    Properties: 'registered rules' (the rules tested are the registered ones), 'abstract
    eval vs impl' (shape and dtype), 'reuse' (impl twice gives equal results, inputs
    unchanged), 'compiled vs impl' (bit for bit), 'jvp vs finite differences', 'vjp vs jvp
    (dot-product identity)', 'transpose vs jvp' (for `linear_argnums`, default every float
    input when the primitive has a transpose rule), 'batch vs loop' (every in_axes
    combination), and order-2 checks (the jvp and vjp functions checked in turn, named
    `jvp(...)` / `vjp(...)` in the message). `order=0` skips the derivative properties (the
    rules must still exist), for outputs that are not unique functions of the inputs, like
    complex eigenvectors (any phase): check with `check_grads` functions of them that are
    unique (projectors). A failure raises CheckFailure:
    `check_primitive(<name>): <property> failed`, then the numbers that disagree.

    For library authors, a primitive registered with the public API and its test:

    >>> from xform.testing import check_primitive
    >>> sinc_p = xform.Primitive("my_sinc")
    >>> _ = sinc_p.def_impl(np.sinc)
    >>> _ = sinc_p.def_abstract_eval(lambda x: xform.ShapedArray(x.shape, x.dtype))
    >>> @sinc_p.def_jvp
    ... def _(primals, tangents):
    ...     (x,), (t,) = primals, tangents
    ...     y = np.pi * x      # d/dx sin(y)/y = pi (cos(y) - sinc(x)) / y, 0 at x == 0
    ...     safe = np.where(x == 0, 1.0, y)
    ...     slope = np.where(x == 0, 0.0, np.pi * (np.cos(safe) - sinc_p.bind(x)) / safe)
    ...     return sinc_p.bind(x), slope * t
    >>> _ = sinc_p.def_batch(lambda size, args, dims: (sinc_p.bind(*args), dims[0]))
    >>> check_primitive(sinc_p, np.array([0.0, 0.4, 1.3]))    # passes: returns None

    In the author's test file, Hypothesis supplies the inputs::

        from hypothesis import given
        import xform.testing.strategies as xst

        @given(xst.arrays(xst.shapes(), np.float64))
        def test_my_sinc(x):
            check_primitive(sinc_p, x)

    Reverse mode is derived from the jvp (with `def_transpose` for a linear primitive), or
    given by `def_vjp`. Without `def_batch`, vmap would fall back to a Python loop, but this
    battery fails with 'registered rules' (it tests registered rules only): pass
    `batch=False` to skip batching. Inputs at kinks must be kept out by the strategy (see
    the module's limitations).
    """
    from xform.api import jit, vmap
    from xform.ir.registry import RULES
    params = dict(params or {})
    subject = f"check_primitive({prim.name})"
    rules = RULES.get(prim)
    if rules is None or rules.impl is None or rules.abstract_eval is None:
        _fail(subject, "registered rules", "the primitive needs impl and abstract_eval rules")

    def fun(*xs):
        return prim.bind(*xs, **params)

    originals = [np.array(a, copy=True) for a in args]
    out = rules.impl(*args, **params)
    again = rules.impl(*args, **params)
    outs, _ = tree_flatten(list(out) if prim.multiple_results else out)
    agains, _ = tree_flatten(list(again) if prim.multiple_results else again)
    if not all(np.array_equal(a, b, equal_nan=True) for a, b in zip(outs, agains)):
        _fail(subject, "reuse", "impl gave different results on the same inputs")
    for a, original in zip(args, originals):
        if not np.array_equal(np.asarray(a), original, equal_nan=True):
            _fail(subject, "reuse", "impl modified its input")

    expected = rules.abstract_eval(*[aval_of(a) for a in args], **params)
    expected = list(expected) if prim.multiple_results else [expected]
    for aval, value in zip(expected, outs):
        value = np.asarray(value)
        if aval.shape != value.shape or aval.dtype != value.dtype:
            _fail(subject, "abstract eval vs impl",
                  f"abstract eval says {aval.str_short()}, impl returned "
                  f"{value.dtype}{list(value.shape)}")

    compiled = jit(fun)(*args)
    compiled_leaves, _ = tree_flatten(list(compiled) if prim.multiple_results else compiled)
    for c, o in zip(compiled_leaves, outs):
        if not np.array_equal(np.asarray(c), np.asarray(o), equal_nan=True) or \
                np.asarray(c).dtype != np.asarray(o).dtype:
            _fail(subject, "compiled vs impl", f"compiled {c!r} != impl {o!r}")

    differentiable = any(_is_float(a) for a in args) and any(_is_float(o) for o in outs)
    if differentiable and rules.jvp is None and rules.vjp is None:
        _fail(subject, "registered rules", "float inputs and outputs but no jvp or vjp rule")
    checks_derivatives = differentiable and order > 0
    if checks_derivatives and rules.jvp is not None:
        check_grads(fun, args, order=order, modes=("fwd", "rev"), atol=atol, rtol=rtol,
                    seed=seed, subject=subject)
    elif checks_derivatives:
        check_grads(fun, args, order=order, modes=("rev",), atol=atol, rtol=rtol, seed=seed,
                    subject=subject)

    if rules.transpose is not None and checks_derivatives:
        _check_transpose(subject, prim, rules, args, params, linear_argnums, atol, rtol, seed)

    if batch:
        if rules.batch is None:
            _fail(subject, "registered rules", "no batch rule")
        _check_batch(subject, fun, args, vmap, seed)


def _check_transpose(subject, prim, rules, args, params, linear_argnums, atol, rtol, seed):
    from xform.api import jvp
    from xform.ir.ad import Undefined, Zero
    rng = np.random.default_rng(seed + 7)
    if linear_argnums is None:
        linear_argnums = [i for i, a in enumerate(args) if _is_float(a)]
    out = rules.impl(*args, **params)
    cts = [_random_like(rng, o) for o in (out if prim.multiple_results else [out])]
    for i in linear_argnums:
        t = _random_like(rng, args[i])
        tangents = tuple(t if j == i else _zero_tangent(a) if not _is_float(a)
                         else np.zeros_like(a) for j, a in enumerate(args))
        _, t_out = jvp(lambda *xs: prim.bind(*xs, **params), args, tangents)
        t_outs = list(t_out) if prim.multiple_results else [t_out]
        ins = [Undefined(aval_of(a)) if j == i else a for j, a in enumerate(args)]
        transpose = rules.calls["transpose"]    # as transforms call it (symbolic_zeros)
        ct_in = transpose(cts if prim.multiple_results else cts[0], *ins, **params)[i]
        ct_in = np.zeros_like(args[i]) if ct_in is None or type(ct_in) is Zero else ct_in
        lhs, rhs = _inner(cts, t_outs), _inner([ct_in], [t])
        default_atol, _ = _tolerance([np.asarray(args[i]).dtype])
        tol = (atol or default_atol) * max(1.0, abs(lhs), abs(rhs))
        if not abs(lhs - rhs) <= tol:
            _fail(subject, "transpose vs jvp",
                  f"input {i}: <ct, J t> = {lhs!r} but <transpose(ct), t> = {rhs!r}")


def _check_batch(subject, fun, args, vmap, seed, size=3):
    def variant(a, b):
        if b == 0:
            return a
        array = np.asarray(a)
        if array.dtype.kind in "fc":
            return (array * (1 + 0.05 * b) + 0.01 * b).astype(array.dtype)
        return array
    stacked = [np.stack([np.asarray(variant(a, b)) for b in range(size)]) for a in args]
    n = len(args)
    combos = [tuple(0 for _ in range(n))]
    if n > 1:
        combos += [tuple(0 if j == i else None for j in range(n)) for i in range(n)]
    combos.append(tuple(-1 if np.ndim(a) else 0 for a in args))
    for in_axes in combos:
        batched_args = []
        for a, s, axis in zip(args, stacked, in_axes):
            if axis is None:
                batched_args.append(a)
            elif axis == -1:
                batched_args.append(np.moveaxis(s, 0, -1))
            else:
                batched_args.append(s)
        try:
            got = vmap(fun, in_axes=in_axes)(*batched_args)
        except XformError as err:
            _fail(subject, "batch vs loop", f"in_axes={in_axes} raised {err}")
        expected = []
        for b in range(size):
            example = [a if axis is None else s[b] for a, s, axis in zip(args, stacked, in_axes)]
            expected.append(fun(*example))
        got_leaves, _ = tree_flatten(got)
        expected_leaves = [np.stack([np.asarray(leaf) for leaf in leaves])
                           for leaves in zip(*[tree_flatten(e)[0] for e in expected])]
        for g, e in zip(got_leaves, expected_leaves):
            if np.shape(g) != np.shape(e) or not np.allclose(g, e, rtol=1e-6, atol=1e-9,
                                                             equal_nan=True):
                _fail(subject, "batch vs loop",
                      f"in_axes={in_axes}: vmap gave {np.asarray(g)!r}, loop gave {e!r}")

