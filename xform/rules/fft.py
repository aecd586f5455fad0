"""Discrete Fourier transforms: one linear primitive, `fft`, whose `kind` is numpy's fftn,
ifftn, rfftn or irfftn over `axes` with transform `lengths` (numpy's `s`) and `norm`. Its
transposes are transforms again, with the Hermitian weighting of the real kinds.
"""
import numpy as np

from xform.ir.avals import ShapedArray
from xform.ir.core import Primitive
from xform.ir.ad import Undefined, aval, move_to_front
from xform.ir.registry import register
from xform.rules.helpers import linear_jvp

KINDS = {"fft": np.fft.fftn, "ifft": np.fft.ifftn, "rfft": np.fft.rfftn, "irfft": np.fft.irfftn}
# the transpose of a transform normalized one way is the transform normalized the other way
_DUAL_NORM = {"backward": "forward", "ortho": "ortho", "forward": "backward"}

fft_p = Primitive("fft")


def _fft_impl(x, *, kind, axes, lengths, norm):
    return KINDS[kind](x, s=lengths, axes=axes, norm=norm)


_DTYPES: dict = {}


def _out_dtype(kind, dtype):
    """numpy's result dtype for `kind` on `dtype` (asked once, on a length-2 array)."""
    key = (kind, dtype)
    if key not in _DTYPES:
        _DTYPES[key] = KINDS[kind](np.ones(2, dtype), s=(2,), axes=(0,)).dtype
    return _DTYPES[key]


def out_shape(shape, kind, axes, lengths):
    """The shape of `kind` over `axes` with transform `lengths`, as numpy computes it."""
    shape = list(shape)
    for axis, length in zip(axes, lengths):
        shape[axis] = length
    if kind == "rfft":
        shape[axes[-1]] = lengths[-1] // 2 + 1
    return tuple(shape)


def _fft_abstract_eval(x, *, kind, axes, lengths, norm):
    return ShapedArray(out_shape(x.shape, kind, axes, lengths), _out_dtype(kind, x.dtype))


def resize(x, axes, lengths):
    """`x` cropped or zero-padded at the end of each of `axes` to `lengths` (numpy's `n`).

    Cropping and zero-padding are each other's transpose, so this is also its own transpose.
    """
    shape = aval(x).shape
    crop = [slice(None)] * len(shape)
    widths = [(0, 0)] * len(shape)
    for axis, n in zip(axes, lengths):
        crop[axis] = slice(0, n)
        widths[axis] = (0, max(n - shape[axis], 0))
    if any(shape[a] > n for a, n in zip(axes, lengths)):
        x = x[tuple(crop)]
    if any(w != (0, 0) for w in widths):
        x = np.pad(x, widths)
    return x


def _hermitian_weights(kind, axis, ndim, n, dtype):
    """Weights on the stored half spectrum (length n // 2 + 1) of a real transform of length
    n along `axis`: bins 1..(n-1)//2 stand for two bins of the full spectrum (rfft's transpose
    halves them, irfft's doubles them); bin 0 and, for even n, bin n // 2 stand for one."""
    weights = np.full(n // 2 + 1, 0.5 if kind == "rfft" else 2.0, dtype)
    weights[0] = 1.0
    if n % 2 == 0:
        weights[-1] = 1.0
    shape = [1] * ndim
    shape[axis] = n // 2 + 1
    return weights.reshape(shape)


def _real_transpose(ct, *, kind, axes, lengths, norm):
    """Re(T^T ct) for the complex transform T = fft or ifft of a real input, as transforms:
    the complex transform over all but the last axis, then per fibre of the last (length n)
    Re(F z) = irfft(d, norm="forward") with d_k = (conj(z_k) + z_(n-k)) / 2, k <= n // 2
    (for ifft, d conjugated and the ifft's own scaling)."""
    *others, axis = axes
    n = lengths[-1]
    if others:
        ct = fft_p.bind(ct, kind=kind, axes=tuple(others), lengths=lengths[:-1], norm=norm)
    mirrored = np.take(ct, (n - np.arange(n // 2 + 1)) % n, axis=axis)
    half = np.take(ct, np.arange(n // 2 + 1), axis=axis)
    if kind == "fft":
        spectrum, last_norm = np.conjugate(half) + mirrored, _DUAL_NORM[norm]
    else:
        spectrum, last_norm = half + np.conjugate(mirrored), norm
    return fft_p.bind(spectrum * 0.5, kind="irfft", axes=(axis,), lengths=(n,),
                      norm=last_norm)


def _fft_transpose(ct, x, *, kind, axes, lengths, norm):
    assert type(x) is Undefined, "fft is linear in its input"
    ndim, dual = len(x.aval.shape), _DUAL_NORM[norm]
    real_dtype = np.finfo(aval(ct).dtype).dtype
    if kind in ("fft", "ifft") and x.aval.dtype.kind != "c":
        ct_x = _real_transpose(ct, kind=kind, axes=axes, lengths=lengths, norm=norm)
    elif kind in ("fft", "ifft"):
        # the DFT matrix is symmetric: under the bilinear pairing its transpose is itself
        ct_x = fft_p.bind(ct, kind=kind, axes=axes, lengths=lengths, norm=norm)
    elif kind == "rfft":
        # Re(F^T ct) for the half spectrum ct = N irfft(conj(ct) * weights)
        weights = _hermitian_weights("rfft", axes[-1], ndim, lengths[-1], real_dtype)
        ct_x = fft_p.bind(np.conjugate(ct) * weights,
                          kind="irfft", axes=axes, lengths=lengths, norm=dual)
    else:
        weights = _hermitian_weights("irfft", axes[-1], ndim, lengths[-1], real_dtype)
        half = fft_p.bind(ct, kind="rfft", axes=axes, lengths=lengths, norm=dual)
        ct_x = np.conjugate(half * weights)
        if x.aval.dtype.kind != "c":
            ct_x = np.real(ct_x)
    ct_x = resize(ct_x, axes, [x.aval.shape[a] for a in axes])
    if aval(ct_x).dtype != x.aval.dtype:
        ct_x = ct_x.astype(x.aval.dtype)
    return (ct_x,)


def _fft_batch(size, args, dims, *, kind, axes, lengths, norm):
    x = move_to_front(args[0], dims[0], size)
    return fft_p.bind(x, kind=kind, axes=tuple(a + 1 for a in axes), lengths=lengths,
                      norm=norm), 0


register(fft_p, impl=_fft_impl, abstract_eval=_fft_abstract_eval, jvp=linear_jvp(fft_p),
         transpose=_fft_transpose, batch=_fft_batch, symbolic_zeros=True, linear_in=(0,))

__all__ = ["fft_p", "out_shape", "resize"]
