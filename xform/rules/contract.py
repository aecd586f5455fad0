"""Contractions: the matmul, dot and einsum primitives (bilinear and multilinear), and the numpy
functions built on them: matmul/@, dot, tensordot, einsum, inner, outer, vdot, kron.
"""
import math
import string
from collections import Counter

import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.tracer import Tracer, _unsupported, implements, shape_error
from xform.ir.ad import NOT_MAPPED, Undefined, Zero, add_tangents, aval, move_to_front, ndim
from xform.rules.helpers import defjvp, unbroadcast
from xform.ir.rules import register
from xform.rules.shape import broadcast_to, moveaxis, ravel, reshape, swapaxes, transpose

_LETTERS = string.ascii_letters
_DTYPE_CACHE: dict = {}


def _result_dtype(numpy_fn, avals, *static):
    """The dtype `numpy_fn(*static, *operands)` returns, asked on all-ones stand-ins of the
    operands' ranks (cached). Weak types play no part: these functions turn Python scalars
    into arrays before promoting (`np.dot(float32_array, 2.0)` is float64)."""
    key = (numpy_fn, static, tuple((a.ndim, a.dtype) for a in avals))
    dtype = _DTYPE_CACHE.get(key)
    if dtype is None:
        dtype = np.result_type(numpy_fn(*static, *[np.ones((1,) * a.ndim, a.dtype)
                                                   for a in avals]))
        _DTYPE_CACHE[key] = dtype
    return dtype


def _asarray(x):
    """numpy's `asarray` on an operand: Python scalars and weak tracers become strong arrays."""
    if type(x) is Tracer:
        return x.astype(x.dtype) if x.aval.weak_type else x
    return np.asarray(x)


# -- matmul: numpy's gufunc (n?,k),(k,m?)->(n?,m?) with broadcast batch dimensions ------------

matmul_p = Primitive("matmul")


def _matrix_shape(shape, side):
    """The shape numpy promotes a 1-d matmul operand to: a row on the left, a column on the
    right."""
    if len(shape) != 1:
        return shape
    return (1,) + shape if side == 0 else shape + (1,)


def _matmul_shape(a, b):
    for i, shape in enumerate((a, b)):
        if not shape:
            raise ValueError(f"matmul: input operand {i} does not have enough dimensions "
                             "(has 0, (n?,k),(k,m?)->(n?,m?) requires 1)")
    a2, b2 = _matrix_shape(a, 0), _matrix_shape(b, 1)
    if a2[-1] != b2[-2]:
        raise ValueError(f"matmul: contracted dimensions differ: shapes {a} and {b} "
                         f"({a2[-1]} != {b2[-2]})")
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    return batch + a2[-2:-1] * (len(a) > 1) + b2[-1:] * (len(b) > 1)


def _matmul_abstract_eval(a, b):
    return ShapedArray(_matmul_shape(a.shape, b.shape), _result_dtype(np.matmul, (a, b)))


def _matmul_transpose(ct, a, b):
    a_shape, b_shape = aval(a).shape, aval(b).shape
    a2_shape, b2_shape = _matrix_shape(a_shape, 0), _matrix_shape(b_shape, 1)
    ct = reshape(ct, _matmul_shape(a2_shape, b2_shape))
    if type(a) is Undefined:
        ct_a = np.matmul(ct, swapaxes(reshape(b, b2_shape), -1, -2))
        if len(a_shape) == 1:
            ct_a = reshape(ct_a, aval(ct_a).shape[:-2] + a_shape)
        return unbroadcast(ct_a, a.aval), None
    ct_b = np.matmul(swapaxes(reshape(a, a2_shape), -1, -2), ct)
    if len(b_shape) == 1:
        ct_b = reshape(ct_b, aval(ct_b).shape[:-1])
    return None, unbroadcast(ct_b, b.aval)


def _matmul_batch(size, args, dims):
    shapes = [aval(x).shape if d is NOT_MAPPED else aval(x).shape[:d] + aval(x).shape[d + 1:]
              for x, d in zip(args, dims)]
    batch_rank = max(max(len(s), 2) - 2 for s in shapes)
    operands = []
    for side, (x, d, shape) in enumerate(zip(args, dims, shapes)):
        matrix = _matrix_shape(shape, side)
        if d is NOT_MAPPED:
            operands.append(reshape(x, matrix))
            continue
        # Pad with unit dims so the batch axis leads even when the other operand has more.
        pad = (1,) * (batch_rank - (len(matrix) - 2))
        operands.append(reshape(move_to_front(x, d, size), (size,) + pad + matrix))
    out = matmul_p.bind(*operands)
    return reshape(out, (size,) + _matmul_shape(*shapes)), 0


register(matmul_p, impl=np.matmul, abstract_eval=_matmul_abstract_eval,
         jvp=defjvp(matmul_p, lambda t, a, b, ans: matmul_p.bind(t, b),
                    lambda t, a, b, ans: matmul_p.bind(a, t)),
         transpose=_matmul_transpose, batch=_matmul_batch, symbolic_zeros=True)


