"""N-dimensional convolution (SciPy's `scipy.signal.convolve` underneath): one bilinear
primitive in modes "full" and "valid" (the first operand at least as large as the second in
every axis); its transposes are convolutions of the cotangent with a flipped operand. And
numpy's 1-d `np.correlate` as one primitive (numpy's own loop, so that the values are its
bits and an inf meets no zero padding), whose transposes are correlations too. And SciPy's
IIR filter `lfilter`, whose derivatives and transposes are filters.
"""
import numpy as np

from xform.ir.ad import NOT_MAPPED, Undefined, aval, move_to_front
from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.registry import register
from xform.rules.helpers import defjvp, multilinear_vjp

convolve_p = Primitive("convolve")


def _convolve_impl(x, k, *, mode, method):
    import scipy.signal
    return scipy.signal.convolve(x, k, mode=mode, method=method)


def _convolve_abstract_eval(x, k, *, mode, method):
    if x.ndim != k.ndim:
        raise ValueError(f"convolve: inputs must have the same number of dimensions, got "
                         f"{x.shape} and {k.shape}")
    if mode == "full":
        shape = tuple(a + b - 1 for a, b in zip(x.shape, k.shape))
    elif mode == "valid":
        if any(a < b for a, b in zip(x.shape, k.shape)):
            raise ValueError(f"convolve: in 'valid' mode the first input {x.shape} must be at "
                             f"least as large as the second {k.shape} in every dimension")
        shape = tuple(a - b + 1 for a, b in zip(x.shape, k.shape))
    else:
        raise ValueError(f"convolve: mode must be 'full' or 'valid', got {mode!r}")
    return ShapedArray(shape, np.result_type(x.dtype, k.dtype))


def _convolve_transpose(ct, x, k, *, mode, method):
    flip = np.flip
    if type(x) is Undefined:
        # full: x-bar = valid(ct, flip(k)); valid: x-bar = full(ct, flip(k))
        other = "valid" if mode == "full" else "full"
        return convolve_p.bind(ct, flip(k), mode=other, method=method), None
    if mode == "full":
        return None, convolve_p.bind(ct, flip(x), mode="valid", method=method)
    return None, convolve_p.bind(flip(x), ct, mode="valid", method=method)


def _convolve_batch(size, args, dims, *, mode, method):
    (x, k), (x_dim, k_dim) = args, dims
    if k_dim is NOT_MAPPED:
        # the batch axis is one more axis the kernel (of length 1 there) slides along
        x = move_to_front(x, x_dim, size)
        return convolve_p.bind(x, np.expand_dims(k, 0), mode=mode, method=method), 0
    if x_dim is NOT_MAPPED and mode == "full":
        k = move_to_front(k, k_dim, size)
        return convolve_p.bind(np.expand_dims(x, 0), k, mode=mode, method=method), 0
    x = move_to_front(x, x_dim, size) if x_dim is not NOT_MAPPED else None
    k = move_to_front(k, k_dim, size)
    outs = [convolve_p.bind(args[0] if x is None else x[i], k[i], mode=mode, method=method)
            for i in range(size)]
    return np.stack(outs), 0


register(convolve_p, impl=_convolve_impl, abstract_eval=_convolve_abstract_eval,
         jvp=defjvp(convolve_p,
                    lambda t, x, k, ans, **params: convolve_p.bind(t, k, **params),
                    lambda t, x, k, ans, **params: convolve_p.bind(x, t, **params)),
         transpose=_convolve_transpose, vjp=multilinear_vjp(_convolve_transpose),
         batch=_convolve_batch, symbolic_zeros=True)


def convolve(x, k, *, mode="full", method="auto"):
    """The n-d convolution of `x` and `k` ("full" or "valid", x the larger in "valid").

    >>> from xform.rules.signal import convolve
    >>> convolve(np.array([1.0, 2.0, 3.0]), np.array([0.0, 1.0]))
    array([0., 1., 2., 3.])
    """
    return convolve_p.bind(x, k, mode=mode, method=method)


correlate_p = Primitive("correlate")
"""numpy's `np.correlate(a, v, mode)` of 1-d operands of one dtype: c[k] = sum_n a[n + k]
conj(v[n]), mode "valid", "same" or "full"."""


def _correlate_impl(a, v, *, mode):
    return np.correlate(a, v, mode=mode)


def _correlate_lengths(n, m, mode):
    """(length, start): the result's length and where it starts in the "full" correlation."""
    if mode == "full":
        return n + m - 1, 0
    if mode == "valid":
        return max(n, m) - min(n, m) + 1, min(n, m) - 1
    # "same": numpy centres the longer operand's length, counting from the longer side
    return max(n, m), (m - 1) - m // 2 if n >= m else n // 2


