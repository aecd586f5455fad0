"""The composition matrix: every transform composed with every transform (pairs, and triples
for Hessian-vector products) over every construct, each cell checked numerically.

A cell `(outer, inner, construct)` is `outer(inner(f))` for the construct's f: R^3 -> R^3. Its
reference applies `outer` by finite differences (or a Python loop for vmap, the function
itself for checkpoint) to `inner(f)` as xform computes it, and the cell with `inner` alone is
checked the same way against the construct's plain-numpy reference. So each composition is
checked against finite differences one level at a time, as `check_grads` recurses.

To add a construct (in-place update, random draws, ...): append a `Construct` to
`EXTRA_CONSTRUCTS` (name, the xform function, a plain-numpy reference of it); every cell of
its row is then built and checked. `python -m tests.transforms.test_matrix` prints the counts.
"""
from __future__ import annotations

import functools
import itertools
import sys

import numpy as np
import pytest

import xform
from xform.passes.fuse import fuse_elementwise

N = 3
X0 = np.array([0.37, -0.52, 0.81])   # away from every construct's switching points
TANGENT = np.array([0.6, -0.3, 0.9])


def weights(m):
    return np.linspace(0.5, 1.5, m)


def batch_rows(x):
    """Two rows made from x: different signs, so cond/switch take different branches per row
    and while_loop different trip counts (a batched predicate)."""
    return np.stack([x, -0.8 * x[::-1]])


# == the transforms: xform's, and their numeric references ====================================

def _flat(fun):
    return lambda x: np.ravel(fun(x))


TRANSFORMS = {
    "grad": lambda h: xform.grad(lambda x: _weighted(h(x))),
    "jvp": lambda h: lambda x: np.ravel(xform.jvp(h, (x,), (TANGENT,))[1]),
    "vjp": lambda h: lambda x: _pull_weights(*xform.vjp(h, x)),
    "vmap": lambda h: lambda x: np.ravel(xform.vmap(h)(batch_rows(x))),
    "jacfwd": lambda h: _flat(xform.jacfwd(h)),
    "jacrev": lambda h: _flat(xform.jacrev(h)),
    "hessian": lambda h: _flat(xform.hessian(lambda x: _weighted(h(x)))),
    "checkpoint": lambda h: xform.checkpoint(h),
}


def _weighted(y):
    y = np.ravel(y)
    return np.sum(weights(y.shape[0]) * y)


def _pull_weights(out, pullback):
    return pullback(weights(np.size(out)))[0]


EPS = 1e-6


def _fd_jacobian(h, x, eps=EPS):
    columns = []
    for i in range(N):
        e = np.zeros(N)
        e[i] = eps
        columns.append((np.ravel(h(x + e)) - np.ravel(h(x - e))) / (2 * eps))
    return np.stack(columns, axis=-1)


def _fd_hessian(s, x, eps=1e-4):
    hess = np.zeros((N, N))
    for i, j in itertools.product(range(N), range(N)):
        ei, ej = np.eye(N)[i] * eps, np.eye(N)[j] * eps
        hess[i, j] = (s(x + ei + ej) - s(x + ei - ej) - s(x - ei + ej) + s(x - ei - ej)) / (
            4 * eps * eps)
    return hess


REFERENCES = {
    "grad": lambda h, x: _fd_jacobian(lambda y: _weighted(np.asarray(h(y))), x)[0],
    "jvp": lambda h, x: _fd_jacobian(h, x) @ TANGENT,
    "vjp": lambda h, x: weights(np.size(h(x))) @ _fd_jacobian(h, x),
    "vmap": lambda h, x: np.concatenate([np.ravel(h(row)) for row in batch_rows(x)]),
    "jacfwd": lambda h, x: np.ravel(_fd_jacobian(h, x)),
    "jacrev": lambda h, x: np.ravel(_fd_jacobian(h, x)),
    "hessian": lambda h, x: np.ravel(_fd_hessian(lambda y: _weighted(np.asarray(h(y))), x)),
    "checkpoint": lambda h, x: np.ravel(h(x)),
}


# == the constructs =============================================================================

class Construct:
    """A row of the matrix: `fun` uses the construct, `reference` computes the same in numpy."""

    def __init__(self, name, fun, reference):
        self.name, self.fun, self.reference = name, fun, reference


def _plain(x):
    return np.sin(x) * np.exp(0.3 * x) + x ** 2 * x[::-1]


def _cond(x):
    return xform.cond(np.sum(x) > 0, lambda x: np.sin(x) * x[::-1], lambda x: np.cos(x) * x,
                      x)


def _cond_ref(x):
    return np.sin(x) * x[::-1] if np.sum(x) > 0 else np.cos(x) * x