@implements(np.matmul)
def matmul(a, b):
    """`np.matmul` and `a @ b` (the ufunc's axes/axis options are not supported)."""
    return matmul_p.bind(_asarray(a), _asarray(b))


# -- dot: np.dot with an operand of more than 2 dimensions ------------------------------------
# numpy sums each output element of an N-d dot with its own 1-d dot, where matmul would call
# gemm, which rounds differently; so N-d dot is its own primitive. 1-d and 2-d np.dot is matmul.

dot_p = Primitive("dot")


def _dot_shape(a, b):
    if not a or not b:
        raise ValueError(f"dot: 0-d operands are multiplied, not contracted ({a}, {b})")
    k_axis = max(len(b) - 2, 0)
    if a[-1] != b[k_axis]:
        raise ValueError(f"shapes {a} and {b} not aligned: {a[-1]} (dim {len(a) - 1}) != "
                         f"{b[k_axis]} (dim {k_axis})")
    return a[:-1] + b[:k_axis] + b[k_axis + 1:]


def _dot_subscripts(a_ndim, b_ndim):
    """np.dot as einsum subscripts: (3, 3) -> 'abc,dce->abde'."""
    letters = iter(_LETTERS)
    a_free = "".join(next(letters) for _ in range(a_ndim - 1))
    k = next(letters)
    b_front = "".join(next(letters) for _ in range(max(b_ndim - 2, 0)))
    b_last = next(letters) if b_ndim >= 2 else ""
    return f"{a_free}{k},{b_front}{k}{b_last}->{a_free}{b_front}{b_last}"


def _dot_abstract_eval(a, b):
    return ShapedArray(_dot_shape(a.shape, b.shape), _result_dtype(np.dot, (a, b)))


def _dot_transpose(ct, a, b):
    a_ndim, b_ndim = ndim(a), ndim(b)
    k_axis = max(b_ndim - 2, 0)
    a_free = tuple(range(a_ndim - 1))
    if type(a) is Undefined:
        b_free = tuple(i for i in range(b_ndim) if i != k_axis)
        ct_a = tensordot(ct, b, (tuple(range(a_ndim - 1, ndim(ct))), b_free))
        return unbroadcast(ct_a, a.aval), None
    ct_b = moveaxis(tensordot(a, ct, (a_free, a_free)), 0, k_axis)
    return None, unbroadcast(ct_b, b.aval)


def _dot_batch(size, args, dims):
    (a, b), (a_dim, b_dim) = args, dims
    if b_dim is NOT_MAPPED:
        return dot_p.bind(move_to_front(a, a_dim, size), b), 0
    a_ndim = ndim(a) - (a_dim is not NOT_MAPPED)
    b_ndim = ndim(b) - 1
    if a_dim is NOT_MAPPED:
        # b's batch axis becomes a free axis of b: the column axis of a 1-d b, else its first.
        b = moveaxis(b, b_dim, -1 if b_ndim == 1 else 0)
        return dot_p.bind(a, b), a_ndim - 1
    # A batch axis shared by both operands is not a dot; it is an einsum.
    return _einsum_batch(size, args, dims, subscripts=_dot_subscripts(a_ndim, b_ndim))


register(dot_p, impl=np.dot, abstract_eval=_dot_abstract_eval,
         jvp=defjvp(dot_p, lambda t, a, b, ans: dot_p.bind(t, b),
                    lambda t, a, b, ans: dot_p.bind(a, t)),
         transpose=_dot_transpose, batch=_dot_batch, symbolic_zeros=True)


def _common_dtype(a, b):
    return np.result_type(aval(a).dtype, aval(b).dtype)


@implements(np.dot)
def dot(a, b, out=None):
    """`np.dot`: 0-d operands multiply, 1-d and 2-d ones are a matmul, N-d ones a `dot`."""
    if out is not None:
        raise _unsupported("numpy.dot(..., out=...)")
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
        raise _unsupported("numpy.outer(..., out=...)")
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


# -- einsum: subscripts in explicit form with one letter per axis ('...' spelled out) ----------

einsum_p = Primitive("einsum")


def _parse(subscripts):
    inputs, output = subscripts.split("->")
    return inputs.split(","), output


def _fresh_letters(used, count):
    letters = [c for c in _LETTERS if c not in used][:count]
    if len(letters) < count:
        raise ValueError("einsum: more than 52 distinct subscripts are needed")
    return letters


