"""Contractions: the matmul, dot and einsum primitives (bilinear and multilinear); numpy's
matmul/@, dot, tensordot, einsum, inner, outer, vdot and kron over them are in xform.numpy.
"""
import string

import numpy as np

from xform.ir.avals import ShapedArray, broadcast_shapes
from xform.ir.core import Primitive
from xform.ir.ad import NOT_MAPPED, Undefined, Zero, add_tangents, aval, move_to_front, ndim
from xform.rules.helpers import defjvp, multilinear_vjp, unbroadcast
from xform.ir.registry import register

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
    batch = broadcast_shapes(a2[:-2], b2[:-2])
    return batch + a2[-2:-1] * (len(a) > 1) + b2[-1:] * (len(b) > 1)


def _matmul_abstract_eval(a, b):
    return ShapedArray(_matmul_shape(a.shape, b.shape), _result_dtype(np.matmul, (a, b)))


def _matmul_transpose(ct, a, b):
    a_shape, b_shape = aval(a).shape, aval(b).shape
    a2_shape, b2_shape = _matrix_shape(a_shape, 0), _matrix_shape(b_shape, 1)
    ct = np.reshape(ct, _matmul_shape(a2_shape, b2_shape))
    if type(a) is Undefined:
        ct_a = np.matmul(ct, np.swapaxes(np.reshape(b, b2_shape), -1, -2))
        if len(a_shape) == 1:
            ct_a = np.reshape(ct_a, aval(ct_a).shape[:-2] + a_shape)
        return unbroadcast(ct_a, a.aval), None
    ct_b = np.matmul(np.swapaxes(np.reshape(a, a2_shape), -1, -2), ct)
    if len(b_shape) == 1:
        ct_b = np.reshape(ct_b, aval(ct_b).shape[:-1])
    return None, unbroadcast(ct_b, b.aval)


def _matmul_batch(size, args, dims):
    shapes = [aval(x).shape if d is NOT_MAPPED else aval(x).shape[:d] + aval(x).shape[d + 1:]
              for x, d in zip(args, dims)]
    batch_rank = max(max(len(s), 2) - 2 for s in shapes)
    operands = []
    for side, (x, d, shape) in enumerate(zip(args, dims, shapes)):
        matrix = _matrix_shape(shape, side)
        if d is NOT_MAPPED:
            operands.append(np.reshape(x, matrix))
            continue
        # Pad with unit dims so the batch axis leads even when the other operand has more.
        pad = (1,) * (batch_rank - (len(matrix) - 2))
        operands.append(np.reshape(move_to_front(x, d, size), (size,) + pad + matrix))
    out = matmul_p.bind(*operands)
    return np.reshape(out, (size,) + _matmul_shape(*shapes)), 0


register(matmul_p, impl=np.matmul, abstract_eval=_matmul_abstract_eval,
         jvp=defjvp(matmul_p, lambda t, a, b, ans: matmul_p.bind(t, b),
                    lambda t, a, b, ans: matmul_p.bind(a, t)),
         transpose=_matmul_transpose, vjp=multilinear_vjp(_matmul_transpose),
         batch=_matmul_batch, symbolic_zeros=True, role="matmul")


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
        ct_a = np.tensordot(ct, b, (tuple(range(a_ndim - 1, ndim(ct))), b_free))
        return unbroadcast(ct_a, a.aval), None
    ct_b = np.moveaxis(np.tensordot(a, ct, (a_free, a_free)), 0, k_axis)
    return None, unbroadcast(ct_b, b.aval)


def _dot_batch(size, args, dims):
    (a, b), (a_dim, b_dim) = args, dims
    if b_dim is NOT_MAPPED:
        return dot_p.bind(move_to_front(a, a_dim, size), b), 0
    a_ndim = ndim(a) - (a_dim is not NOT_MAPPED)
    b_ndim = ndim(b) - 1
    if a_dim is NOT_MAPPED:
        # b's batch axis becomes a free axis of b: the column axis of a 1-d b, else its first.
        b = np.moveaxis(b, b_dim, -1 if b_ndim == 1 else 0)
        return dot_p.bind(a, b), a_ndim - 1
    # A batch axis shared by both operands is not a dot; it is an einsum.
    return _einsum_batch(size, args, dims, subscripts=_dot_subscripts(a_ndim, b_ndim))


register(dot_p, impl=np.dot, abstract_eval=_dot_abstract_eval,
         jvp=defjvp(dot_p, lambda t, a, b, ans: dot_p.bind(t, b),
                    lambda t, a, b, ans: dot_p.bind(a, t)),
         transpose=_dot_transpose, vjp=multilinear_vjp(_dot_transpose), batch=_dot_batch,
         symbolic_zeros=True)


# -- einsum: subscripts in explicit form with one letter per axis ('...' spelled out) ----------

einsum_p = Primitive("einsum")


def _parse(subscripts):
    inputs, output = subscripts.split("->")
    return inputs.split(","), output


def fresh_letters(used, count):
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
    fresh = iter(fresh_letters(set("".join(specs)), repeats))
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
    ct_k = np.broadcast_to(ct_k, broadcast_shapes(aval(ct_k).shape, target.shape))
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
    (letter,) = fresh_letters(set(subscripts), 1)
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
         vjp=multilinear_vjp(_einsum_transpose), batch=_einsum_batch, symbolic_zeros=True)


__all__ = ["dot_p", "einsum_p", "fresh_letters", "matmul_p"]
