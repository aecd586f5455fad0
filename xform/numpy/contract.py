"""numpy's contractions on tracers: matmul/@, dot, inner, vdot, tensordot, outer, kron and
einsum, computed as numpy computes them (so values agree bit for bit) with the matmul, dot and
einsum primitives."""
import math
import string
from collections import Counter

import numpy as np

from xform.errors import shape_error, unsupported_error
from xform.ir.ad import aval, ndim
from xform.ir.tracer import Tracer
from xform.numpy.protocol import implements
from xform.numpy.shape import ravel, reshape, swapaxes, transpose
from xform.rules.contract import dot_p, einsum_p, fresh_letters, matmul_p


def _asarray(x):
    """numpy's `asarray` on an operand: Python scalars and weak tracers become strong arrays."""
    if type(x) is Tracer:
        return x.astype(x.dtype) if x.aval.weak_type else x
    return np.asarray(x)


@implements(np.matmul)
def matmul(a, b):
    """`np.matmul` and `a @ b` (the ufunc's axes/axis options are not supported)."""
    return matmul_p.bind(_asarray(a), _asarray(b))


def _common_dtype(a, b):
    return np.result_type(aval(a).dtype, aval(b).dtype)


@implements(np.dot)
def dot(a, b, out=None):
    """`np.dot`: 0-d operands multiply, 1-d and 2-d ones are a matmul, N-d ones a `dot`."""
    if out is not None:
        raise unsupported_error("numpy.dot(..., out=...)")
    a, b = _asarray(a), _asarray(b)
    if ndim(a) == 0 or ndim(b) == 0:
        # numpy casts both operands to their common type, then multiplies.
        dtype = _common_dtype(a, b)
        return np.multiply(a.astype(dtype), b.astype(dtype))
    if ndim(a) <= 2 and ndim(b) <= 2:
        return matmul_p.bind(a, b)
    return dot_p.bind(a, b)


@implements(np.inner)
def inner(a, b):
    """`np.inner`: numpy computes it as `dot(a, swapaxes(b, -1, -2))`."""
    a, b = _asarray(a), _asarray(b)
    if ndim(b) >= 2 and ndim(a) > 0:
        b = swapaxes(b, -1, -2)
    return dot(a, b)


@implements(np.vdot)
def vdot(a, b):
    """`np.vdot`: the dot of the flattened operands (the first conjugated)."""
    a, b = _asarray(a), _asarray(b)
    if aval(a).size != aval(b).size:
        raise shape_error(f"vdot: vectors have different lengths ({aval(a).size} and "
                          f"{aval(b).size})")
    if _common_dtype(a, b).kind == "c":
        a = np.conjugate(a)
    return matmul_p.bind(ravel(a), ravel(b))


def _tensordot_axes(axes, a_ndim, b_ndim):
    try:
        iter(axes)
    except TypeError:
        axes = (tuple(range(-int(axes), 0)), tuple(range(int(axes))))
    if len(axes) != 2:
        raise shape_error("tensordot: axes must be an int or a pair of axis sequences")
    result = []
    for side, ndim_ in zip(axes, (a_ndim, b_ndim)):
        side = tuple(side) if isinstance(side, (tuple, list)) else (side,)
        for ax in side:
            if not -ndim_ <= ax < ndim_:
                raise shape_error(f"tensordot: axis {ax} is out of bounds for an array of "
                                  f"dimension {ndim_}")
        result.append([int(ax) % ndim_ for ax in side])
    return result


@implements(np.tensordot)
def tensordot(a, b, axes=2):
    """`np.tensordot`, as numpy computes it: transpose, reshape to matrices, one matmul."""
    a, b = _asarray(a), _asarray(b)
    a_shape, b_shape = aval(a).shape, aval(b).shape
    axes_a, axes_b = _tensordot_axes(axes, len(a_shape), len(b_shape))
    if len(axes_a) != len(axes_b) or any(a_shape[i] != b_shape[j]
                                         for i, j in zip(axes_a, axes_b)):
        raise shape_error(f"tensordot: shape-mismatch for sum: shapes {a_shape} and "
                          f"{b_shape} along axes {axes_a} and {axes_b}")
    free_a = [i for i in range(len(a_shape)) if i not in axes_a]
    free_b = [i for i in range(len(b_shape)) if i not in axes_b]
    contracted = math.prod(a_shape[i] for i in axes_a)
    a2 = reshape(transpose(a, free_a + axes_a),
                 (math.prod(a_shape[i] for i in free_a), contracted))
    b2 = reshape(transpose(b, axes_b + free_b),
                 (contracted, math.prod(b_shape[i] for i in free_b)))
    # numpy's np.dot of two matrices; matmul computes it bit for bit the same.
    out = matmul_p.bind(a2, b2)
    return reshape(out, tuple(a_shape[i] for i in free_a) + tuple(b_shape[i] for i in free_b))


@implements(np.outer)
def outer(a, b, out=None):
    """`np.outer`: the flattened operands multiplied as a column times a row."""
    if out is not None:
        raise unsupported_error("numpy.outer(..., out=...)")
    a, b = _asarray(a), _asarray(b)
    return np.multiply(reshape(a, (-1, 1)), reshape(b, (1, -1)))