def _correlate_abstract_eval(a, v, *, mode):
    if a.ndim != 1 or v.ndim != 1 or a.dtype != v.dtype:
        raise ValueError(f"correlate: 1-d operands of one dtype, got {a} and {v}")
    length, _ = _correlate_lengths(a.shape[0], v.shape[0], mode)
    return ShapedArray((length,), a.dtype)


def _conj(x):
    return np.conjugate(x) if aval(x).dtype.kind == "c" else x


def _correlate_transpose(ct, a, v, *, mode):
    n, m = aval(a).shape[0], aval(v).shape[0]
    length, start = _correlate_lengths(n, m, mode)
    full = np.pad(ct, (start, n + m - 1 - start - length))
    if type(a) is Undefined:
        # full[k] = sum_j a[j] conj(v[j - k + m - 1]): a-bar[j] = sum_i full[j + i] conj(v[m-1-i])
        return correlate_p.bind(full, np.flip(v), mode="valid"), None
    # conjugate-linear in v: v-bar = conj(sum_k full[k] a[k + i - (m - 1)])
    return None, np.flip(correlate_p.bind(_conj(full), a, mode="valid"))


def _correlate_batch(size, args, dims, *, mode):
    rows = [[arg if dim is NOT_MAPPED else move_to_front(arg, dim, size)[i]
             for arg, dim in zip(args, dims)] for i in range(size)]
    return np.stack([correlate_p.bind(a, v, mode=mode) for a, v in rows]), 0


register(correlate_p, impl=_correlate_impl, abstract_eval=_correlate_abstract_eval,
         jvp=defjvp(correlate_p,
                    lambda t, a, v, ans, **params: correlate_p.bind(t, v, **params),
                    lambda t, a, v, ans, **params: correlate_p.bind(a, t, **params)),
         transpose=_correlate_transpose, vjp=multilinear_vjp(_correlate_transpose),
         batch=_correlate_batch, symbolic_zeros=True)


lfilter_p = Primitive("lfilter")
"""SciPy's `lfilter(b, a, x)` along the last axis of `x`, from rest: the y with
sum_k a[k] y[n-k] = sum_k b[k] x[n-k]. Linear in `x` and in `b`; its tangent in `a` is a
filter of `y`, so every derivative is a filter again."""


def _lfilter_impl(b, a, x):
    import scipy.signal
    return scipy.signal.lfilter(b, a, x, axis=-1)


def _lfilter_abstract_eval(b, a, x):
    if b.ndim != 1 or a.ndim != 1 or x.ndim == 0:
        raise ValueError(f"lfilter: 1-d coefficients and a signal, got {b}, {a} and {x}")
    return ShapedArray(x.shape, np.result_type(b.dtype, a.dtype, x.dtype, np.float64))


def _lfilter_transpose(ct, b, a, x):
    # the filter is y = T x, T lower-triangular Toeplitz: T^T is T with time reversed
    ct = np.flip(ct, -1)
    if type(x) is Undefined:
        return None, None, np.flip(lfilter_p.bind(b, a, ct), -1)
    if type(b) is Undefined:
        # y = (1/a) filter of the convolution of b with x: b-bar[k] = sum_n g[n] x[n - k]
        g = np.flip(lfilter_p.bind(np.ones(1, aval(a).dtype), a, ct), -1)
        n = aval(x).shape[-1]
        return tuple([np.stack([np.sum(g[..., k:] * x[..., :n - k]) if k < n
                                else np.zeros((), aval(g).dtype)
                                for k in range(aval(b).shape[0])]), None, None])
    raise ValueError("lfilter is not linear in its denominator")


def _lfilter_batch(size, args, dims):
    (b, a, x), (b_dim, a_dim, x_dim) = args, dims
    if b_dim is NOT_MAPPED and a_dim is NOT_MAPPED:
        # the filter runs along the last axis: the batch is one more leading axis
        return lfilter_p.bind(b, a, move_to_front(x, x_dim, size)), 0
    rows = [[arg if dim is NOT_MAPPED else move_to_front(arg, dim, size)[i]
             for arg, dim in zip(args, dims)] for i in range(size)]
    return np.stack([lfilter_p.bind(*row) for row in rows]), 0


register(lfilter_p, impl=_lfilter_impl, abstract_eval=_lfilter_abstract_eval,
         jvp=defjvp(lfilter_p,
                    # a * y = b * x (convolutions): a * dy = db * x - da * y + b * dx
                    lambda t, b, a, x, ans: lfilter_p.bind(t, a, x),
                    lambda t, b, a, x, ans: -lfilter_p.bind(t, a, ans),
                    lambda t, b, a, x, ans: lfilter_p.bind(b, a, t)),
         transpose=_lfilter_transpose, batch=_lfilter_batch)


__all__ = ["convolve", "convolve_p", "correlate_p", "lfilter_p"]
