"""Jacobians and Hessians, composed from the other transforms: `jacfwd` (vmap of jvp),
`jacrev` (vmap of a vjp), `hessian` (jacfwd of jacrev)."""
from __future__ import annotations

import numpy as np

from xform.api.dispatch import aval_of_signature, leaf_signature, normalize_argnums
from xform.api.forward import jvp
from xform.api.mapping import vmap
from xform.api.reverse import vjp
from xform.errors import TypeCheckError
from xform.ir.avals import float0, is_differentiable
from xform.ir.tracer import Tracer
from xform.source_info import user_frame_info
from xform.tree import tree_map


def _std_basis(x):
    """An identity basis for `x`'s elements, shaped (size, *x.shape)."""
    shape = np.shape(x)
    size = int(np.prod(shape, dtype=np.int64))
    dtype = aval_of_signature(leaf_signature(x)).dtype
    return np.eye(size, dtype=dtype).reshape((size,) + tuple(shape))


def jacfwd(fun, argnums=0):
    """The Jacobian by forward mode: shape `out.shape + x.shape` for each output leaf.

    >>> xform.jacfwd(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    """
    def jac_f(*args):
        nums = normalize_argnums(argnums, len(args))
        jacobians = []
        for n in nums:
            x = args[n]

            def push(t, n=n):
                tangents = tuple(t if i == n else tree_map(_zero_like_tangent, a)
                                 for i, a in enumerate(args))
                return jvp(fun, args, tangents)[1]
            basis = _std_basis(x)
            columns = vmap(push)(basis)
            in_shape = np.shape(x)
            jacobians.append(tree_map(lambda c: _columns_to_jacobian(c, in_shape), columns))
        return jacobians[0] if isinstance(argnums, int) else tuple(jacobians)
    return jac_f


def _zero_like_tangent(x):
    aval = aval_of_signature(leaf_signature(x))
    return np.zeros(aval.shape, aval.dtype if is_differentiable(aval) else float0)


def _columns_to_jacobian(columns, in_shape):
    # columns: (in_size, *out_shape) -> (*out_shape, *in_shape)
    out_ndim = np.ndim(columns) - 1
    moved = np.moveaxis(columns, 0, -1) if out_ndim else columns
    return np.reshape(moved, tuple(np.shape(columns)[1:]) + tuple(in_shape))


def jacrev(fun, argnums=0):
    """The Jacobian by reverse mode: shape `out.shape + x.shape`; `fun` has one array output.

    >>> xform.jacrev(lambda x: x * 2.0)(np.ones(2))
    array([[2., 0.],
           [0., 2.]])
    """
    def jac_f(*args):
        nums = normalize_argnums(argnums, len(args))
        out, pullback = vjp(fun, *args)
        if not isinstance(out, (np.ndarray, np.generic, float, int, Tracer)):
            raise TypeCheckError("jacrev needs a function with a single array output",
                                 user_frame_info())
        basis = _std_basis(out)
        rows = vmap(lambda ct: tuple(pullback(ct)[n] for n in nums))(basis)
        out_shape = np.shape(out)
        jacobians = [np.reshape(r, tuple(out_shape) + tuple(np.shape(r)[1:])) for r in rows]
        return jacobians[0] if isinstance(argnums, int) else tuple(jacobians)
    return jac_f


def hessian(fun, argnums=0):
    """The Hessian, forward-over-reverse: `jacfwd(jacrev(fun))`.

    >>> xform.hessian(lambda x: np.sum(x ** 3))(np.array([1.0, 2.0]))
    array([[ 6.,  0.],
           [ 0., 12.]])
    """
    return jacfwd(jacrev(fun, argnums), argnums)