def _switch_index(s):
    return (s > -0.5).astype(np.int64) + (s > 0.5).astype(np.int64)


_BRANCHES = [lambda x: np.exp(0.5 * x), lambda x: np.sin(x) * x, lambda x: x ** 3]


def _switch(x):
    return xform.switch(_switch_index(x[0] + x[2]), _BRANCHES, x)


def _switch_ref(x):
    return _BRANCHES[int(_switch_index(x[0] + x[2]))](x)


def _while_body(c):
    return c * 1.3 + 0.1 * np.sin(c)


def _while(x):
    return xform.while_loop(lambda c: np.sum(c * c) < 6.0, _while_body, x)


def _while_ref(x):
    while np.sum(x * x) < 6.0:
        x = _while_body(x)
    return x


def _fori_body(i, c):
    return np.sin(c) * 0.9 + c * (0.2 + 0.1 * i) + c[::-1] * 0.05


def _fori(x):
    return xform.fori_loop(0, 4, _fori_body, x)


def _fori_ref(x):
    for i in range(4):
        x = _fori_body(i, x)
    return x


_SCAN_XS = np.linspace(-1.0, 1.0, 5)


def _scan_step(c, s):
    new = np.tanh(c + s) * 1.1 + 0.2 * c
    return new, np.sum(new * new)


def _scan(x):
    carry, ys = xform.scan(_scan_step, x, _SCAN_XS)
    return carry * np.sum(ys)


def _scan_ref(x):
    ys = []
    for s in _SCAN_XS:
        x, y = _scan_step(x, s)
        ys.append(y)
    return x * np.sum(ys)


def _callee_math(x):
    return np.log1p(x * x) * np.cos(x)


_callee = xform.function(_callee_math)


def _call(x):
    return _callee(x) + _callee(2.0 * x)


def _call_ref(x):
    return _callee_math(x) + _callee_math(2.0 * x)


@xform.function
def _recurse(x, n):
    return xform.cond(n > 0, lambda: np.sin(_recurse(x, n - 1)) + 0.5 * x, lambda: x)


def _recursion(x):
    return _recurse(x, 3)


def _recursion_ref(x):
    y = x
    for _ in range(3):
        y = np.sin(y) + 0.5 * x
    return y


def _softplus_math(x):
    return np.log1p(np.exp(x))


_softplus = xform.custom_jvp(_softplus_math)


@_softplus.defjvp
def _softplus_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    return _softplus(x), t / (1.0 + np.exp(-x))


def _custom_jvp(x):
    return _softplus(x * x[::-1]) * np.sin(x)


def _custom_jvp_ref(x):
    return _softplus_math(x * x[::-1]) * np.sin(x)


# A custom_vjp whose bwd calls another custom_vjp function (the case).
_scale_ct = xform.custom_vjp(lambda ct, x: ct * np.cos(x))
_scale_ct.defvjp(lambda ct, x: (ct * np.cos(x), (ct, x)),
                 lambda res, g: (g * np.cos(res[1]), -g * res[0] * np.sin(res[1])))
_sin = xform.custom_vjp(np.sin)
_sin.defvjp(lambda x: (np.sin(x), x), lambda x, ct: (_scale_ct(ct, x),))


def _custom_vjp(x):
    return _sin(x * 1.5) * x[::-1]


def _custom_vjp_ref(x):
    return np.sin(x * 1.5) * x[::-1]


def _scalar_math(a, b):
    return np.sin(a) * b + np.exp(0.2 * a)


def _threaded(x):
    return xform.threaded_map(_scalar_math, x, x[::-1] * 0.5)


def _threaded_ref(x):
    return _scalar_math(x, x[::-1] * 0.5)


def _region_math(x):
    return np.sin(np.cos(x) * 2.0) * np.exp(0.1 * x)


@functools.lru_cache(maxsize=None)
def _region_graph():
    # a region of 3 elements: fused although fusion's cost model would leave it alone
    fuse = sys.modules["xform.passes.fuse"]
    size, fuse.FUSION_MIN_SIZE = fuse.FUSION_MIN_SIZE, 0
    try:
        graph = fuse_elementwise(xform.make_graph(_region_math)(X0))
    finally:
        fuse.FUSION_MIN_SIZE = size
    assert any(e.primitive.name == "elementwise" for e in graph.equations)
    return graph


def _fused(x):
    return xform.eval_graph(_region_graph(), x)[0] * x[::-1]


def _fused_ref(x):
    return _region_math(x) * x[::-1]