@implements(np.kron)
def kron(a, b):
    """`np.kron`, as numpy computes it: interleave unit axes, multiply, merge axis pairs."""
    a, b = _asarray(a), _asarray(b)
    if ndim(a) < ndim(b):
        a = reshape(a, (1,) * (ndim(b) - ndim(a)) + aval(a).shape)
    if ndim(a) == 0 or ndim(b) == 0:
        return np.multiply(a, b)
    a_shape = aval(a).shape
    b_shape = (1,) * (len(a_shape) - ndim(b)) + aval(b).shape
    a = reshape(a, tuple(d for n in a_shape for d in (n, 1)))
    b = reshape(b, tuple(d for n in b_shape for d in (1, n)))
    return reshape(np.multiply(a, b), tuple(m * n for m, n in zip(a_shape, b_shape)))



def _sublist_subscripts(args):
    """numpy's interleaved form `einsum(a, [0, 1], b, [1, 2], [0, 2])` as a subscripts string
    and the operands; labels 0-25 are 'A'-'Z', 26-51 'a'-'z'."""
    def spell(sublist):
        labels = []
        for label in sublist:
            if label is Ellipsis:
                labels.append("...")
            elif isinstance(label, (int, np.integer)) and 0 <= label < 52:
                labels.append(string.ascii_uppercase[label] if label < 26
                              else string.ascii_lowercase[label - 26])
            else:
                raise shape_error(f"einsum: subscript {label!r} must be an integer in [0, 52) "
                                   "or Ellipsis")
        return "".join(labels)
    pairs = len(args) // 2
    operands = list(args[0:2 * pairs:2])
    subscripts = ",".join(spell(s) for s in args[1:2 * pairs:2])
    if len(args) % 2:
        subscripts += "->" + spell(args[-1])
    return subscripts, operands


def _canonical_subscripts(subscripts, ndims):
    """numpy's subscripts in explicit form with '...' spelled out in fresh letters:
    ('ij,jk', (2, 2)) -> 'ij,jk->ik'; ('...i,i', (3, 1)) -> 'ABi,i->AB'."""
    compact = subscripts.replace(" ", "")
    inputs, arrow, output = compact.partition("->")
    specs = inputs.split(",")
    if len(specs) != len(ndims):
        raise shape_error(f"einsum: {len(ndims)} operands for the {len(specs)} operand "
                          f"subscripts of '{subscripts}'")
    for spec in specs + [output]:
        bare = spec.replace("...", "", 1)
        if bare and not (bare.isascii() and bare.isalpha()):
            raise shape_error(f"einsum: invalid subscripts '{subscripts}': subscripts must "
                              "be letters, with at most one '...' per operand")
    ellipsis_ranks = []
    for i, (spec, ndim_) in enumerate(zip(specs, ndims)):
        named = len(spec.replace("...", ""))
        if named > ndim_ or ("..." not in spec and named != ndim_):
            raise shape_error(f"einsum: operand {i} has {ndim_} dimensions but its "
                              f"subscripts '{spec}' name {named}")
        ellipsis_ranks.append(ndim_ - named)
    n_ellipsis = max(ellipsis_ranks, default=0)
    fresh = "".join(fresh_letters(set(compact), n_ellipsis))
    specs = [s.replace("...", fresh[n_ellipsis - r:]) for s, r in zip(specs, ellipsis_ranks)]
    counts = Counter("".join(specs))
    if not arrow:
        # Implicit output: the broadcast axes, then the subscripts used once, in ASCII order.
        output = "..." + "".join(sorted(c for c, n in counts.items()
                                        if n == 1 and c not in fresh))
    elif "..." not in output and n_ellipsis:
        raise shape_error(f"einsum: '{subscripts}' has '...' axes in its operands but not "
                          "in its output")
    output = output.replace("...", fresh)
    for c in output:
        if c not in counts or output.count(c) > 1:
            raise shape_error(f"einsum: output subscript '{c}' of '{subscripts}' must appear "
                              "once in the output and in some operand")
    return ",".join(specs) + "->" + output


@implements(np.einsum)
def einsum(*operands, out=None, optimize=False, dtype=None, order="K", casting="safe"):
    """`np.einsum`, string or interleaved form, with '...' and repeated subscripts.

    `optimize` is accepted and ignored: the contraction is one np.einsum call, as numpy's
    default (optimize=False) is. `order` only affects memory layout; out and dtype are not
    supported.
    """
    if out is not None or dtype is not None:
        raise unsupported_error("numpy.einsum(..., out/dtype=...)")
    if isinstance(operands[0], str):
        subscripts, operands = operands[0], list(operands[1:])
    else:
        subscripts, operands = _sublist_subscripts(operands)
    operands = [_asarray(x) for x in operands]
    subscripts = _canonical_subscripts(subscripts, [ndim(x) for x in operands])
    return einsum_p.bind(*operands, subscripts=subscripts)
