"""Derivative checks in the complex plane, for the tests of complex linear algebra and fft
(`xform.testing.check_grads` perturbs float inputs only).

The convention is JAX's and autograd's: a jvp is the R-linear map t -> J t, and a vjp is
its transpose under the real bilinear pairing <a, b> = Re(sum(a * b)) (no conjugation), so
grad(|z|**2) = 2 conj(z).
"""
import numpy as np

import xform
from xform.testing.checks import EPS_GRID
from xform.tree import tree_flatten, tree_unflatten


def _random_like(rng, x):
    x = np.asarray(x)
    if x.dtype.kind == "c":
        return rng.standard_normal(x.shape) + 1j * rng.standard_normal(x.shape)
    if x.dtype.kind == "f":
        return rng.standard_normal(x.shape)
    return np.zeros(x.shape, xform.float0)


def _is_inexact(x):
    return np.asarray(x).dtype.kind in "fc"


def _leaves(tree):
    return [np.asarray(leaf) for leaf in tree_flatten(tree)[0]]


def _pairing(xs, ys):
    return float(sum(np.real(np.sum(np.asarray(x, complex) * np.asarray(y, complex)))
                     for x, y in zip(xs, ys)))


def _numerical_jvp(f, args, tangents, eps):
    def at(sign):
        return _leaves(f(*[a + sign * eps * t if _is_inexact(a) else a
                           for a, t in zip(args, tangents)]))
    return [(p - m) / (2 * eps) for p, m in zip(at(1), at(-1))]


def check_complex_grads(f, args, order=1, atol=1e-6, rtol=1e-6, seed=0, subject="f"):
    """jvp against central differences along random complex directions, then the vjp by the
    dot-product identity Re<ct, J t> = Re<J^T ct, t>; recursing on both to `order`."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, np.complex128 if np.asarray(a).dtype.kind == "c" else None)
            for a in args]
    tangents = [_random_like(rng, a) for a in args]
    out, t_out = xform.jvp(f, tuple(args), tuple(tangents))
    t_out = _leaves(t_out)
    errors = []
    for eps in EPS_GRID:
        numeric = _numerical_jvp(f, args, tangents, eps)
        if all(np.allclose(a, n, atol=atol, rtol=rtol) for a, n in zip(t_out, numeric)):
            break
        errors.append((eps, max(float(np.max(np.abs(a - n), initial=0))
                                for a, n in zip(t_out, numeric))))
    else:
        raise AssertionError(f"{subject}: jvp vs finite differences failed: {errors}")
    out_leaves, out_tree = tree_flatten(out)
    cts = [_random_like(rng, o) for o in out_leaves]
    in_cts = xform.vjp(f, *args)[1](tree_unflatten(out_tree, cts))
    lhs = _pairing([c for c, o in zip(cts, out_leaves) if _is_inexact(o)],
                   [t for t, o in zip(t_out, out_leaves) if _is_inexact(o)])
    rhs = _pairing([c for c, a in zip(in_cts, args) if _is_inexact(a)],
                   [t for t, a in zip(tangents, args) if _is_inexact(a)])
    scale = max(1.0, abs(lhs), abs(rhs))
    assert abs(lhs - rhs) <= (atol + rtol) * scale, \
        f"{subject}: vjp vs jvp: Re<ct, J t> = {lhs} but Re<J^T ct, t> = {rhs}"
    if order > 1:
        check_complex_grads(lambda *xs: xform.jvp(f, xs, tuple(tangents))[1], args,
                            order - 1, atol * 10, rtol * 10, seed + 1, f"jvp({subject})")
        check_complex_grads(
            lambda *xs: tuple(xform.vjp(f, *xs)[1](tree_unflatten(out_tree, cts))), args,
            order - 1, atol * 10, rtol * 10, seed + 2, f"vjp({subject})")
    return tree_unflatten(out_tree, cts), in_cts