CONSTRUCTS = [
    Construct("plain", _plain, _plain),
    Construct("cond", _cond, _cond_ref),
    Construct("switch", _switch, _switch_ref),
    Construct("while_loop", _while, _while_ref),
    Construct("fori_loop", _fori, _fori_ref),
    Construct("scan", _scan, _scan_ref),
    Construct("call", _call, _call_ref),
    Construct("recursion", _recursion, _recursion_ref),
    Construct("custom_jvp", _custom_jvp, _custom_jvp_ref),
    Construct("custom_vjp", _custom_vjp, _custom_vjp_ref),
    Construct("threaded_map", _threaded, _threaded_ref),
    Construct("fused_region", _fused, _fused_ref),
]

def _inplace(x):
    y = x.copy()
    y[1:] += np.sin(x[:-1])
    y[0] *= 2
    return y


def _random_draw(x):
    # A fresh seeded generator per call: every evaluation (each finite-difference point, each
    # row of a vmap's Python loop) sees the same draws, yet each call really draws, so a
    # cached graph must not freeze the draw as a constant.
    rng = np.random.default_rng(0)
    eps = rng.standard_normal(3)
    return x * eps + np.sin(x)


# Hook for constructs built elsewhere: one Construct per row. The references are the same
# code run on numpy arrays.
EXTRA_CONSTRUCTS: list[Construct] = [
    Construct("inplace", _inplace, _inplace),
    Construct("random_draw", _random_draw, _random_draw),
]

# Hessian-vector products (jvp of grad, grad of jvp, vjp of grad) under a third transform.
HVP_TRIPLES = [(outer, "jvp", "grad") for outer in TRANSFORMS] + [
    ("grad", "jvp", "checkpoint"), ("jvp", "grad", "checkpoint"), ("vjp", "grad", "vmap"),
    ("grad", "grad", "checkpoint"), ("vmap", "vjp", "grad"), ("checkpoint", "grad", "jvp")]

# Cells left out, each with its reason. (None today.)
EXCLUDED: dict[tuple, str] = {}


def constructs():
    return CONSTRUCTS + EXTRA_CONSTRUCTS


def cells():
    """Every (transforms, construct name): pairs, then the Hessian-vector-product triples."""
    pairs = list(itertools.product(TRANSFORMS, repeat=2))
    return [(chain, c.name) for c in constructs() for chain in pairs + HVP_TRIPLES]


def _build(chain, fun):
    for name in reversed(chain):
        fun = TRANSFORMS[name](fun)
    return fun


def check_cell(chain, construct_name, x=X0):
    """Compute the cell and its reference; raise AssertionError when they differ."""
    construct = {c.name: c for c in constructs()}[construct_name]
    np.testing.assert_allclose(construct.fun(x), construct.reference(x), rtol=1e-12,
                               atol=1e-12, err_msg="primal")
    inner = _build(chain[1:], construct.fun)
    got = np.ravel(_build(chain, construct.fun)(x))
    expected = np.ravel(REFERENCES[chain[0]](inner, x))
    rtol, atol = (3e-4, 3e-5) if "hessian" in chain else (1e-5, 1e-6)
    np.testing.assert_allclose(got, expected, rtol=rtol, atol=atol,
                               err_msg=f"{' o '.join(chain)} over {construct_name}")


def matrix_counts(verbose=False):
    """(passed, total, failures): every cell not excluded run once; `verbose` prints a table
    of failures and the line "cells passed / total"."""
    passed, failures = 0, []
    total, row_totals = 0, {}
    for chain, name in cells():
        if (chain, name) in EXCLUDED:
            continue
        total += 1
        row_totals[name] = row_totals.get(name, 0) + 1
        try:
            check_cell(chain, name)
            passed += 1
        except Exception as err:     # a failing cell is reported, not raised
            failures.append((chain, name, f"{type(err).__name__}: {str(err)[:200]}"))
    if verbose:
        failed_by_row = {}
        for chain, name, why in failures:
            failed_by_row[name] = failed_by_row.get(name, 0) + 1
            print(f"FAIL {' o '.join(chain):35s} {name:14s} {why}")
        for name, row_total in row_totals.items():
            print(f"{name:14s} {row_total - failed_by_row.get(name, 0)} / {row_total}")
        print(f"cells passed / total: {passed} / {total} "
              f"({len(EXCLUDED)} excluded with reasons)")
    return passed, total, failures


@pytest.mark.parametrize("chain,construct_name", [
    pytest.param(chain, name, id=f"{'-'.join(chain)}-{name}") for chain, name in cells()
    if (chain, name) not in EXCLUDED])
def test_cell(chain, construct_name):
    check_cell(chain, construct_name)


def test_every_exclusion_has_a_reason():
    assert all(isinstance(r, str) and len(r) > 20 for r in EXCLUDED.values())


if __name__ == "__main__":
    matrix_counts(verbose=True)