def _letter_sizes(specs, shapes):
    """Each subscript's size; sizes of 1 broadcast across operands, as numpy's einsum does."""
    sizes = {}
    for i, (spec, shape) in enumerate(zip(specs, shapes)):
        if len(spec) != len(shape):
            raise ValueError(f"einsum: operand {i} has {len(shape)} dimensions but its "
                             f"subscripts '{spec}' name {len(spec)}")
        own = {}
        for letter, n in zip(spec, shape):
            if own.setdefault(letter, n) != n:
                raise ValueError(f"einsum: operand {i} repeats subscript '{letter}' on "
                                 f"dimensions of different sizes ({own[letter]} != {n})")
        for letter, n in own.items():
            known = sizes.get(letter, 1)
            if n != known and 1 not in (n, known):
                raise ValueError(f"einsum: subscript '{letter}' has size {known} in one "
                                 f"operand and {n} in operand {i}")
            sizes[letter] = n if known == 1 else known
    return sizes


def _einsum_abstract_eval(*avals, subscripts):
    specs, output = _parse(subscripts)
    if len(specs) != len(avals):
        raise ValueError(f"einsum: {len(avals)} operands for subscripts '{subscripts}'")
    sizes = _letter_sizes(specs, [a.shape for a in avals])
    return ShapedArray(tuple(sizes[c] for c in output),
                       _result_dtype(np.einsum, avals, subscripts))


def _einsum_jvp(primals, tangents, *, subscripts):
    primals = list(primals)
    ans = einsum_p.bind(*primals, subscripts=subscripts)
    t_out = Zero(aval(ans))
    for i, t in enumerate(tangents):
        if type(t) is not Zero:
            operands = primals[:i] + [t] + primals[i + 1:]
            t_out = add_tangents(t_out, einsum_p.bind(*operands, subscripts=subscripts))
    return ans, t_out


def _einsum_operand_ct(ct, operands, specs, output, k):
    """The cotangent of operand k: another einsum, of ct with the other operands.

    An output subscript may not repeat nor be absent from every input, so a repeated
    subscript of operand k gets a fresh letter tied to it by an identity matrix, and a
    subscript only operand k has comes from a vector of ones.
    """
    sizes = _letter_sizes(specs, [aval(x).shape for x in operands])
    dtype = aval(ct).dtype
    repeats = len(specs[k]) - len(set(specs[k]))
    fresh = iter(_fresh_letters(set("".join(specs)), repeats))
    in_specs = [output] + [s for i, s in enumerate(specs) if i != k]
    constants, result = [], ""
    for letter in specs[k]:
        if letter in result:
            tied = next(fresh)
            in_specs.append(letter + tied)
            constants.append(np.eye(sizes[letter], dtype=dtype))
            letter = tied
        result += letter
    for letter in result:
        if not any(letter in s for s in in_specs):
            in_specs.append(letter)
            constants.append(np.ones(sizes[letter], dtype))
    others = [x for i, x in enumerate(operands) if i != k]
    ct_k = einsum_p.bind(ct, *others, *constants,
                         subscripts=",".join(in_specs) + "->" + result)
    # Where operand k broadcast against size-1 axes, ct_k has them too: widen, then sum those
    # axes where it was operand k that broadcast.
    target = operands[k].aval
    ct_k = broadcast_to(ct_k, np.broadcast_shapes(aval(ct_k).shape, target.shape))
    return unbroadcast(ct_k, target)


def _einsum_transpose(ct, *operands, subscripts):
    specs, output = _parse(subscripts)
    linear = [i for i, x in enumerate(operands) if type(x) is Undefined]
    if len(linear) > 1:
        raise ValueError("einsum is linear in one operand at a time, not several")
    cts = [None] * len(operands)
    for k in linear:
        cts[k] = _einsum_operand_ct(ct, operands, specs, output, k)
    return tuple(cts)


def _einsum_batch(size, args, dims, *, subscripts):
    specs, output = _parse(subscripts)
    (letter,) = _fresh_letters(set(subscripts), 1)
    batched = []
    for x, d, spec in zip(args, dims, specs):
        if d is not NOT_MAPPED:
            d %= ndim(x)
            spec = spec[:d] + letter + spec[d:]
        batched.append(spec)
    out = einsum_p.bind(*args, subscripts=",".join(batched) + "->" + letter + output)
    return out, 0


register(einsum_p, impl=lambda *operands, subscripts: np.einsum(subscripts, *operands),
         abstract_eval=_einsum_abstract_eval, jvp=_einsum_jvp, transpose=_einsum_transpose,
         batch=_einsum_batch, symbolic_zeros=True)


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
    fresh = "".join(_fresh_letters(set(compact), n_ellipsis))
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
        raise _unsupported("numpy.einsum(..., out/dtype=...)")
    if isinstance(operands[0], str):
        subscripts, operands = operands[0], list(operands[1:])
    else:
        subscripts, operands = _sublist_subscripts(operands)
    operands = [_asarray(x) for x in operands]
    subscripts = _canonical_subscripts(subscripts, [ndim(x) for x in operands])
    return einsum_p.bind(*operands, subscripts=subscripts)


__all__ = ["dot", "dot_p", "einsum", "einsum_p", "inner", "kron", "matmul", "matmul_p",
           "outer", "tensordot", "vdot"]
